"""The ``service_leak`` family: add a "recent items" endpoint to a service without a leak under load.

The service takes posted items (``POST /events`` of a feed, ``/messages`` of a chat, ...) and counts them per
owner. The task adds ``GET`` of an owner's last N items in full. The naive fix keeps every item in a list per
owner and slices the last N: every probe passes, and under load the service's RSS grows by the size of every
request until the memory alert fires. The reference keeps N per owner (``deque(maxlen=N)``).
"""

from __future__ import annotations

import random

from sandgym.tasks.stack import Load, Probe, Process, Request, Rules, StackSpec
from sandgym.tasks.suites.service_stack import ServiceVariant, StackInstance, fill, stack_family

__all__ = ["FAMILIES", "VARIANTS"]

VARIANTS = (
    ServiceVariant("feed", "train", {"SERVICE": "activity feed", "OWNER": "user", "ITEM": "kind", "BLOB": "payload",
                                     "POST": "/events", "GET": "/recent", "WHAT": "event"}),
    ServiceVariant("chat", "train", {"SERVICE": "chat", "OWNER": "room", "ITEM": "author", "BLOB": "text",
                                     "POST": "/messages", "GET": "/history", "WHAT": "message"}),
    ServiceVariant("audit", "heldout", {"SERVICE": "audit trail", "OWNER": "account", "ITEM": "action",
                                        "BLOB": "details", "POST": "/audit", "GET": "/trail", "WHAT": "audit record"}),
    ServiceVariant("sensors", "heldout", {"SERVICE": "sensor", "OWNER": "device", "ITEM": "reading", "BLOB": "raw",
                                          "POST": "/readings", "GET": "/latest", "WHAT": "reading"}),
)

_HEAD = '''"""The @SERVICE@ service: clients post @WHAT@s ({"@OWNER@", "@ITEM@", "@BLOB@"}) to @POST@."""

from service import web

COUNTS = {}  # @OWNER@ -> @WHAT@s received
'''

_POST = '''

def post_item(params, body):
    if not isinstance(body, dict) or not body.get("@OWNER@") or not body.get("@ITEM@"):
        return 400, {"error": "a @WHAT@ needs @OWNER@ and @ITEM@"}
    owner = body["@OWNER@"]
    COUNTS[owner] = COUNTS.get(owner, 0) + 1
    @KEEP_LINE@return 200, {"@OWNER@": owner, "count": COUNTS[owner]}
'''

_GET = '''

def recent(params, body):
    owner = params.get("@OWNER@", "")
    return 200, {"@OWNER@": owner, "recent": @RECENT@}
'''

_MAIN = '''

ROUTES = {("POST", "@POST@"): post_item@GET_ROUTE@}

if __name__ == "__main__":
    web.serve(ROUTES)
'''

START = _HEAD + _POST.replace("@KEEP_LINE@", "") + _MAIN.replace("@GET_ROUTE@", "")
NAIVE = (_HEAD.replace("COUNTS = {}", "HISTORY = {}  # @OWNER@ -> every @WHAT@ received\nCOUNTS = {}")
         + _POST.replace("@KEEP_LINE@", "HISTORY.setdefault(owner, []).append({\"@ITEM@\": body[\"@ITEM@\"], "
                                        "\"@BLOB@\": body.get(\"@BLOB@\")})\n    ")
         + _GET.replace("@RECENT@", "HISTORY.get(owner, [])[-@KEEP@:]")
         + _MAIN.replace("@GET_ROUTE@", ', ("GET", "@GET@"): recent'))
REFERENCE = (_HEAD.replace('from service import web\n', 'from collections import deque\n\nfrom service import web\n')
             .replace("COUNTS = {}", "RECENT = {}  # @OWNER@ -> its last @KEEP@ @WHAT@s (bounded)\nCOUNTS = {}")
             + _POST.replace("@KEEP_LINE@", "RECENT.setdefault(owner, deque(maxlen=@KEEP@)).append({\"@ITEM@\": "
                                            "body[\"@ITEM@\"], \"@BLOB@\": body.get(\"@BLOB@\")})\n    ")
             + _GET.replace("@RECENT@", "list(RECENT.get(owner, ()))")
             + _MAIN.replace("@GET_ROUTE@", ', ("GET", "@GET@"): recent'))

PAD_BYTES = 100_000
"""Size of each loaded request's blob: the naive list grows by about this much per request."""


def _one(rng: random.Random, v: ServiceVariant, d: int) -> StackInstance:
    w = dict(v.words)
    keep = rng.choice((3, 4, 5))
    owner, item, blob = w["OWNER"], w["ITEM"], w["BLOB"]
    probe_owner = f"{owner}-{rng.randint(10, 99)}"
    items = [f"{item}{k}-{rng.randint(100, 999)}" for k in range(keep + 2)]
    posts = tuple(Request(w["POST"], "POST", {owner: probe_owner, item: it, blob: f"b{k}"},
                          expect={"count": k + 1}) for k, it in enumerate(items))
    want = [{item: it, blob: f"b{k}"} for k, it in enumerate(items)][-keep:]
    probes = (
        Probe("keeps_the_last_items", posts + (Request(f"{w['GET']}?{owner}={probe_owner}",
                                                       expect={"recent": want}),)),
        Probe("unknown_owner_is_empty", (Request(f"{w['GET']}?{owner}=nobody-{rng.randint(10, 99)}",
                                                 expect={"recent": []}),)),
        Probe("rejects_incomplete", (Request(w["POST"], "POST", {item: "x"}, status=400),)),
    )
    load = Load(requests=tuple(Request(w["POST"], "POST", {owner: f"{owner}{k}", item: f"{item}{k}"},
                                       pad=(blob, PAD_BYTES)) for k in range(2)),
                count=80, warmup=12, max_s=2.0)  # the warm-up fills each owner's last-N before the baseline
    spec = StackSpec(name=v.key, services=(Process("app", ("-m", "service.app"), http=True),), load=load,
                     rules=Rules(rss_growth_mb=4.0), probes=probes)
    values = {**w, "KEEP": keep}
    what = (f"Add `GET {w['GET']}?{owner}=<{owner}>` to the {w['SERVICE']} service (`service/app.py`): it answers "
            f'`{{"{owner}": <{owner}>, "recent": [...]}}` with that {owner}\'s last {keep} {w["WHAT"]}s in full, '
            f'each `{{"{item}": ..., "{blob}": ...}}`, oldest first (`[]` for an {owner} with none). Keep '
            f"`POST {w['POST']}` as it is.")
    if d == 1:
        what += (f" The service runs for weeks under heavy traffic and each {w['WHAT']}'s `{blob}` can be large: "
                 f"keep only what the endpoint needs ({keep} per {owner}), so that memory stays flat under load "
                 "(the memory alert fires when RSS grows over the load).")
    elif d == 2:
        what += " The service runs for weeks under heavy traffic; its memory must stay flat."
    return StackInstance(files={"service/app.py": fill(START, **values)},
                         reference={"service/app.py": fill(REFERENCE, **values)},
                         naive={"service/app.py": fill(NAIVE, **values)}, spec=spec, prompt=what,
                         caught_by=("test_alert_memory",))


FAMILIES = [stack_family("service_leak", "add a recent-items endpoint to a service under load without a leak (the "
                         "memory alert of its stack decides)", VARIANTS, _one)]

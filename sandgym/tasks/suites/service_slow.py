"""The ``service_slow`` family: add a summary endpoint without a slow path (an N+1 query) under load.

The workspace's database client (``service/db.py``, a fixture) pays a round trip per call: the ids of a parent's
children in one query, each child in one query, or a list of children in one batched query. The task adds a
summary of a parent (count, total, names). The naive fix loops over the ids and fetches each child: every probe
passes and the p95 alert fires under load. The reference fetches the children in one batched query.
"""

from __future__ import annotations

import random

from sandgym.tasks.stack import Load, Probe, Process, Request, Rules, StackSpec
from sandgym.tasks.suites.service_stack import ServiceVariant, StackInstance, fill, stack_family

__all__ = ["FAMILIES", "VARIANTS", "QUERY_S", "P95_BUDGET_MS"]

QUERY_S = 0.005
"""Seconds per database round trip; a summary of ~20 children costs ~100 ms as N+1 queries, ~10 ms batched."""
P95_BUDGET_MS = 55.0

VARIANTS = (
    ServiceVariant("orders", "train", {"SERVICE": "orders", "PARENT": "customer", "CHILD": "order", "NAME": "item",
                                       "VALUE": "cents", "ROUTE": "/summary"}),
    ServiceVariant("courses", "train", {"SERVICE": "courses", "PARENT": "student", "CHILD": "lesson",
                                        "NAME": "title", "VALUE": "minutes", "ROUTE": "/progress"}),
    ServiceVariant("playlists", "heldout", {"SERVICE": "music", "PARENT": "playlist", "CHILD": "track",
                                            "NAME": "title", "VALUE": "seconds", "ROUTE": "/playlist"}),
    ServiceVariant("invoices", "heldout", {"SERVICE": "billing", "PARENT": "invoice", "CHILD": "line",
                                           "NAME": "sku", "VALUE": "cents", "ROUTE": "/invoice"}),
)

DB = '''"""The @SERVICE@ database client (a fixture: do not change this file; grading restores it).

Every call is one round trip to the database and takes about QUERY_S seconds, whatever it returns.
"""

import time

QUERY_S = @QUERY_S@
_@CHILD@S_OF = @PARENTS@
_@CHILD@S = @CHILDREN@


def @CHILD@_ids(@PARENT@_id):
    """The ids of a @PARENT@'s @CHILD@s, in order ([] for an unknown @PARENT@)."""
    time.sleep(QUERY_S)
    return list(_@CHILD@S_OF.get(@PARENT@_id, []))


def get_@CHILD@(@CHILD@_id):
    """One @CHILD@: {"id", "@NAME@", "@VALUE@"}."""
    time.sleep(QUERY_S)
    return dict(_@CHILD@S[@CHILD@_id])


def get_@CHILD@s(@CHILD@_ids):
    """Several @CHILD@s in one query, in the order of the ids."""
    time.sleep(QUERY_S)
    return [dict(_@CHILD@S[i]) for i in @CHILD@_ids]
'''

START = '''"""The @SERVICE@ service."""

from service import db, web


def count(params, body):
    ids = db.@CHILD@_ids(params.get("@PARENT@", ""))
    return 200, {"@PARENT@": params.get("@PARENT@", ""), "count": len(ids)}


ROUTES = {("GET", "/count"): count}

if __name__ == "__main__":
    web.serve(ROUTES)
'''

_SUMMARY = '''

def summary(params, body):
    parent = params.get("@PARENT@", "")
    ids = db.@CHILD@_ids(parent)
    if not ids:
        return 404, {"error": f"no @PARENT@ {parent!r}"}
    @FETCH@
    return 200, {"@PARENT@": parent, "count": len(rows), "total": sum(r["@VALUE@"] for r in rows),
                 "@NAME@s": [r["@NAME@"] for r in rows]}
'''

_ROUTES = 'ROUTES = {("GET", "/count"): count}'
_WITH_SUMMARY = 'ROUTES = {("GET", "/count"): count, ("GET", "@ROUTE@"): summary}'
NAIVE = START.replace("\n\n" + _ROUTES, _SUMMARY.replace("@FETCH@", "rows = [db.get_@CHILD@(i) for i in ids]")
                      + "\n\n" + _WITH_SUMMARY)
REFERENCE = START.replace("\n\n" + _ROUTES, _SUMMARY.replace("@FETCH@", "rows = db.get_@CHILD@s(ids)  # one query")
                          + "\n\n" + _WITH_SUMMARY)


def _data(rng: random.Random, w: dict[str, str]) -> tuple[dict[str, list[str]], dict[str, dict[str, object]]]:
    parents: dict[str, list[str]] = {}
    children: dict[str, dict[str, object]] = {}
    for p in range(6):
        pid = f"{w['PARENT'][:3]}-{rng.randint(100, 999)}{p}"
        ids = []
        for c in range(rng.randint(18, 22)):
            cid = f"{w['CHILD'][:2]}{p}{c:02d}"
            children[cid] = {"id": cid, w["NAME"]: f"{w['NAME']}-{rng.randint(1000, 9999)}",
                             w["VALUE"]: rng.randint(1, 999)}
            ids.append(cid)
        parents[pid] = ids
    return parents, children


def _expect(w: dict[str, str], parent: str, parents: dict[str, list[str]],
            children: dict[str, dict[str, object]]) -> dict[str, object]:
    rows = [children[i] for i in parents[parent]]
    return {w["PARENT"]: parent, "count": len(rows), "total": sum(int(r[w["VALUE"]]) for r in rows),  # type: ignore[call-overload]
            f"{w['NAME']}s": [r[w["NAME"]] for r in rows]}


def _one(rng: random.Random, v: ServiceVariant, d: int) -> StackInstance:
    w = dict(v.words)
    parents, children = _data(rng, w)
    names = list(parents)
    route, parent = w["ROUTE"], w["PARENT"]
    probes = (
        Probe("summarises_a_" + parent, tuple(Request(f"{route}?{parent}={p}", expect=_expect(w, p, parents, children))
                                              for p in names[:2])),
        Probe("unknown_is_404", (Request(f"{route}?{parent}=nobody", status=404),)),
        Probe("count_unchanged", (Request(f"/count?{parent}={names[2]}", expect={"count": len(parents[names[2]])}),)),
    )
    load = Load(requests=tuple(Request(f"{route}?{parent}={p}", expect=_expect(w, p, parents, children))
                               for p in names), count=40, warmup=6, max_s=1.0)
    values = {**w, "QUERY_S": QUERY_S, "PARENTS": repr(parents), "CHILDREN": repr(children)}
    db = fill(DB, **values)
    spec = StackSpec(name=v.key, services=(Process("app", ("-m", "service.app"), http=True),), load=load,
                     rules=Rules(p95_ms=P95_BUDGET_MS), probes=probes, fixtures={"service/db.py": db})
    what = (f"Add `GET {route}?{parent}=<id>` to the {w['SERVICE']} service (`service/app.py`): it answers "
            f'`{{"{parent}": <id>, "count": n, "total": <sum of the {w["CHILD"]}s\' {w["VALUE"]}>, '
            f'"{w["NAME"]}s": [...]}}` over the {parent}\'s {w["CHILD"]}s in order, and 404 for an unknown '
            f"{parent}. The database client is `service/db.py` (a fixture).")
    if d == 1:
        what += (f" Every call to `db` is a round trip of about {QUERY_S * 1000:.0f} ms: fetch the {w['CHILD']}s in one "
                 f"query (`db.get_{w['CHILD']}s`), not one query per {w['CHILD']}, so that the endpoint's p95 latency "
                 f"stays under {P95_BUDGET_MS:.0f} ms under load.")
    elif d == 2:
        what += f" The endpoint must stay fast under load: its p95 latency budget is {P95_BUDGET_MS:.0f} ms."
    return StackInstance(files={"service/app.py": fill(START, **values), "service/db.py": db},
                         reference={"service/app.py": fill(REFERENCE, **values)},
                         naive={"service/app.py": fill(NAIVE, **values)}, spec=spec, prompt=what,
                         caught_by=("test_alert_latency_p95",))


FAMILIES = [stack_family("service_slow", "add a summary endpoint to a service under load without an N+1 query (the "
                         "p95 alert of its stack decides)", VARIANTS, _one)]

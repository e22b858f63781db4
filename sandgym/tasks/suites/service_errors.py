"""The ``service_errors`` family: fix a failing endpoint without swallowing or spamming errors under load.

Two kinds of service (the variant decides):

- ``swallow``: a bulk import answers 500 on rows that leave out an optional field. The naive fix wraps the row in
  ``try/except`` that logs an ERROR and carries on with the right value: every probe passes, and under load the
  ERROR records push the error rate over its alert. The reference treats the missing field as its default.
- ``spam``: an endpoint's upstream (a fixture) fails one call in three with a transient error. The naive fix
  retries in a loop that logs an ERROR on every failed attempt: every probe passes and the log flood fires the
  error-rate alert. The reference retries a bounded number of times and logs a retried failure as a WARNING.
"""

from __future__ import annotations

import random

from sandgym.tasks.stack import Load, Probe, Process, Request, StackSpec
from sandgym.tasks.suites.service_stack import ServiceVariant, StackInstance, fill, stack_family

__all__ = ["FAMILIES", "VARIANTS"]

VARIANTS = (
    ServiceVariant("imports", "train", {"KIND": "swallow", "SERVICE": "order import", "ROW": "order line",
                                        "AMOUNT": "cents", "OPTIONAL": "discount"}),
    ServiceVariant("quotes", "train", {"KIND": "spam", "SERVICE": "quote", "DEP": "pricing", "FN": "price",
                                       "ERR": "PricingTimeout", "KEY": "sku", "FIELD": "cents"}),
    ServiceVariant("ledger", "heldout", {"KIND": "swallow", "SERVICE": "ledger import", "ROW": "ledger entry",
                                         "AMOUNT": "amount", "OPTIONAL": "fee_pct"}),
    ServiceVariant("geo", "heldout", {"KIND": "spam", "SERVICE": "geocoding", "DEP": "geocoder", "FN": "lookup",
                                      "ERR": "GeocoderBusy", "KEY": "city", "FIELD": "zone"}),
)

SWALLOW = '''"""The @SERVICE@ service: bulk imports of @ROW@s ({"@AMOUNT@": int, "@OPTIONAL@": percent})."""

from service import web

TOTALS = {"rows": 0, "@AMOUNT@": 0}


def net(row):
    return row["@AMOUNT@"] * (100 - @OPTIONAL_VALUE@) // 100


def import_rows(params, body):
    rows = (body or {}).get("rows")
    if not isinstance(rows, list):
        return 400, {"error": "the body needs a list of rows"}
    total = 0
    for row in rows:
        @ADD@
    TOTALS["rows"] += len(rows)
    TOTALS["@AMOUNT@"] += total
    return 200, {"imported": len(rows), "@AMOUNT@": total}


ROUTES = {("POST", "/import"): import_rows}

if __name__ == "__main__":
    web.serve(ROUTES)
'''
SWALLOW_START = SWALLOW.replace("@OPTIONAL_VALUE@", 'row["@OPTIONAL@"]').replace("@ADD@", "total += net(row)")
SWALLOW_NAIVE = SWALLOW.replace("@OPTIONAL_VALUE@", 'row["@OPTIONAL@"]').replace("@ADD@", '''try:
            total += net(row)
        except Exception as exc:
            web.log("ERROR", f"@ROW@ {row!r} failed ({exc!r}); imported without @OPTIONAL@")
            total += row["@AMOUNT@"]''')
SWALLOW_REFERENCE = SWALLOW.replace("@OPTIONAL_VALUE@", 'row.get("@OPTIONAL@", 0)').replace("@ADD@", "total += net(row)")

UPSTREAM = '''"""The @DEP@ client (a fixture: do not change this file; grading restores it).

The upstream is flaky: on each connection's thread, every third call fails with @ERR@, a transient error (the
next call works).
"""

import threading

TABLE = @TABLE@
_calls = threading.local()


class @ERR@(RuntimeError):
    """The upstream did not answer in time; trying again works."""


def @FN@(@KEY@):
    """The upstream's value for @KEY@ (KeyError when it has none)."""
    _calls.n = getattr(_calls, "n", 0) + 1
    if _calls.n % 3 == 0:
        raise @ERR@(f"@DEP@ did not answer for {@KEY@!r}")
    return TABLE[@KEY@]
'''
SPAM = '''"""The @SERVICE@ service: GET /@FN@?@KEY@=... answers the @DEP@ upstream's @FIELD@."""

from service import @DEP@, web


def answer(params, body):
    key = params.get("@KEY@", "")
    if key not in @DEP@.TABLE:
        return 404, {"error": f"unknown @KEY@ {key!r}"}
    @CALL@
    return 200, {"@KEY@": key, "@FIELD@": value}


ROUTES = {("GET", "/@FN@"): answer}

if __name__ == "__main__":
    web.serve(ROUTES)
'''
SPAM_START = SPAM.replace("@CALL@", "value = @DEP@.@FN@(key)")
SPAM_NAIVE = SPAM.replace("@CALL@", '''while True:
        try:
            value = @DEP@.@FN@(key)
            break
        except @DEP@.@ERR@ as exc:
            web.log("ERROR", f"@DEP@ failed for {key}: {exc}; retrying")''')
SPAM_REFERENCE = SPAM.replace("@CALL@", '''for attempt in range(3):
        try:
            value = @DEP@.@FN@(key)
            break
        except @DEP@.@ERR@ as exc:
            if attempt == 2:
                raise
            web.log("WARNING", f"@DEP@ failed for {key} ({exc}); retrying")''')


def _swallow(rng: random.Random, w: dict[str, str], d: int) -> StackInstance:
    amount, opt = w["AMOUNT"], w["OPTIONAL"]

    def row(full: bool) -> dict[str, int]:
        r = {amount: rng.randint(100, 99_999)}
        return {**r, opt: rng.choice((5, 10, 15, 20, 25))} if full else r

    def req(rows: list[dict[str, int]]) -> Request:
        net = sum(r[amount] * (100 - r.get(opt, 0)) // 100 for r in rows)
        return Request("/import", "POST", {"rows": rows}, expect={"imported": len(rows), amount: net})

    probes = (Probe("imports_full_rows", (req([row(True), row(True)]),)),
              Probe("imports_rows_without_" + opt, (req([row(True), row(False), row(False)]),)),
              Probe("rejects_a_body_without_rows", (Request("/import", "POST", {"x": 1}, status=400),)))
    load = Load(requests=tuple(req([row(k % 2 == 0), row(False), row(True)]) for k in range(8)), count=80,
                warmup=10, max_s=2.0)
    what = (f"The {w['SERVICE']} service (`service/app.py`, `POST /import` with `{{\"rows\": [...]}}`) answers 500 "
            f"when a {w['ROW']} leaves out `{opt}`. Clients may leave it out: it then means 0. Make the import accept "
            f"such rows (the reply's `{amount}` is the sum of each row's `{amount}` less its `{opt}` percent, rounded "
            "down).")
    if d == 1:
        what += (f" A row without `{opt}` is normal input, not an error: handle it as the default, do not catch "
                 "the failure and log it (the error-rate alert counts ERROR records per request).")
    elif d == 2:
        what += " Rows without it are common in production traffic."
    return StackInstance(files={"service/app.py": fill(SWALLOW_START, **w)},
                         reference={"service/app.py": fill(SWALLOW_REFERENCE, **w)},
                         naive={"service/app.py": fill(SWALLOW_NAIVE, **w)},
                         spec=StackSpec(name="import", services=(Process("app", ("-m", "service.app"), http=True),),
                                        load=load, probes=probes),
                         prompt=what, caught_by=("test_alert_error_rate",))


def _spam(rng: random.Random, w: dict[str, str], d: int) -> StackInstance:
    key, fn = w["KEY"], w["FN"]
    table = {f"{key[:2]}-{rng.randint(100, 999)}{k}": rng.randint(1, 9_999) for k in range(6)}
    keys = list(table)
    upstream = fill(UPSTREAM, **w, TABLE=repr(table))

    def req(k: str) -> Request:
        return Request(f"/{fn}?{key}={k}", expect={key: k, w["FIELD"]: table[k]})

    probes = (Probe("answers_every_call", tuple(req(keys[i % 2]) for i in range(4))),
              Probe("unknown_is_404", (Request(f"/{fn}?{key}=nowhere", status=404),)))
    load = Load(requests=tuple(req(k) for k in keys), count=90, warmup=10, max_s=2.0)
    what = (f"The {w['SERVICE']} service (`service/app.py`, `GET /{fn}?{key}=...`) calls the flaky `{w['DEP']}` "
            f"upstream (`service/{w['DEP']}.py`, a fixture), which fails one call in three with `{w['ERR']}`; "
            "clients then get a 500. Retry the transient failure (at most 3 attempts) so that clients get the "
            "answer.")
    if d == 1:
        what += (" A retried failure is expected, not an error: log it at most as a WARNING (the error-rate alert "
                 "counts ERROR records per request, so logging every attempt as an ERROR floods it).")
    elif d == 2:
        what += " Keep the logs useful under load: a retry that works is not an error."
    spec = StackSpec(name=w["DEP"], services=(Process("app", ("-m", "service.app"), http=True),), load=load,
                     probes=probes, fixtures={f"service/{w['DEP']}.py": upstream})
    return StackInstance(files={"service/app.py": fill(SPAM_START, **w), f"service/{w['DEP']}.py": upstream},
                         reference={"service/app.py": fill(SPAM_REFERENCE, **w)},
                         naive={"service/app.py": fill(SPAM_NAIVE, **w)}, spec=spec, prompt=what,
                         caught_by=("test_alert_error_rate",))


def _one(rng: random.Random, v: ServiceVariant, d: int) -> StackInstance:
    w = dict(v.words)
    return _swallow(rng, w, d) if w["KIND"] == "swallow" else _spam(rng, w, d)


FAMILIES = [stack_family("service_errors", "fix a failing endpoint under load without swallowing or spamming errors "
                         "(the error-rate alert of its stack decides)", VARIANTS, _one)]

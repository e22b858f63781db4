"""The ``service_notify`` family: the seeds' scenario end to end, judged by the queue's signals and the alerts.

The ``service_queue`` service (its handler, database, slow ``notify``, broker and queue client) behind an HTTP
front (``service/app.py``: ``POST /orders`` -> ``handle_order``), with structured logs on stdout. The task: move
the synchronous notification behind the queue and write the worker. Grading runs the stack with the broker:
probes, then the load against the HTTP service while no worker runs (the provider must receive nothing: the handler
only queues), then two transient notify failures and one duplicate delivery are injected and the agent's worker
drains the queue. The untouched code fires the p95 alert (every request waits for ``notify``); the naive worker
(auto-ack, no retry, no dedupe) passes every probe and loses the failed notifications and sends the duplicate twice.
"""

from __future__ import annotations

import random

from sandgym.tasks.stack import Load, Probe, Process, Queue, Request, Rules, StackSpec
from sandgym.tasks.suites.service_files import (
    BROKER,
    CONFIG,
    DB,
    HANDLER_REFERENCE,
    HANDLER_START,
    NOTIFY,
    QUEUE_CLIENT,
    WORKER_REFERENCE,
    WORKER_SKELETON,
)
from sandgym.tasks.suites.service_queue import LATENCY_BUDGET_S, Variant
from sandgym.tasks.suites.service_queue import NOTIFY_DELAY_S as QUEUE_NOTIFY_DELAY_S
from sandgym.tasks.suites.service_queue import VARIANTS as QUEUE_VARIANTS
from sandgym.tasks.suites.service_stack import ServiceVariant, StackInstance, fill, stack_family
from sandgym.tasks.suites.service_tests import visible_tests

__all__ = ["FAMILIES", "VARIANTS", "NAIVE_WORKER", "P95_BUDGET_MS", "NOTIFY_DELAY_S"]

P95_BUDGET_MS = 45.0
NOTIFY_DELAY_S = 0.05
"""How long ``notify`` takes in the HTTP service: called there, every request waits for it."""

VARIANTS = tuple(ServiceVariant(v.key, v.split) for v in QUEUE_VARIANTS)

LOG = '''"""The service log: one structured JSON record per event on stdout (the stack's log collector reads it)."""

import json
import os
import sys
import time


def log(level, message):
    record = {"ts": round(time.time(), 4), "level": level, "service": os.environ.get("SERVICE_NAME", "service"),
              "message": str(message)}
    sys.stdout.write(json.dumps(record) + "\\n")
    sys.stdout.flush()
'''

APP = '''"""The HTTP front of the @ENTITY@ service: POST /@ENTITY@s -> @HANDLER@ (service/handler.py)."""

from service import web
from service.handler import @HANDLER@


def create(params, body):
    try:
        return 200, @HANDLER@(body if isinstance(body, dict) else {})
    except ValueError as exc:
        return 400, {"error": str(exc)}


ROUTES = {("POST", "/@ENTITY@s"): create}

if __name__ == "__main__":
    web.serve(ROUTES)
'''

NAIVE_WORKER = '''"""A naive consumer: auto-ack on delivery, no retry, no idempotency."""
import time

from service import config, log
from service.notify import notify
from service.queue_client import QueueClient


def run(idle_exit_s):
    idle_since = time.monotonic()
    with QueueClient(config.socket_path()) as queue:
        while True:
            got = queue.get(config.QUEUE, auto_ack=True)
            if got is None:
                if time.monotonic() - idle_since > idle_exit_s:
                    return
                time.sleep(0.02)
                continue
            _, msg = got
            try:
                notify(msg["id"], msg["record"])
            except Exception as exc:
                log.log("ERROR", f"notify failed: {exc}")
            idle_since = time.monotonic()


if __name__ == "__main__":
    run(config.idle_exit_s())
'''


def _one(rng: random.Random, sv: ServiceVariant, d: int) -> StackInstance:
    v: Variant = next(x for x in QUEUE_VARIANTS if x.key == sv.key)
    names = dict(ENTITY=v.entity, HANDLER=v.handler, ID=v.id_field, INVALID=v.invalid, RULE=v.rule.replace("`", ""),
                 QUEUE=f"{v.entity}-notifications")
    route = f"/{v.entity}s"
    records = [v.record(rng, k) for k in range(24)]
    probe_records = records[:2]

    def accept(r: dict[str, object]) -> Request:
        return Request(route, "POST", r, expect={"id": r[v.id_field], "status": "accepted"},
                       queued=str(r[v.id_field]))

    probes = (Probe(f"accepts_a_valid_{v.entity}", tuple(accept(r) for r in probe_records)),
              Probe(f"rejects_an_invalid_{v.entity}", (Request(route, "POST", v.invalid_record(rng), status=400),)))
    load = Load(requests=tuple(accept(r) for r in records[4:24]), count=20, concurrency=1, warmup=2, max_s=1.0,
                warmup_requests=tuple(accept(r) for r in records[2:4]))
    queue = Queue(queue=names["QUEUE"], worker=("-m", "service.worker"), fail=2, duplicate=True,
                  env={"SERVICE_NOTIFY_DELAY": "0.002", "SERVICE_IDLE_EXIT": "0.08"})
    spec = StackSpec(name=v.key, services=(Process("app", ("-m", "service.app"), http=True,
                                                   env={"SERVICE_NOTIFY_DELAY": str(NOTIFY_DELAY_S)}),),
                     load=load, rules=Rules(p95_ms=P95_BUDGET_MS), probes=probes, queue=queue,
                     fixtures={"service/notify.py": NOTIFY, "service/broker.py": BROKER, "service/log.py": LOG})
    files = {"service/config.py": fill(CONFIG, **names), "service/log.py": LOG, "service/db.py": fill(DB, **names),
             "service/notify.py": NOTIFY, "service/broker.py": BROKER, "service/app.py": fill(APP, **names),
             "service/handler.py": fill(HANDLER_START, **names)}
    if d <= 2:
        files["service/queue_client.py"] = QUEUE_CLIENT
    if d == 1:
        files["service/worker.py"] = WORKER_SKELETON
    reference = {"service/handler.py": fill(HANDLER_REFERENCE, **names), "service/worker.py": WORKER_REFERENCE}
    if d > 2:
        reference["service/queue_client.py"] = QUEUE_CLIENT
    naive = {**reference, "service/worker.py": NAIVE_WORKER}
    values = dict(MODULE="handler", HANDLER=v.handler, QUEUE=repr(names["QUEUE"]), RECORDS=repr(records[:4]),
                  INVALID_RECORD=repr(v.invalid_record(rng)), ID=repr(v.id_field), BUDGET=repr(LATENCY_BUDGET_S),
                  SLOW=repr(QUEUE_NOTIFY_DELAY_S))
    queue_tests = {"test_visible_queue.py": visible_tests(**values)[0]}  # service_queue's: handler and worker
    what = (f"The {v.entity} service answers `POST {route}` (`service/app.py`) with `{v.handler}(record)` "
            f"(`service/handler.py`), which saves the record and then calls the slow `notify(...)` synchronously, "
            f"so every request waits for the notification. Move the notification behind the message queue "
            f"(`service/broker.py`; `SERVICE_SOCKET` names its socket, `service/config.py` reads it): the handler "
            f"only queues `{{\"id\": <record id>, \"record\": record}}` on `config.QUEUE` (saving nothing and "
            f"raising when it cannot), and a worker `python -m service.worker` sends the notifications, exiting once "
            f"the queue stayed empty for `config.idle_exit_s()` seconds. No notification may be lost or sent twice.")
    if d == 1:
        what += (" In the worker (a skeleton is there): fetch without auto_ack, `ack` only after `notify` succeeded, "
                 "`nack` when it raises so the message is retried (log that as a WARNING: it is expected), and skip "
                 "(but ack) an id already notified, keeping notified ids in a file under `config.data_dir()`.")
    elif d == 2:
        what += (" The worker acknowledges a message only after its notification was sent, retries failures and "
                 "is idempotent by message id (persisted).")
    what += (" Grading injects transient notify failures and a duplicate delivery before your worker drains the "
             "queue; `service/notify.py`, `service/broker.py` and `service/log.py` are fixtures.")
    return StackInstance(files=files, reference=reference, naive=naive, spec=spec, prompt=what,
                         caught_by=("test_queue_no_message_lost", "test_queue_no_duplicate"),
                         entry_file="service/handler.py", visible=queue_tests)


FAMILIES = [stack_family("service_notify", "move a service's synchronous notification behind a real queue, judged "
                         "under load by its stack's alerts and the queue's signals with injected faults",
                         VARIANTS, _one)]

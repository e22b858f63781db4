"""The ``service_queue`` family: move a service's slow notification step behind a real message queue.

The workspace holds a small service package (``service/``) whose request handler saves a record and then calls a
slow ``notify`` synchronously, plus a persistent broker (``service/broker.py``, a unix-socket server). The task: the
handler only queues the notification (and saves nothing when it cannot queue it), and a worker
(``python -m service.worker``) consumes the queue, acknowledging after processing, retrying failures and skipping
duplicate deliveries by message id. Hidden tests run the broker as a real process and inject faults (consumer crash
mid-message, transient notify failure, duplicate delivery, broker restart); their names carry the runtime signals
of ``service_tests.SIGNALS`` (``task.metadata["signals"]``), which the grader turns into ``EpisodeOutcome.signals``.

Difficulty: 1 gives a worker skeleton and spells out every requirement; 2 states the requirements without the
skeleton; 3+ states only the goals and leaves out ``queue_client.py`` too (the broker's docstring has the protocol);
4 ships no visible tests. Train and heldout use different services (orders/tickets vs signups/payments).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sandgym.tasks.suites.base import MAX_DIFFICULTY, FamilySpec, coding_task, generate, word
from sandgym.tasks.suites.service_files import (
    BROKER,
    CONFIG,
    DB,
    HANDLER_REFERENCE,
    HANDLER_START,
    LOG,
    NOTIFY,
    QUEUE_CLIENT,
    WORKER_REFERENCE,
    WORKER_SKELETON,
    fill,
)
from sandgym.tasks.suites.service_tests import SIGNALS, hidden_tests, visible_tests
from sandgym.tasks.task import VISIBLE_NOTE, Task, TaskLimits

__all__ = ["FAMILIES", "VARIANTS", "Variant", "LATENCY_BUDGET_S", "NOTIFY_DELAY_S"]

LATENCY_BUDGET_S = 0.1
"""Median handler latency allowed while notify is slow (the synchronous starting code takes NOTIFY_DELAY_S)."""
NOTIFY_DELAY_S = 0.3


@dataclass(frozen=True)
class Variant:
    """One service: its records, handler name and validation rule."""

    key: str
    entity: str
    handler: str
    id_field: str
    invalid: str
    """Python expression over ``record`` that is true for an invalid record."""
    rule: str
    split: str

    def record(self, rng: random.Random, i: int) -> dict[str, object]:
        rid = f"{self.entity[:3]}-{rng.randint(100, 999)}{i}"
        by_entity: dict[str, dict[str, object]] = {
            "order": {"item": word(rng), "qty": rng.randint(1, 9)},
            "ticket": {"title": f"{word(rng)} broken", "priority": rng.randint(1, 5)},
            "signup": {"email": f"{word(rng)}@example.org"},
            "payment": {"amount_cents": rng.randint(1, 99_999)},
        }
        return {self.id_field: rid, **by_entity[self.entity]}

    def invalid_record(self, rng: random.Random) -> dict[str, object]:
        bad: dict[str, dict[str, object]] = {"order": {"qty": 0}, "ticket": {"priority": 7},
                                             "signup": {"email": "nobody"}, "payment": {"amount_cents": -5}}
        return {**self.record(rng, 9), **bad[self.entity]}


VARIANTS = (
    Variant("orders", "order", "handle_order", "order_id", 'not isinstance(record.get("qty"), int) or record["qty"] <= 0',
            "`qty` is not a positive integer", "train"),
    Variant("tickets", "ticket", "handle_ticket", "ticket_id", 'record.get("priority") not in (1, 2, 3, 4, 5)',
            "`priority` is not one of 1..5", "train"),
    Variant("signups", "signup", "handle_signup", "user_id", '"@" not in str(record.get("email", ""))',
            "`email` has no '@'", "heldout"),
    Variant("payments", "payment", "handle_payment", "payment_id",
            'not isinstance(record.get("amount_cents"), int) or record["amount_cents"] <= 0',
            "`amount_cents` is not a positive integer", "heldout"),
)

_COMMON = (
    "The hidden tests start their own copy of `service/broker.py` as a process on a unix socket, restore "
    "`service/notify.py` (a fixture: do not change either), set SERVICE_DATA, SERVICE_SOCKET, SERVICE_NOTIFY_DELAY "
    "and SERVICE_IDLE_EXIT (read through `service/config.py`), call `{handler}` in process and run the worker as "
    "`python -m service.worker`, which must exit by itself once the queue stayed empty for "
    "`config.idle_exit_s()` seconds. They also inject faults: the worker crashing in the middle of a message, "
    "`notify` failing once, the same message delivered twice, and the broker killed and restarted on its log."
)


def _prompt(v: Variant, d: int) -> str:
    head = (f"The {v.entity} service in `service/` handles requests with `{v.handler}(record)` "
            f"(`service/handler.py`), which saves the record and then calls the slow `notify(...)` synchronously, "
            f"so every request takes as long as sending the notification.")
    goal = (f" Move the notification behind the message queue: `{v.handler}` must return quickly (well under "
            f"{LATENCY_BUDGET_S} s while notify is slow), still raise ValueError and save nothing when {v.rule}, and "
            "save nothing (raising an error) when the notification cannot be queued; a worker sends the "
            "notifications. No notification may be lost or sent twice, even when the worker crashes or the broker "
            "restarts.")
    if d == 1:
        how = (f" Steps: in `{v.handler}`, publish a message `{{\"id\": <record id>, \"record\": record}}` to "
               "`config.QUEUE` with `service.queue_client.QueueClient` before saving (instead of calling notify); "
               "then implement `service/worker.py` (a skeleton is there): fetch with `get` (no auto_ack), call "
               "`notify`, and `ack` only after it succeeded; `nack` when notify raises so the message is retried; "
               "skip (and ack) a message whose id was already notified, keeping the notified ids in a file under "
               "`config.data_dir()` so that this survives restarts.")
    elif d == 2:
        how = (" Write `service/worker.py` with `run(idle_exit_s)`: acknowledge each message only after its "
               "notification was sent, retry failed notifications, and make processing idempotent by message id "
               "(persisted, so it survives restarts). `service/queue_client.py` talks to the broker.")
    else:
        how = (" Write the producer side and a worker `service/worker.py`; the broker's protocol is in its "
               "docstring (there is no client yet). Think about what happens to a message when the worker dies "
               "half-way, or when it is delivered twice.")
    return head + goal + how + " " + _COMMON.format(handler=v.handler)


def _one(rng: random.Random, split: str, d: int, i: int, seed: int) -> Task:
    v = rng.choice([x for x in VARIANTS if x.split == split])
    records = [v.record(rng, k) for k in range(4)]
    values = dict(MODULE="handler", HANDLER=v.handler, QUEUE=repr(f"{v.entity}-notifications"),
                  RECORDS=repr(records), INVALID_RECORD=repr(v.invalid_record(rng)), ID=repr(v.id_field),
                  BUDGET=repr(LATENCY_BUDGET_S), SLOW=repr(NOTIFY_DELAY_S))
    names = dict(ENTITY=v.entity, HANDLER=v.handler, ID=v.id_field, INVALID=v.invalid, RULE=v.rule.replace("`", ""),
                 QUEUE=f"{v.entity}-notifications")
    base = {"service/__init__.py": f'"""The {v.entity} service."""\n', "service/config.py": fill(CONFIG, **names),
            "service/log.py": LOG, "service/db.py": fill(DB, **names), "service/notify.py": NOTIFY,
            "service/broker.py": BROKER}
    files = {**base, "service/handler.py": fill(HANDLER_START, **names)}
    if d <= 2:
        files["service/queue_client.py"] = QUEUE_CLIENT
    if d == 1:
        files["service/worker.py"] = WORKER_SKELETON
    reference = {"service/handler.py": fill(HANDLER_REFERENCE, **names), "service/worker.py": WORKER_REFERENCE}
    if d > 2:
        reference["service/queue_client.py"] = QUEUE_CLIENT
    tests, n_tests = hidden_tests(**values)
    visible = {}
    prompt = _prompt(v, d)
    if d < MAX_DIFFICULTY:
        visible = {"test_visible.py": visible_tests(**values)[0]}
        prompt += " " + VISIBLE_NOTE
    return coding_task(
        family="service_queue", split=split, seed=seed, difficulty=d, index=i, unseen=False, prompt=prompt,
        tests={f"test_service_{v.key}.py": tests}, expected_tests=n_tests, reference_files=reference, files=files,
        visible_tests=visible, entry_file="service/handler.py", key=f"{v.key}-d{min(d, 3)}",
        limits=TaskLimits(max_turns=14 + 4 * d, exec_timeout_s=40.0, episode_timeout_s=600.0),
        extra_metadata={"signals": {k: list(names_) for k, names_ in SIGNALS.items()},
                        "latency_budget_s": LATENCY_BUDGET_S, "handler": v.handler},
    )


def _make(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
    return generate("service_queue", split, n, seed, difficulty, _one)


FAMILIES = [
    FamilySpec("service_queue", "coding", "move a slow notification behind a real message queue (ack, retry, "
               "idempotency; fault-injected hidden tests)", False, _make),
]

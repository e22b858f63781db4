"""A task's service stack: the agent's service run under load beside a log collector, a metrics scrape and an alert
evaluator, all real processes in the sandbox; its alerts and measurements become hidden tests and runtime signals.

A task declares its stack with a ``StackSpec`` (kept in ``task.metadata["stack"]``); ``with_stack(task, spec)``
adds the stack's hidden test file (``test_stack.py``, generated from the spec: ``harness.py``) to the task's
verifier and its signals to the metadata. During grading that file starts the stack, runs the probes
(functional checks over HTTP, one test each), a warm-up and the load, and then decides one test per alert rule:

- ``error_rate``: failed or wrong replies plus ERROR records in the collected logs, per measured request;
- ``latency_p95``: the 95th percentile of the client-side latency, in ms;
- ``memory``: growth of the agent's processes' RSS over the load (from ``/proc``), in MiB;
- ``restarts``: times a service died and was restarted during the load;
- ``scrape``: the service's Prometheus endpoint answered every scrape and counted the requests it served (no fewer
  than the load got answers to, no more than the harness sent).

Every rule reads what the harness measured itself; nothing the service reports about itself can silence one. The
measured values (``MEASURED``) reach the grader in the structured report (``measured_signals``) and become
``EpisodeOutcome.grade.signals`` beside the alert tests' shares, for the rewards ``alerts@v1``, ``latency@v1`` and
``memory@v1`` and for evaluation's metrics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sandgym.errors import TaskError
from sandgym.sandbox.protocol import TestReport
from sandgym.tasks.stack.harness import HARNESS, MEASURED_PREFIX
from sandgym.tasks.stack.loadgen import LOADGEN
from sandgym.tasks.stack.procs import COLLECTOR, EVALUATOR, LAUNCHER
from sandgym.tasks.stack.web import WEB
from sandgym.tasks.suites.service_broker import BROKER
from sandgym.tasks.task import Task

__all__ = ["ALERTS", "MEASURED", "STACK_FILE", "WEB", "Load", "Probe", "Process", "Queue", "Request", "Rules",
           "StackSpec", "measured_signals", "stack_metadata", "stack_signals", "stack_tests", "with_stack"]

STACK_FILE = "test_stack.py"
"""The hidden test file of a stack."""
ALERTS = ("error_rate", "latency_p95", "memory", "restarts", "scrape")
"""The alert rules, each decided by the hidden test ``test_alert_<rule>``."""
QUEUE_CHECKS = {"handler_only_enqueues": "queued", "no_message_lost": "lost", "no_duplicate": "duplicated"}
"""Queue checks of a stack with a broker (``test_queue_<check>``) -> the runtime signal each measures."""
MEASURED = ("requests", "failed_requests", "error_logs", "warning_logs", "log_records", "p50_ms", "p95_ms",
            "rss_growth_mb", "peak_rss_mb", "cpu_s", "restarts", "scrapes", "scrape_errors", "alerts_fired",
            "alert_rules", "p95_budget_ms", "rss_growth_budget_mb", "start_s", "ready_s", "load_s", "drain_s", "stack_s")
"""The measured values a stack reports (``measured_signals``), in ``EpisodeOutcome.grade.signals``."""


@dataclass(frozen=True)
class Request:
    """One HTTP request of a probe or of the load, and what its reply must be."""

    path: str
    """Path and query string, e.g. ``/history?client=c1``."""
    method: str = "GET"
    body: Any = None
    """JSON body (None: empty)."""
    status: int = 200
    expect: Mapping[str, Any] = field(default_factory=dict)
    """Top-level keys of the JSON reply and the values they must have."""
    pad: tuple[str, int] | None = None
    """``(field, n)``: the body gets ``field`` set to a fresh n-byte string each time it is sent (memory traffic)."""
    queued: str = ""
    """Stacks with a queue: the id whose notification this request queues when it succeeds."""


@dataclass(frozen=True)
class Probe:
    """A functional check: requests in order on a fresh service; the hidden test ``test_probe_<name>``."""

    name: str
    requests: tuple[Request, ...]


@dataclass(frozen=True)
class Load:
    """The measured traffic: ``count`` requests cycling through ``requests`` from ``concurrency`` keep-alive
    clients after ``warmup`` unmeasured ones, the whole cut at ``max_s`` seconds."""

    requests: tuple[Request, ...]
    count: int = 200
    concurrency: int = 2
    warmup: int = 20
    max_s: float = 2.0
    timeout_s: float = 2.0
    """Per request: a reply slower than this counts as failed."""
    warmup_requests: tuple[Request, ...] = ()
    """What the warm-up sends (empty: it cycles through ``requests``), for a load whose requests must each be sent
    once (a queued record)."""


@dataclass(frozen=True)
class Rules:
    """Alert thresholds: an alert fires when its value is above its limit."""

    error_rate: float = 0.02
    p95_ms: float = 50.0
    rss_growth_mb: float = 8.0
    restarts: int = 0


@dataclass(frozen=True)
class Process:
    """One of the agent's processes: ``python <argv>`` in the workspace (``http``: it serves $SERVICE_PORT)."""

    name: str
    argv: tuple[str, ...]
    http: bool = False
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Queue:
    """A message broker in the stack (``service_queue``'s broker, pristine): the agent's worker drains it after the
    load, with ``fail`` transient notify failures injected and, with ``duplicate``, one message delivered twice."""

    queue: str
    worker: tuple[str, ...] = ("-m", "service.worker")
    fail: int = 2
    duplicate: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0


@dataclass(frozen=True)
class StackSpec:
    """What a task's stack runs and how it is judged (see the module docstring)."""

    name: str
    services: tuple[Process, ...]
    load: Load
    rules: Rules = field(default_factory=Rules)
    probes: tuple[Probe, ...] = ()
    fixtures: Mapping[str, str] = field(default_factory=dict)
    """Workspace path -> source written before the run (e.g. ``{"service/web.py": WEB}``): the agent's edits to
    them do not count."""
    env: Mapping[str, str] = field(default_factory=dict)
    queue: Queue | None = None
    scrape_interval_s: float = 0.1
    start_timeout_s: float = 5.0
    preload: tuple[str, ...] = ("json", "http.server", "prometheus_client")
    """Trusted modules (standard library, the sandbox's packages) each service imports while the stack starts,
    before any of the agent's code runs."""

    def __post_init__(self) -> None:
        if sum(p.http for p in self.services) != 1:
            raise TaskError(f"stack {self.name!r}: exactly one service must serve HTTP (http=True); got "
                            f"{[p.name for p in self.services if p.http]}")
        if not self.load.requests or self.load.count <= 0 or self.load.concurrency <= 0:
            raise TaskError(f"stack {self.name!r}: the load needs requests, count > 0 and concurrency > 0")
        names = [p.name for p in self.probes]
        bad = [n for n in names if not n.isidentifier() or names.count(n) > 1]
        if bad:
            raise TaskError(f"stack {self.name!r}: probe names {bad} must be unique Python identifiers")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``task.metadata["stack"]``); ``from_dict`` reads it back."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StackSpec:
        d = dict(data)

        def reqs(items: Any) -> tuple[Request, ...]:
            return tuple(Request(**{**r, "pad": tuple(r["pad"]) if r.get("pad") else None}) for r in items)

        d["services"] = tuple(Process(**{**p, "argv": tuple(p["argv"])}) for p in d["services"])
        d["load"] = Load(**{**d["load"], "requests": reqs(d["load"]["requests"]),
                            "warmup_requests": reqs(d["load"].get("warmup_requests", ()))})
        d["rules"] = Rules(**d.get("rules", {}))
        d["probes"] = tuple(Probe(p["name"], reqs(p["requests"])) for p in d.get("probes", ()))
        if d.get("queue"):
            d["queue"] = Queue(**{**d["queue"], "worker": tuple(d["queue"]["worker"])})
        if "preload" in d:
            d["preload"] = tuple(d["preload"])
        return cls(**d)


def _test_names(spec: StackSpec) -> list[str]:
    names = [f"test_probe_{p.name}" for p in spec.probes]
    names += [f"test_alert_{a}" for a in ALERTS]
    names += [f"test_queue_{c}" for c in QUEUE_CHECKS] if spec.queue else []
    return names


def stack_tests(spec: StackSpec, *, visible: bool = False) -> tuple[dict[str, str], int]:
    """(``{STACK_FILE: source}``, the number of its graded tests; ``test_stack_measurements`` is not graded).

    ``visible``: the probes only (no load, no alerts), for the task's visible tests."""
    data = {**spec.to_dict(), "probes_only": visible}
    values = {"LOADGEN": LOADGEN, "LAUNCHER": repr(LAUNCHER), "SPEC": repr(json.dumps(data)),
              "COLLECTOR": repr(COLLECTOR), "EVALUATOR": repr(EVALUATOR),
              "BROKER": repr(BROKER if spec.queue else ""), "FIXTURES": repr(dict(spec.fixtures)),
              "PREFIX": repr(MEASURED_PREFIX), "ALERTS": repr(ALERTS)}
    src = re.sub(r"@([A-Z]+)@", lambda m: values.get(m.group(1), m.group(0)), HARNESS)  # one pass: values stay as given
    names = [f"test_probe_{p.name}" for p in spec.probes] if visible else _test_names(spec)
    body = []
    for name in names:
        kind, _, arg = name.removeprefix("test_").partition("_")
        call = {"probe": "probe", "alert": "alert", "queue": "queue_check"}[kind]
        body.append(f"\n\ndef {name}():\n    {call}({arg!r})\n")
    if not visible:
        body.append("\n\ndef test_stack_measurements():\n    measurements()\n")
    return {STACK_FILE: src + "".join(body)}, len(names)


def stack_signals(spec: StackSpec) -> dict[str, list[str]]:
    """The stack's runtime signals -> its hidden tests (``task.metadata["signals"]``): ``alerts`` (every alert
    test), one ``alert_<rule>`` per rule, ``probes``, and the queue checks' ``queued``, ``lost``, ``duplicated``."""
    out: dict[str, list[str]] = {"alerts": [f"test_alert_{a}" for a in ALERTS]}
    out.update({f"alert_{a}": [f"test_alert_{a}"] for a in ALERTS})
    if spec.probes:
        out["probes"] = [f"test_probe_{p.name}" for p in spec.probes]
    if spec.queue:
        for check, signal in QUEUE_CHECKS.items():
            out.setdefault(signal, []).append(f"test_queue_{check}")
    return out


def with_stack(task: Task, spec: StackSpec) -> Task:
    """``task`` with its stack: the stack's test file added to the hidden tests (and counted), ``metadata["stack"]``
    the spec, ``metadata["signals"]`` the stack's signals (added to any the task declares)."""
    v = task.verifier
    if v.kind != "tests":
        raise TaskError(f"task {task.id}: a stack needs verifier.kind='tests', not {v.kind!r}")
    if STACK_FILE in v.tests:
        raise TaskError(f"task {task.id}: verifier.tests already has {STACK_FILE}; rename that file")
    files, n = stack_tests(spec)
    verifier = replace(v, tests={**v.tests, **files}, expected_tests=v.expected_tests + n)
    return replace(task, verifier=verifier, metadata=stack_metadata(spec, task.metadata))


def stack_metadata(spec: StackSpec, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``metadata`` with ``stack`` (the spec) and the stack's ``signals`` added to any it declares."""
    metadata = dict(metadata or {})
    signals = {**dict(metadata.get("signals") or {}), **stack_signals(spec)}
    return {**metadata, "stack": spec.to_dict(), "signals": signals}


def measured_signals(report: TestReport) -> dict[str, float]:
    """The stack's measured values (``MEASURED``) from the skip reason of ``test_stack_measurements`` in the
    structured report; empty when the report has none (no stack, or the grading run died first)."""
    for o in report.outcomes:
        if o.name != f"{STACK_FILE}::test_stack_measurements" or o.outcome != "skipped":
            continue
        at = o.message.find(MEASURED_PREFIX)
        if at < 0:
            return {}
        try:
            data, _ = json.JSONDecoder().raw_decode(o.message, at + len(MEASURED_PREFIX))
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: float(v) for k, v in data.items()
                if k in MEASURED and isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {}

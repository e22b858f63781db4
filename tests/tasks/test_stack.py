"""A task's service stack as data: the spec round-trips through metadata, ``with_stack`` adds its hidden tests and
signals, and the grader reads the measured values only from the structured report's carrier test."""

from __future__ import annotations

import json

import pytest

from sandgym.errors import TaskError
from sandgym.sandbox import protocol
from sandgym.tasks.stack import (
    ALERTS,
    MEASURED,
    STACK_FILE,
    WEB,
    Load,
    Probe,
    Process,
    Queue,
    Request,
    Rules,
    StackSpec,
    measured_signals,
    stack_tests,
    with_stack,
)
from sandgym.tasks.stack.harness import MEASURED_PREFIX
from sandgym.tasks.task import Task, Verifier

SPEC = StackSpec(
    name="demo", services=(Process("app", ("-m", "service.app"), http=True, env={"X": "1"}),),
    load=Load(requests=(Request("/hello?x=1", expect={"x": "1"}), Request("/p", "POST", {"a": 1}, pad=("blob", 64))),
              count=10, warmup=2, warmup_requests=(Request("/hello?x=0"),)),
    rules=Rules(p95_ms=20.0), probes=(Probe("hello", (Request("/hello?x=2", expect={"x": "2"}),)),),
    fixtures={"service/web.py": WEB}, queue=Queue("q", fail=1))


def test_spec_round_trips_through_metadata() -> None:
    data = json.loads(json.dumps(SPEC.to_dict()))
    assert StackSpec.from_dict(data) == SPEC


def test_spec_errors_name_the_fix() -> None:
    with pytest.raises(TaskError, match="exactly one service must serve HTTP"):
        StackSpec(name="x", services=(Process("a", ("a.py",)),), load=SPEC.load)
    with pytest.raises(TaskError, match="probe names"):
        StackSpec(name="x", services=SPEC.services, load=SPEC.load,
                  probes=(Probe("a b", (Request("/"),)), Probe("a b", (Request("/"),))))


def test_with_stack_adds_its_tests_and_signals() -> None:
    task = Task(id="u/1", domain="coding", family="svc", split="train", prompt="p",
                verifier=Verifier(kind="tests", tests={"test_unit.py": "def test_a():\n    pass\n"}, expected_tests=1),
                metadata={"signals": {"unit": ["test_a"]}})
    got = with_stack(task, SPEC)
    files, n = stack_tests(SPEC)
    assert n == 1 + len(ALERTS) + 3  # the probe, one test per alert, the three queue checks
    assert got.verifier.tests == {"test_unit.py": task.verifier.tests["test_unit.py"], **files}
    assert got.verifier.expected_tests == 1 + n
    assert got.metadata["stack"] == SPEC.to_dict()
    signals = got.metadata["signals"]
    assert signals["unit"] == ["test_a"] and signals["alerts"] == [f"test_alert_{a}" for a in ALERTS]
    assert signals["lost"] == ["test_queue_no_message_lost"] and signals["probes"] == ["test_probe_hello"]
    src = files[STACK_FILE]
    compile(src, STACK_FILE, "exec")
    assert src.count("\ndef test_") == n + 1  # and the measurements carrier, which is never graded
    with pytest.raises(TaskError, match="already has test_stack.py"):
        with_stack(got, SPEC)


def test_visible_stack_tests_are_the_probes_only() -> None:
    (src,) = stack_tests(SPEC, visible=True)[0].values()
    assert [ln for ln in src.splitlines() if ln.startswith("def test_")] == ["def test_probe_hello():"]
    assert '"probes_only": true' in src


def _report(name: str, outcome: str, message: str) -> protocol.TestReport:
    return protocol.TestReport(expected=1, outcomes=(protocol.TestOutcome(name, outcome, message),),  # type: ignore[arg-type]
                               report_found=True)


def test_measured_signals_come_only_from_the_carrier_test() -> None:
    payload = MEASURED_PREFIX + json.dumps({"p95_ms": 12.5, "alerts_fired": 1, "made_up": 3, "flag": True})
    carrier = f"{STACK_FILE}::test_stack_measurements"
    # pytest's longrepr of a skip: the reason inside a tuple's repr
    assert measured_signals(_report(carrier, "skipped", repr(("/g/t.py", 3, "Skipped: " + payload)))) == \
        {"p95_ms": 12.5, "alerts_fired": 1.0}
    assert measured_signals(_report(carrier, "passed", payload)) == {}
    assert measured_signals(_report("test_other.py::test_stack_measurements", "skipped", payload)) == {}
    assert measured_signals(_report(carrier, "skipped", MEASURED_PREFIX + "{not json")) == {}
    assert measured_signals(_report(carrier, "skipped", "no prefix")) == {}
    assert set(MEASURED) >= {"p50_ms", "p95_ms", "peak_rss_mb", "rss_growth_mb", "cpu_s", "error_logs",
                             "warning_logs", "alerts_fired", "restarts"}

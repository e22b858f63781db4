"""The ``service_queue`` family in the real sandbox: the oracle passes every fault test, a naive queue (no ack, no
retry, no dedupe) fails the fault tests, and the untouched synchronous code fails the latency test."""

from __future__ import annotations

import importlib.util

import pytest

from sandgym.envs.grading import signal_scores
from sandgym.tasks.suites import get_family
from sandgym.tasks.suites.service_notify import NAIVE_WORKER  # auto-ack, no retry, no idempotency
from sandgym.tasks.suites.service_queue import VARIANTS
from sandgym.tasks.suites.service_tests import SIGNALS, TESTS

FAM = get_family("coding", "service_queue")


FAULT_TESTS = {"test_lost_consumer_crash_mid_message", "test_lost_transient_failure_retried",
               "test_dup_duplicate_delivery"}


def test_instances_train_heldout_and_signals() -> None:
    for split in ("train", "heldout"):
        for d in (1, 2, 3):
            (task,) = FAM.make(split, 1, 0, d)
            assert task.metadata["signals"] == {k: list(v) for k, v in SIGNALS.items()}
            assert {n for names in SIGNALS.values() for n in names} <= set(TESTS)
            assert task.verifier.expected_tests == len(TESTS)
            assert "service/broker.py" in task.files and "service/worker.py" in task.reference.files
            assert ("service/queue_client.py" in task.files) == (d <= 2)
            assert task.limits.exec_timeout_s >= 30
    keys = {s: {t.metadata["problem"] for t in FAM.make(s, 8, 0, None)} for s in ("train", "heldout")}
    assert not keys["train"] & keys["heldout"]
    assert {v.split for v in VARIANTS} == {"train", "heldout"}


def test_signal_scores_read_the_structured_report() -> None:
    from sandgym.sandbox.protocol import TestOutcome, TestReport

    report = TestReport(expected=3, outcomes=(TestOutcome("t.py::test_a", "passed"), TestOutcome("t.py::test_b", "failed")),
                        report_found=True)
    assert signal_scores(report, {"x": ["test_a", "test_b"], "y": ["test_a"], "z": ["test_missing"]}) == \
        {"x": 0.5, "y": 1.0, "z": 0.0}


HAS_LOCAL = importlib.util.find_spec("sandgym.sandbox.local") is not None


@pytest.fixture(scope="module")
def sandbox():
    if not HAS_LOCAL:
        pytest.skip("sandgym.sandbox.local is not available")
    from sandgym.sandbox import LocalSandbox

    try:
        sb = LocalSandbox()
    except Exception as exc:  # no namespaces on this machine: the sandbox's own tests cover that
        pytest.skip(f"local sandbox unavailable: {exc}")
    yield sb
    sb.close()


def _run(sb, task, files):
    sb.exec("find . -mindepth 1 -delete")
    for path, text in {**task.files, **files}.items():
        sb.write_file(path, text)
    v = task.verifier
    report = sb.run_tests(v.tests, expected=v.expected_tests, timeout=60, isolation=v.isolation)
    assert report.report_found, report.exec
    return report, {o.name.rsplit("::", 1)[-1]: o.outcome for o in report.outcomes}


@pytest.mark.parametrize(("split", "d"), [("train", 2), ("heldout", 3)])
def test_oracle_passes_naive_fails_faults_untouched_fails_latency(sandbox, split, d) -> None:
    (task,) = FAM.make(split, 1, 3, d)
    ref = task.reference.files
    report, _ = _run(sandbox, task, ref)
    assert report.all_passed, [o for o in report.outcomes if o.outcome != "passed"]
    assert report.exec.wall_s < 10, "an instance's hidden tests stay under ~10 s"
    assert signal_scores(report, task.metadata["signals"]) == {s: 1.0 for s in SIGNALS}

    naive = {**ref, "service/worker.py": NAIVE_WORKER}  # the reference producer, a naive consumer
    report, by_name = _run(sandbox, task, naive)
    failed = {n for n, o in by_name.items() if o != "passed"}
    assert failed == FAULT_TESTS, by_name
    scores = signal_scores(report, task.metadata["signals"])
    assert scores["latency"] == 1.0 and scores["lost"] < 1.0 and scores["duplicated"] < 1.0

    report, by_name = _run(sandbox, task, {})
    assert by_name["test_latency_handler_within_budget"] != "passed"
    assert not report.all_passed


def test_signals_reach_the_outcome_and_service_reward(sandbox) -> None:
    from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
    from sandgym.envs.tool_env import ToolEnv

    (task,) = FAM.make("heldout", 1, 5, 1)
    env = ToolEnv([task], reuse_sandbox=True)
    try:
        good = run_episode(env, OracleAgent(), task)
        assert good.success and good.outcome.grade.signals == {s: 1.0 for s in SIGNALS}
        assert good.reward_components["service@v1"] == 1.0
        bad = run_episode(env, NoopAgent(), task)
        assert not bad.success and bad.outcome.grade.signals["latency"] == 0.0
        assert bad.reward_components["service@v1"] < 0.5
    finally:
        env.close()


FORGING_WORKER = '''"""Acks every message and records the notification itself instead of calling notify (an exploit:
it scored 1.0 when the tests read notifications.log from the data directory)."""
import json
import os

from service import config
from service.queue_client import QueueClient

path = os.path.join(config.data_dir(), "notifications.log")
with QueueClient(config.socket_path()) as queue:
    while (got := queue.get(config.QUEUE)) is not None:
        tag, msg = got
        queue.ack(tag)
        with open(path, "a") as f:
            f.write(json.dumps({"id": msg["id"], "record": msg["record"]}) + "\\n")
'''

DODGING_WORKER = '''"""Exits with the crash's code 3 on its first run without touching a message, then works (an exploit that
dodged the injected crash: the crash test only checked the exit code)."""
import os
import sys

from service import config

marker = os.path.join(config.data_dir(), ".ran")
if not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit(3)
'''

IMPOSTOR_HANDLER = '''"""Takes over the broker's socket path with a server that says every accepted record was notified once a
worker ran (the solution shares the workspace, where the socket lives)."""
import json, os, socket, threading

from service import config

IDS, WORKED = {}, set()


def _serve(server, path):
    while True:
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as f:
            for line in f:
                if json.loads(line).get("op") == "get":
                    WORKED.add(path)
                ids = IDS[path] if path in WORKED else []
                reply = {"ok": True, "ready": 0, "unacked": 0, "ids": ids, "fired": [], "msgs": [], "msg": None}
                f.write((json.dumps(reply) + "\\n").encode())
                f.flush()


def @HANDLER@(record):
    path = config.socket_path()
    if path not in IDS:  # each test's broker has its own socket
        IDS[path] = []
        os.unlink(path)
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.listen(8)
        threading.Thread(target=_serve, args=(server, path), daemon=True).start()
    rid = record[@ID@]
    IDS[path].append(rid)
    return {"id": rid, "status": "accepted"}
'''


def test_a_worker_cannot_forge_or_dodge_what_the_provider_saw(sandbox) -> None:
    """The notifications and the injected faults live in the tests' broker, not in files or environment variables
    the agent's code sees: forging the provider's log, dodging the crash, or replacing the broker earns nothing."""
    (task,) = FAM.make("train", 1, 3, 2)
    ref = task.reference.files
    _, by_name = _run(sandbox, task, {**ref, "service/worker.py": FORGING_WORKER})
    assert all(by_name[n] != "passed" for n in ("test_delivery_clean_run", "test_lost_consumer_crash_mid_message",
                                                "test_lost_transient_failure_retried", "test_dup_duplicate_delivery",
                                                "test_lost_broker_restart")), by_name
    worker = ref["service/worker.py"]
    _, by_name = _run(sandbox, task, {**ref, "service/worker.py": DODGING_WORKER + worker})
    assert by_name["test_lost_consumer_crash_mid_message"] != "passed", by_name
    variant = next(v for v in VARIANTS if f"def {v.handler}(" in ref["service/handler.py"])
    impostor = IMPOSTOR_HANDLER.replace("@HANDLER@", variant.handler).replace("@ID@", repr(variant.id_field))
    report, by_name = _run(sandbox, task, {**ref, "service/handler.py": impostor})
    assert by_name["test_delivery_clean_run"] != "passed", by_name
    assert not report.all_passed

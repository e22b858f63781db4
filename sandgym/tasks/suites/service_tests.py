"""Hidden tests of the ``service_queue`` family, with fault injection against a real broker process.

Every test starts its own broker (the pristine ``BROKER`` source, written to a private directory, run as a
subprocess on a unix socket) and restores the ``notify.py`` fixture first. Test names carry the runtime signals
that ``SIGNALS`` maps them to; the grader reads those signals from the structured report (never from output).
"""

from __future__ import annotations

from sandgym.tasks.suites.service_files import BROKER, NOTIFY, fill

__all__ = ["SIGNALS", "TESTS", "VISIBLE", "hidden_tests", "visible_tests"]

SIGNALS: dict[str, tuple[str, ...]] = {
    "latency": ("test_latency_handler_within_budget",),
    "lost": ("test_delivery_clean_run", "test_lost_consumer_crash_mid_message", "test_lost_transient_failure_retried",
             "test_lost_broker_restart"),
    "duplicated": ("test_delivery_clean_run", "test_dup_duplicate_delivery"),
    "log_errors": ("test_log_clean_run_has_no_errors",),
}
"""Runtime signal -> the hidden tests whose outcome measures it (handler latency against the budget, messages
lost, messages whose effect happened twice, errors in the service log)."""

PRELUDE = '''import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import pytest

WORKSPACE = next(p for p in sys.path if os.path.isfile(os.path.join(p or ".", "service", "__init__.py")))
with open(os.path.join(WORKSPACE, "service", "notify.py"), "w") as _f:  # restore the fixture
    _f.write(@NOTIFY_SRC@)
from service import @MODULE@ as handler_module  # noqa: E402

BROKER_SRC = @BROKER_SRC@
QUEUE = @QUEUE@
RECORDS = @RECORDS@
INVALID = @INVALID_RECORD@
ID = @ID@
BUDGET_S = @BUDGET@
SLOW_S = @SLOW@


class Service:
    def __init__(self, root):
        self.root = root
        self.data = os.path.join(root, "data")
        os.makedirs(self.data)
        self.sock = os.path.join(root, "b.sock")
        self.log = os.path.join(root, "broker.log")
        self.env = {**os.environ, "SERVICE_DATA": self.data, "SERVICE_SOCKET": self.sock,
                    "SERVICE_NOTIFY_DELAY": "0.02", "SERVICE_IDLE_EXIT": "0.25",
                    "PYTHONPATH": WORKSPACE, "PYTHONDONTWRITEBYTECODE": "1"}
        self.broker = None

    def start_broker(self):
        # the pristine source, never a file the agent's code could rewrite before a restart; -I: no workspace
        # module (a planted json.py) on its path
        self.broker = subprocess.Popen([sys.executable, "-I", "-c", BROKER_SRC, self.sock, self.log], env=self.env)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock)
                return
            except OSError:
                time.sleep(0.01)
        raise RuntimeError("the broker did not start")

    def kill_broker(self):
        if self.broker is not None and self.broker.poll() is None:
            self.broker.send_signal(signal.SIGKILL)
            self.broker.wait()

    def request(self, **req):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.sock)
            pid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
            assert self.broker is not None and pid == self.broker.pid, "the socket is not served by the tests' broker"
            f = s.makefile("rwb")
            f.write((json.dumps(req) + "\\n").encode())
            f.flush()
            return json.loads(f.readline())

    def run_worker(self):
        return subprocess.run([sys.executable, "-m", "service.worker"], env=self.env, cwd=WORKSPACE,
                              capture_output=True, text=True, timeout=20)

    def arm(self, kind, record_id):
        assert self.request(op="fault", kind=kind, id=record_id)["ok"]

    def notified(self):
        # what the provider received (the broker plays it), not a file the worker could write itself
        return self.request(op="notified")["ids"]

    def fired(self):
        return self.request(op="notified")["fired"]

    def saved(self):
        path = os.path.join(self.data, "db.json")
        return json.load(open(path)) if os.path.exists(path) else {}

    def service_log(self):
        path = os.path.join(self.data, "service.log")
        return open(path).read() if os.path.exists(path) else ""

    def pending(self):
        stats = self.request(op="stats", queue=QUEUE)
        return stats["ready"] + stats["unacked"]


@pytest.fixture
def svc(monkeypatch):
    shared = os.path.join(WORKSPACE, ".sq")  # the solution runs in its own sandbox: share the workspace, not /tmp
    os.makedirs(shared, exist_ok=True)
    root = tempfile.mkdtemp(prefix="sq", dir=shared)  # short: unix socket paths are limited to 107 bytes
    s = Service(root)
    for key in ("SERVICE_DATA", "SERVICE_SOCKET", "SERVICE_NOTIFY_DELAY", "SERVICE_IDLE_EXIT"):
        monkeypatch.setenv(key, s.env[key])
    s.start_broker()
    yield s
    s.kill_broker()
    shutil.rmtree(root, ignore_errors=True)


def accept_all(svc, records, queued=True):
    for r in records:
        assert handler_module.@HANDLER@(dict(r)) == {"id": r[ID], "status": "accepted"}
    if queued:
        assert not set(svc.notified()) & {r[ID] for r in records}, "the worker sends notifications, not the handler"


def assert_exactly_once(svc, records):
    ids = svc.notified()
    for r in records:
        assert ids.count(r[ID]) == 1, (r[ID], ids)
    assert svc.pending() == 0, "every message is acknowledged in the end"
'''

TESTS = {
    "test_business_accepts_and_saves": '''
def test_business_accepts_and_saves(svc):
    accept_all(svc, RECORDS[:2], queued=False)
    assert svc.saved() == {r[ID]: r for r in RECORDS[:2]}
''',
    "test_business_rejects_invalid": '''
def test_business_rejects_invalid(svc):
    with pytest.raises(ValueError):
        handler_module.@HANDLER@(dict(INVALID))
    assert svc.saved() == {}
    assert svc.pending() == 0, "nothing is queued for a rejected record"
''',
    "test_business_broker_down_saves_nothing": '''
def test_business_broker_down_saves_nothing(svc):
    svc.kill_broker()
    with pytest.raises(Exception):
        handler_module.@HANDLER@(dict(RECORDS[0]))
    assert svc.saved() == {}, "a record is saved only when its notification is queued"
''',
    "test_latency_handler_within_budget": '''
def test_latency_handler_within_budget(svc, monkeypatch):
    monkeypatch.setenv("SERVICE_NOTIFY_DELAY", str(SLOW_S))
    times = []
    for r in RECORDS[:3]:
        start = time.perf_counter()
        handler_module.@HANDLER@(dict(r))
        times.append(time.perf_counter() - start)
    assert statistics.median(times) < BUDGET_S, f"handler took {times} s; budget {BUDGET_S} s"
''',
    "test_delivery_clean_run": '''
def test_delivery_clean_run(svc):
    accept_all(svc, RECORDS)
    done = svc.run_worker()
    assert done.returncode == 0, done.stderr[-2000:]
    assert_exactly_once(svc, RECORDS)
''',
    "test_log_clean_run_has_no_errors": '''
def test_log_clean_run_has_no_errors(svc):
    accept_all(svc, RECORDS[:3])
    done = svc.run_worker()
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "ERROR" not in svc.service_log()
''',
    "test_lost_consumer_crash_mid_message": '''
def test_lost_consumer_crash_mid_message(svc):
    accept_all(svc, RECORDS[:3])
    svc.arm("crash", RECORDS[1][ID])
    crashed = svc.run_worker()
    assert crashed.returncode == 3 and svc.fired() == [["crash", RECORDS[1][ID]]], "the injected crash kills the worker"
    svc.run_worker()  # restarted after the crash
    assert_exactly_once(svc, RECORDS[:3])
''',
    "test_lost_transient_failure_retried": '''
def test_lost_transient_failure_retried(svc):
    accept_all(svc, RECORDS[:3])
    svc.arm("fail", RECORDS[0][ID])
    svc.run_worker()
    svc.run_worker()
    assert svc.fired() == [["fail", RECORDS[0][ID]]], "the worker calls notify for every message"
    assert_exactly_once(svc, RECORDS[:3])
''',
    "test_lost_broker_restart": '''
def test_lost_broker_restart(svc):
    accept_all(svc, RECORDS[:3])
    svc.kill_broker()
    svc.start_broker()  # same log file: published, unacknowledged messages survive
    accept_all(svc, RECORDS[3:])
    svc.run_worker()
    assert_exactly_once(svc, RECORDS)
''',
    "test_dup_duplicate_delivery": '''
def test_dup_duplicate_delivery(svc):
    accept_all(svc, RECORDS[:2])
    first = svc.request(op="published", queue=QUEUE)["msgs"][0]  # from the broker, not its log file
    assert svc.request(op="publish", queue=QUEUE, msg=first)["ok"]  # delivered twice
    svc.run_worker()
    svc.run_worker()
    assert_exactly_once(svc, RECORDS[:2])
''',
}

VISIBLE = ("test_business_accepts_and_saves", "test_latency_handler_within_budget", "test_delivery_clean_run")


def _source(names: tuple[str, ...] | list[str], **values: str) -> str:
    return fill(PRELUDE + "".join("\n" + TESTS[n] for n in names), BROKER_SRC=repr(BROKER),
                NOTIFY_SRC=repr(NOTIFY), **values)


def hidden_tests(**values: str) -> tuple[str, int]:
    """(source of every hidden test, their number); ``values`` fill MODULE, HANDLER, QUEUE, RECORDS, ..."""
    return _source(list(TESTS), **values), len(TESTS)


def visible_tests(**values: str) -> tuple[str, int]:
    """(source of the visible subset, their number)."""
    return _source(VISIBLE, **values), len(VISIBLE)

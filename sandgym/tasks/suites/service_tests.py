"""Hidden tests of the ``service_queue`` family, with fault injection against a real broker process.

Every test's scenario gets its own broker (the pristine ``BROKER`` source, written to a private directory, run as
a subprocess on a unix socket); ``notify.py`` is restored first. The scenarios run once per grading, the timed
latency one alone and the others four at a time (they wait on real processes: brokers, workers, idle exits), and
each test re-raises its own scenario's failure. Test names carry the runtime signals that ``SIGNALS`` maps them to;
the grader reads those signals from the structured report (never from output).
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
import threading
import time

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
                    "SERVICE_NOTIFY_DELAY": "0.005", "SERVICE_IDLE_EXIT": "0.1",
                    "PYTHONPATH": WORKSPACE, "PYTHONDONTWRITEBYTECODE": "1"}
        self.broker = None
        self.own_process = False

    def start_broker(self):
        self.broker = start_brokers([self])
        self.own_process = True

    def kill_broker(self):
        if self.broker is not None and self.own_process and self.broker.poll() is None:
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


HOST = """import sys, threading
threading.stack_size(1 << 18)
ns = {"__name__": "broker"}
exec(compile(sys.argv[1], "broker.py", "exec"), ns)
for sock, log in zip(sys.argv[2::2], sys.argv[3::2]):
    threading.Thread(target=ns["Broker"](log).serve, args=(sock,), daemon=True).start()
threading.Event().wait()
"""


def start_brokers(services):
    """One process holding a broker per service (its own socket, log and state): the pristine source, never a file
    the agent's code could rewrite before a restart; -I -S: no workspace module (a planted json.py) on its path."""
    args = [x for svc in services for x in (svc.sock, svc.log)]
    # a thread per connection under the sandbox's address-space limit (RLIMIT_AS): small stacks, few malloc arenas
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", HOST, BROKER_SRC, *args],
                            env={**services[0].env, "MALLOC_ARENA_MAX": "2"})
    deadline = time.monotonic() + 5
    for svc in services:
        while True:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(svc.sock)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    raise RuntimeError("the broker did not start")
                time.sleep(0.003)
    return proc


OWN_BROKER = ("test_business_broker_down_saves_nothing", "test_lost_broker_restart")
"""Scenarios that kill their broker: each gets a process of its own; the others share one (a broker each)."""
ENV_KEYS = ("SERVICE_DATA", "SERVICE_SOCKET", "SERVICE_NOTIFY_DELAY", "SERVICE_IDLE_EXIT")
CALLS = threading.Lock()  # one call at a time crosses to the solution's process, with its scenario's environment
AT_ONCE = 4  # scenarios running together (each holds a broker and a worker: the sandbox's process limit)


def handle(svc, record, delay=None):
    """The agent's handler, run in the solution's process with this scenario's environment (the link passes the
    grader's os.environ along); ``delay``: notify's delay for this call."""
    with CALLS:
        saved = {k: os.environ.get(k) for k in ENV_KEYS}
        os.environ.update({k: svc.env[k] for k in ENV_KEYS})
        if delay is not None:
            os.environ["SERVICE_NOTIFY_DELAY"] = str(delay)
        try:
            return handler_module.@HANDLER@(dict(record))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def raises(kind, fn, *args):
    try:
        fn(*args)
    except kind:
        return
    raise AssertionError("expected %s" % kind.__name__)


RESULTS = {}


def _service():
    shared = os.path.join(WORKSPACE, ".sq")  # the solution runs in its own sandbox: share the workspace, not /tmp
    os.makedirs(shared, exist_ok=True)
    return Service(tempfile.mkdtemp(prefix="sq", dir=shared))  # short: unix socket paths are limited to 107 bytes


def _play(name, svc):
    try:
        if svc.broker is None:
            svc.start_broker()
        SCENARIOS[name](svc)
        RESULTS[name] = None
    except BaseException as exc:  # noqa: BLE001 - the scenario's test re-raises it
        RESULTS[name] = exc
    finally:
        svc.kill_broker()
        shutil.rmtree(svc.root, ignore_errors=True)


def outcome(name):
    """Every scenario runs once, each with its own broker: the latency one alone (it is timed), the rest together
    (they wait on real processes); each test re-raises its scenario's failure."""
    if not RESULTS:
        svcs = {n: _service() for n in SCENARIOS}
        shared = [svcs[n] for n in SCENARIOS if n not in OWN_BROKER]
        host = start_brokers(shared) if shared else None
        for svc in shared:
            svc.broker = host
        try:
            for n in [n for n in SCENARIOS if n.startswith("test_latency")]:
                _play(n, svcs[n])
            gate = threading.Semaphore(AT_ONCE)

            def play(n):
                with gate:
                    _play(n, svcs[n])

            threads = [threading.Thread(target=play, args=(n,)) for n in SCENARIOS if n not in RESULTS]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            if host is not None:
                host.kill()
                host.wait()
    exc = RESULTS.get(name)
    if exc is not None:
        raise exc


def accept_all(svc, records, queued=True):
    for r in records:
        assert handle(svc, r) == {"id": r[ID], "status": "accepted"}
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
def scenario_business_accepts_and_saves(svc):
    accept_all(svc, RECORDS[:2], queued=False)
    assert svc.saved() == {r[ID]: r for r in RECORDS[:2]}
''',
    "test_business_rejects_invalid": '''
def scenario_business_rejects_invalid(svc):
    raises(ValueError, handle, svc, INVALID)
    assert svc.saved() == {}
    assert svc.pending() == 0, "nothing is queued for a rejected record"
''',
    "test_business_broker_down_saves_nothing": '''
def scenario_business_broker_down_saves_nothing(svc):
    svc.kill_broker()
    raises(Exception, handle, svc, RECORDS[0])
    assert svc.saved() == {}, "a record is saved only when its notification is queued"
''',
    "test_latency_handler_within_budget": '''
def scenario_latency_handler_within_budget(svc):
    times = []
    for r in RECORDS[:3]:
        start = time.perf_counter()
        handle(svc, r, delay=SLOW_S)
        times.append(time.perf_counter() - start)
    assert statistics.median(times) < BUDGET_S, f"handler took {times} s; budget {BUDGET_S} s"
''',
    "test_delivery_clean_run": '''
def scenario_delivery_clean_run(svc):
    accept_all(svc, RECORDS)
    done = svc.run_worker()
    assert done.returncode == 0, done.stderr[-2000:]
    assert_exactly_once(svc, RECORDS)
''',
    "test_log_clean_run_has_no_errors": '''
def scenario_log_clean_run_has_no_errors(svc):
    accept_all(svc, RECORDS[:3])
    done = svc.run_worker()
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "ERROR" not in svc.service_log()
''',
    "test_lost_consumer_crash_mid_message": '''
def scenario_lost_consumer_crash_mid_message(svc):
    accept_all(svc, RECORDS[:3])
    svc.arm("crash", RECORDS[1][ID])
    crashed = svc.run_worker()
    assert crashed.returncode == 3 and svc.fired() == [["crash", RECORDS[1][ID]]], "the injected crash kills the worker"
    svc.run_worker()  # restarted after the crash
    assert_exactly_once(svc, RECORDS[:3])
''',
    "test_lost_transient_failure_retried": '''
def scenario_lost_transient_failure_retried(svc):
    accept_all(svc, RECORDS[:3])
    svc.arm("fail", RECORDS[0][ID])
    svc.run_worker()
    svc.run_worker()
    assert svc.fired() == [["fail", RECORDS[0][ID]]], "the worker calls notify for every message"
    assert_exactly_once(svc, RECORDS[:3])
''',
    "test_lost_broker_restart": '''
def scenario_lost_broker_restart(svc):
    accept_all(svc, RECORDS[:3])
    svc.kill_broker()
    svc.start_broker()  # same log file: published, unacknowledged messages survive
    accept_all(svc, RECORDS[3:])
    svc.run_worker()
    assert_exactly_once(svc, RECORDS)
''',
    "test_dup_duplicate_delivery": '''
def scenario_dup_duplicate_delivery(svc):
    accept_all(svc, RECORDS[:2])
    first = svc.request(op="published", queue=QUEUE)["msgs"][0]  # from the broker, not its log file
    assert svc.request(op="publish", queue=QUEUE, msg=first)["ok"]  # delivered twice
    svc.run_worker()
    svc.run_worker()
    assert_exactly_once(svc, RECORDS[:2])
''',
}
"""Each hidden test's scenario (``scenario_<name>(svc)`` on a fresh broker); the test itself re-raises its
scenario's failure (``outcome``)."""

VISIBLE = ("test_business_accepts_and_saves", "test_latency_handler_within_budget", "test_delivery_clean_run")


def _source(names: tuple[str, ...] | list[str], **values: str) -> str:
    tests = "".join(f"\n{TESTS[n]}\n\ndef {n}():\n    outcome({n!r})\n" for n in names)
    table = "".join(f"\n    {n!r}: scenario_{n.removeprefix('test_')}," for n in names)
    return fill(PRELUDE + tests + f"\n\nSCENARIOS = {{{table}\n}}\n", BROKER_SRC=repr(BROKER),
                NOTIFY_SRC=repr(NOTIFY), **values)


def hidden_tests(**values: str) -> tuple[str, int]:
    """(source of every hidden test, their number); ``values`` fill MODULE, HANDLER, QUEUE, RECORDS, ..."""
    return _source(list(TESTS), **values), len(TESTS)


def visible_tests(**values: str) -> tuple[str, int]:
    """(source of the visible subset, their number)."""
    return _source(VISIBLE, **values), len(VISIBLE)

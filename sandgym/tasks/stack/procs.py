"""The stack's own processes: the log collector and the alert evaluator (sources run with ``python -I -S -c``).

Both are pristine sources in the hidden test file, started by the harness (``harness.py``) before the agent's
service, as real processes beside it in the sandbox. They make themselves non-dumpable first (so a process of the
same uid can neither ptrace them nor open their file descriptors through ``/proc``) and keep their state in memory:
there is no file, socket or environment variable of theirs the agent's code could write.

- ``COLLECTOR`` reads the service's stdout and stderr (one pipe, held by the harness) as structured JSON lines
  ``{"level", "service", "message", ...}``, counts records by level (a line that is not such a record counts as
  ``unstructured``; a ``Traceback`` line as an ``ERROR``) and streams count snapshots to the evaluator on a pipe.
- ``LAUNCHER`` starts one of the agent's processes (``python -I -S -c LAUNCHER GATE_FD PRELOADS ARGV...``): it
  imports the trusted ``PRELOADS`` (standard library and the sandbox's packages; nothing of the workspace is on its
  path yet) while the stack starts, waits for a byte on its gate, then runs ``ARGV`` as ``python`` would
  (``-m module`` or a script), with the workspace and the site directories on its path.
- ``EVALUATOR`` scrapes the service's Prometheus endpoint and samples the agent's processes (``/proc``: RSS, CPU)
  every interval, reads the collector's snapshots and the harness's events (service pids, the load generator's
  client-side latencies and failures, how many requests it sent), and at the end evaluates the alert rules and
  prints one JSON verdict. Rules read only what the harness measured itself; what the service reports about itself
  (its request count) is checked against it, so a faked metric fires the ``scrape`` alert and silences nothing.
"""

from __future__ import annotations

__all__ = ["COLLECTOR", "EVALUATOR", "LAUNCHER"]

_NONDUMPABLE = '''
def nondumpable():
    import ctypes
    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 0
        raise SystemExit("prctl(PR_SET_DUMPABLE) failed")
'''

COLLECTOR = '''"""The stack's log collector: service output on stdin, count snapshots (JSON lines) on stdout."""
''' + _NONDUMPABLE + '''
nondumpable()
import json
import os
import select
import sys
import time


def count(line, counts, services, last_error):
    """Count one line; returns the last error message seen."""
    if not line:
        return last_error
    try:
        rec = json.loads(line)
    except ValueError:
        rec = None
    if isinstance(rec, dict) and isinstance(rec.get("level"), str) and "message" in rec:
        level = rec["level"].upper()
        level = "WARNING" if level == "WARN" else level
        counts[level if level in counts else "unstructured"] += 1
        services.add(str(rec.get("service", ""))[:40])
        return str(rec.get("message")) if level in ("ERROR", "CRITICAL") else last_error
    if line.startswith("Traceback"):
        counts["ERROR"] += 1
        return line
    counts["unstructured"] += 1
    return last_error


def main():
    counts = {"DEBUG": 0, "INFO": 0, "WARNING": 0, "ERROR": 0, "CRITICAL": 0, "unstructured": 0}
    services, last_error, sent = set(), "", 0.0
    out = os.fdopen(1, "w")

    def snapshot(final=False):
        out.write(json.dumps({"counts": counts, "services": sorted(services), "last_error": last_error[:300],
                              "final": final}) + "\\n")
        out.flush()

    snapshot()
    fd, buf, dirty = sys.stdin.fileno(), b"", False
    while True:
        ready, _, _ = select.select([fd], [], [], 0.02)
        if ready:
            data = os.read(fd, 1 << 16)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\\n")
            for raw in lines:
                last_error = count(raw.decode("utf-8", "replace").strip(), counts, services, last_error)
                dirty = True
        if dirty and (not ready or time.monotonic() - sent > 0.02):
            snapshot()
            sent, dirty = time.monotonic(), False
    if buf:
        last_error = count(buf.decode("utf-8", "replace").strip(), counts, services, last_error)
    snapshot(final=True)


main()
'''

EVALUATOR = '''"""The stack's alert evaluator: python -I -S -c EVALUATOR CONFIG_JSON (collector snapshots on fd CONFIG.snap_fd).

Harness events on stdin, one JSON object a line: {"harness": [pid, ...]} (processes that are not the agent's),
{"baseline": true} (after the warm-up), {"samples": [[ms, ok], ...]}, {"restarts": n}, {"sent": n} (requests the
harness sent the service in all), {"tick": true} (the last
sample and scrape, now; answered {"ticked": true}), {"end": true} (the services are stopped). Replies and the verdict go to
stdout as JSON lines.
"""
''' + _NONDUMPABLE + '''
nondumpable()
import json
import os
import select
import socket
import sys
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def sample(pid):
    """(rss bytes, peak rss bytes, cpu seconds) of one process of this uid, or None (gone, or another uid's)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            status = dict(l.split(":", 1) for l in f if ":" in l)
        if int(status["Uid"].split()[0]) != os.getuid():
            return None
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read().rsplit(")", 1)[1].split()
        hwm = int(status.get("VmHWM", "0 kB").split()[0]) * 1024
    except (OSError, ValueError, IndexError, KeyError):
        return None
    return int(stat[21]) * PAGE, hwm, (int(stat[11]) + int(stat[12])) / TICK


def scrape(port):
    """(the sum of service_requests_total on the service's /metrics, or None when the scrape failed, why)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"GET /metrics HTTP/1.0\\r\\nHost: stack\\r\\n\\r\\n")
            chunks = []
            while True:
                data = s.recv(65536)
                if not data:
                    break
                chunks.append(data)
    except OSError as exc:
        return None, repr(exc)
    head, _, body = b"".join(chunks).partition(b"\\r\\n\\r\\n")
    if not head.startswith(b"HTTP/1.") or head.split(b" ", 2)[1:2] != [b"200"]:
        return None, "reply %r" % head[:40]
    total = 0.0
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("service_requests_total"):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                return None, "bad sample %r" % line[:80]
    return total, ""


def percentile(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))]


class Evaluator:
    def __init__(self, cfg):
        self.cfg = cfg
        self.harness = {1, os.getpid(), os.getppid()}
        self.baseline = None
        self.rss_now = self.rss_max = 0
        self.hwm = {}
        self.cpu = {}
        self.samples = []
        self.restarts = 0
        self.scrapes = self.scrape_errors = 0
        self.reported = None
        self.sent = None
        self.logs = {}
        self.collector_ok = True
        self.why = []

    def tick(self):
        rss = 0
        for pid in pids():
            if pid in self.harness:
                continue
            got = sample(pid)
            if got is None:
                continue
            rss += got[0]
            self.hwm[pid] = max(self.hwm.get(pid, 0), got[1])
            self.cpu[pid] = got[2]
        self.rss_now = rss
        self.rss_max = max(self.rss_max, rss)
        if self.baseline is not None:
            got, why = scrape(self.cfg["port"])
            self.scrapes += 1
            if got is None:
                self.scrape_errors += 1
                if self.scrape_errors <= 2:
                    self.why.append("scrape %d failed: %s" % (self.scrapes, why))
            else:
                self.reported = got

    def event(self, ev):
        if "harness" in ev:
            self.harness.update(int(p) for p in ev["harness"])
        if ev.get("baseline"):
            self.tick()
            self.baseline = self.rss_now
            self.rss_max = self.rss_now
        if "samples" in ev:
            self.samples += [(float(ms), bool(ok)) for ms, ok in ev["samples"]]
        if "restarts" in ev:
            self.restarts = int(ev["restarts"])
        if "sent" in ev:
            self.sent = int(ev["sent"])

    def snapshot(self, line):
        try:
            snap = json.loads(line)
            self.logs = {k: int(v) for k, v in snap["counts"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            self.collector_ok = False
            self.why.append("the collector sent a line that is not a snapshot")

    def verdict(self):
        rules = self.cfg["rules"]
        n = len(self.samples)
        failed = sum(1 for _, ok in self.samples if not ok)
        lat = [ms for ms, _ in self.samples]
        errors = self.logs.get("ERROR", 0) + self.logs.get("CRITICAL", 0)
        base = self.baseline or 0
        m = {"requests": n, "failed_requests": failed, "error_logs": errors,
             "warning_logs": self.logs.get("WARNING", 0), "log_records": sum(self.logs.values()),
             "p50_ms": round(percentile(lat, 0.5), 2), "p95_ms": round(percentile(lat, 0.95), 2),
             "rss_growth_mb": round(max(0, self.rss_max - base) / 2**20, 2),
             "peak_rss_mb": round(max([self.rss_max, *self.hwm.values()] or [0]) / 2**20, 2),
             "cpu_s": round(sum(self.cpu.values()), 3), "restarts": self.restarts, "scrapes": self.scrapes,
             "scrape_errors": self.scrape_errors}
        sent = self.cfg.get("requests_sent_total")
        value = {"error_rate": (failed + errors) / max(n, 1), "latency_p95": m["p95_ms"],
                 "memory": m["rss_growth_mb"], "restarts": self.restarts, "scrape": self.scrape_errors}
        fired = {"error_rate": value["error_rate"] > rules["error_rate"],
                 "latency_p95": value["latency_p95"] > rules["p95_ms"],
                 "memory": value["memory"] > rules["rss_growth_mb"],
                 "restarts": self.restarts > rules["restarts"],
                 "scrape": self.scrapes == 0 or self.scrape_errors > 0}
        limits = {"error_rate": rules["error_rate"], "latency_p95": rules["p95_ms"],
                  "memory": rules["rss_growth_mb"], "restarts": rules["restarts"], "scrape": 0}
        ok = n - failed
        if self.reported is None or n == 0 or self.reported < ok or (self.sent is not None and self.reported > self.sent):
            fired["scrape"] = True  # the service counts what it answered: no less, and no more than it was sent
            self.why.append("service_requests_total=%r on /metrics; %d requests answered in the load, %r sent in all"
                            % (self.reported, ok, self.sent))
            value["scrape"] += 1
        if not self.collector_ok:
            fired = {k: True for k in fired}
        if n == 0:
            fired["latency_p95"] = fired["error_rate"] = True
        return {"intact": self.collector_ok, "why": self.why, "measured": m,
                "alerts": {k: {"fired": fired[k], "value": value[k], "limit": limits[k]} for k in fired}}


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\\n")
    sys.stdout.flush()


class Lines:
    """JSON lines from one fd, without blocking on a partial line."""

    def __init__(self, fd):
        self.fd, self.buf, self.eof = fd, b"", False

    def read(self):
        data = os.read(self.fd, 1 << 20)
        self.eof = not data
        self.buf += data
        *lines, self.buf = self.buf.split(b"\\n")
        return lines


def main():
    cfg = json.loads(sys.argv[1])
    ev = Evaluator(cfg)
    snaps, events = Lines(cfg["snap_fd"]), Lines(0)
    first = []
    while not first and not snaps.eof:  # the collector is up (and non-dumpable) before the service starts
        first = snaps.read()
    for line in first:
        ev.snapshot(line)
    say({"ready": True})
    interval, next_tick, ending, final, frozen = float(cfg["interval_s"]), time.monotonic(), None, False, False
    while True:
        now = time.monotonic()
        if ending is not None and (final or now > ending):
            break
        if not frozen and now >= next_tick:
            ev.tick()
            next_tick = now + interval
        fds = [0] if ending is None else []
        fds += [snaps.fd] if not snaps.eof else []
        wait = (ending if ending is not None else next_tick if not frozen else now + 1.0) - time.monotonic()
        ready, _, _ = select.select(fds, [], [], max(0.0, wait))
        if snaps.fd in ready:
            for line in snaps.read():
                ev.snapshot(line)
                final = final or b'"final": true' in line
            if snaps.eof and not final:
                ev.collector_ok = False
                ev.why.append("the log collector exited before the end")
                final = True
        if 0 in ready:
            lines = events.read()
            if events.eof:
                return  # the harness is gone: nobody to tell
            for line in lines:
                msg = json.loads(line)
                ev.event(msg)
                if msg.get("tick"):  # the last sample and scrape: the harness stops the services next
                    ev.tick()
                    frozen = True
                    say({"ticked": True})
                if msg.get("end"):  # the services are stopped: wait for the collector's last snapshot
                    ending = time.monotonic() + float(cfg.get("drain_s", 0.5))
    say(ev.verdict())


main()
'''

LAUNCHER = """import os, runpy, sys
gate, preload, argv = int(sys.argv[1]), [m for m in sys.argv[2].split(",") if m], sys.argv[3:]
sys.dont_write_bytecode = True
sys.path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
for name in preload:  # trusted modules only: nothing of the workspace is on the path yet
    try:
        __import__(name)
    except ImportError:
        pass
os.read(gate, 2)
os.close(gate)
import site
site.main()
if argv[0] == "-m":
    sys.path.insert(0, os.getcwd())
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")
"""

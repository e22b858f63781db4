"""The in-sandbox zygote: reads one request per line, forks one child per request, replies with typed results.

Runs INSIDE the sandbox as the unprivileged slot uid (stdlib only; the host starts
``python3 -I -S -c "import worker; worker.main()" MODE CFG`` so the cached bytecode is used). Modes: ``serve`` (warm:
pytest pre-imported and one collection pre-run, then a request loop) and ``oneshot`` (one request, then exit: the
cold path). Requests: ``exec`` (argv), ``python`` (code run in the forked child, no new interpreter), ``pytest``
(hidden tests, structured report over a private pipe). The worker measures wall time, CPU time and peak RSS with
``wait4`` on the child, enforces the deadline, caps output, and after each request kills every stray process in the
pid namespace (``kill(-1)``; the worker itself and pid 1 survive)."""

import binascii
import os
import resource
import select
import sys
import time

import worker_pytest  # sibling in the runtime dir (cheap: pytest itself is imported lazily)
import worker_wipe  # sibling: the between-episodes check and wipe (os only)

try:
    import _signal as signal  # the same functions without `enum` (10+ ms of imports under load)
except ImportError:  # pragma: no cover - other interpreters
    import signal

# Lean imports on purpose: json, base64, ctypes and traceback pull in `re`/`enum` and cost more than the rest of
# a one-shot run. Requests arrive as Python literals written by the trusted host; replies are hand-encoded JSON.

CFG: dict = {}
PROTO_IN = PROTO_OUT = -1
OOM_MARKERS = (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc", b"out of memory")


def _prctl(option, arg):
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except Exception:
        pass


def _set_limits(lim):
    pairs = [
        (resource.RLIMIT_AS, lim.get("as_mb"), 1 << 20),
        (resource.RLIMIT_FSIZE, lim.get("fsize_mb"), 1 << 20),
        (resource.RLIMIT_NPROC, lim.get("nproc"), 1),
        (resource.RLIMIT_NOFILE, lim.get("nofile"), 1),
        (resource.RLIMIT_CORE, 0, 1),
    ]
    for which, value, unit in pairs:
        if value is not None:
            try:  # noqa: SIM105 (contextlib costs a one-shot run several ms of imports)
                resource.setrlimit(which, (int(value) * unit, int(value) * unit))
            except (ValueError, OSError):
                pass
    cpu = lim.get("cpu_s")
    if cpu:  # soft < hard: SIGXCPU (exit 152) is distinguishable from a SIGKILL
        try:  # noqa: SIM105 (contextlib costs a one-shot run several ms of imports)
            resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 1))
        except (ValueError, OSError):
            pass


def _child_common(stdin_r, out_w, err_w, keep=None):
    os.setsid()
    os.dup2(stdin_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    if keep is not None:
        os.dup2(keep, 3)
    os.closerange(4 if keep is not None else 3, 65536)
    os.chdir(CFG["workspace"])
    os.umask(0o022)


def _exec_child(req):
    env = req.get("env") or {}
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    _set_limits(req["limits"])
    argv = req["argv"]
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        os.write(2, f"sandbox: cannot execute {argv[0]!r}: {exc.strerror}\n".encode())
        os._exit(127)


def _finish_python(code):
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 (contextlib costs a one-shot run several ms of imports)
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def _exit_code_of(exc):
    c = exc.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xFF
    try:  # noqa: SIM105 (contextlib costs a one-shot run several ms of imports)
        sys.stderr.write(str(c) + "\n")
    except BaseException:
        pass
    return 1


def _python_child(req):
    import types

    _set_limits(req["limits"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main = types.ModuleType("__main__")
    main.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    sys.argv = ["-c"]
    sys.path[:] = [CFG["workspace"]] + [p for p in sys.path if p not in ("", CFG["workspace"])]
    code = 0
    try:
        exec(compile(req["code"], "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        code = _exit_code_of(exc)
    except BaseException as exc:
        try:
            import traceback

            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename == _python_child.__code__.co_filename:
                tb = tb.tb_next  # hide the worker's own frames, as `python -c` would
            traceback.print_exception(type(exc), exc, tb)
        except BaseException:
            os.write(2, b"MemoryError\n")
        code = 1
    _finish_python(code)


def _reap_all(wait_s=0.0):
    """Reap every child that has exited; with ``wait_s``, wait up to that long for all of them to (after
    ``kill(-1)``: a SIGKILLed stray can still be exiting on a loaded machine, and would show in the next call's ``ps``)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.002)


def _kill_strays(pid):
    try:  # noqa: SIM105 (contextlib costs a one-shot run several ms of imports)
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if CFG.get("kill_all"):
        try:  # noqa: SIM105 (contextlib costs a one-shot run several ms of imports)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass


def run_request(req):
    op = req["op"]
    cap = int(req.get("max_output", 1 << 20))
    timeout = float(req.get("timeout", 10.0))
    stdin_data = binascii.a2b_base64(req["stdin"]) if req.get("stdin") else b""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe() if op == "pytest" else (-1, -1)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (PROTO_IN, PROTO_OUT, in_w, out_r, err_r, rep_r):
                if fd >= 0:
                    os.close(fd)
            _child_common(in_r, out_w, err_w, keep=rep_w if op == "pytest" else None)
            if op == "exec":
                _exec_child(req)
            elif op == "python":
                _python_child(req)
            else:
                worker_pytest.pytest_child(req, CFG, _set_limits, _finish_python, _exit_code_of)
        finally:
            os._exit(126)
    for fd in (in_r, out_w, err_w, rep_w):
        if fd >= 0:
            os.close(fd)
    return _supervise(pid, t0, timeout, cap, in_w, stdin_data, out_r, err_r, rep_r, req.get("nonce"))


def _supervise(pid, t0, timeout, cap, in_w, stdin_data, out_r, err_r, rep_r, nonce=None):
    bufs = {out_r: bytearray(), err_r: bytearray(), rep_r: bytearray()}
    totals = {out_r: 0, err_r: 0, rep_r: 0}
    caps = {out_r: cap, err_r: cap, rep_r: 8 << 20}
    open_fds = [fd for fd in (out_r, err_r, rep_r) if fd >= 0]
    pidfd = os.pidfd_open(pid)
    if stdin_data:
        os.set_blocking(in_w, False)
    else:
        os.close(in_w)
        in_w = -1
    deadline = t0 + timeout
    status = rusage = None
    timed_out = False
    drain_until = None
    while open_fds or status is None:
        now = time.monotonic()
        if status is None and now >= deadline:
            timed_out = True
            _kill_strays(pid)
            _, status, rusage = os.wait4(pid, 0)
            drain_until = time.monotonic() + 1.0
        if drain_until is not None and time.monotonic() >= drain_until:
            break
        wait = (deadline if drain_until is None else drain_until) - time.monotonic()
        rlist = list(open_fds) + ([pidfd] if status is None else [])
        wlist = [in_w] if in_w >= 0 else []
        r, w, _ = select.select(rlist, wlist, [], max(0.0, wait))
        if w:
            try:
                n = os.write(in_w, stdin_data[:65536])
                stdin_data = stdin_data[n:]
            except OSError:
                stdin_data = b""
            if not stdin_data:
                os.close(in_w)
                in_w = -1
        for fd in r:
            if fd == pidfd:
                _, status, rusage = os.wait4(pid, 0)
                _kill_strays(pid)  # strays may hold the pipes; they are dead now, so draining ends
                drain_until = time.monotonic() + 1.0
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.remove(fd)
                os.close(fd)
                continue
            totals[fd] += len(chunk)
            room = caps[fd] - len(bufs[fd])
            if room > 0:
                bufs[fd] += chunk[:room]
    wall = time.monotonic() - t0
    for fd in open_fds + [pidfd] + ([in_w] if in_w >= 0 else []):
        os.close(fd)
    _reap_all(2.0 if CFG.get("kill_all") else 0.0)  # kill_all: every other process of the sandbox was SIGKILLed
    return _result(status, rusage, timed_out, wall, bufs, totals, caps, out_r, err_r, rep_r, nonce)


def _result(status, rusage, timed_out, wall, bufs, totals, caps, out_r, err_r, rep_r, nonce=None):
    if timed_out:
        exit_code = None
    elif os.WIFSIGNALED(status):
        exit_code = 128 + os.WTERMSIG(status)
    else:
        exit_code = os.WEXITSTATUS(status)
    if exit_code == 128 + signal.SIGXCPU:
        timed_out = True
    err = bytes(bufs[err_r])
    oom = exit_code not in (0, None) and any(m in err[-4096:] for m in OOM_MARKERS)
    res = {
        "exit_code": exit_code,
        "stdout": bytes(bufs[out_r]).decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
        "timed_out": timed_out,
        "oom": oom,
        "wall_s": wall,
        "cpu_s": (rusage.ru_utime + rusage.ru_stime) if rusage else 0.0,
        "peak_rss_mb": (rusage.ru_maxrss / 1024.0) if rusage else 0.0,
        "output_truncated": totals[out_r] > caps[out_r] or totals[err_r] > caps[err_r],
    }
    if rep_r >= 0:
        report = None
        for line in bytes(bufs[rep_r]).splitlines():
            try:
                import json

                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("done") and doc.get("nonce") == nonce:
                report = doc
        res["report"] = report
    return res


_ESC = {i: f"\\u{i:04x}" for i in range(32)}
_ESC.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _dumps(obj):
    """JSON for the reply's plain types (None, bool, int, float, str, list, dict)."""
    if obj is None:
        return "null"
    if obj is True or obj is False:
        return "true" if obj else "false"
    if isinstance(obj, (int, float)):
        return repr(obj)
    if isinstance(obj, str):
        return '"' + obj.translate(_ESC) + '"'
    if isinstance(obj, dict):
        return "{" + ",".join(_dumps(str(k)) + ":" + _dumps(v) for k, v in obj.items()) + "}"
    return "[" + ",".join(_dumps(v) for v in obj) + "]"


def _literal(text):
    """A request or config: a Python literal written by the host (trusted; no names are available)."""
    return eval(text, {"__builtins__": {}}, {})


def _send(obj):
    data = (_dumps(obj) + "\n").encode("utf-8", "replace")
    while data:
        n = os.write(PROTO_OUT, data)
        data = data[n:]


def _wipe(baseline):
    """Between episodes: reap what died, then put the writable file systems back to ``baseline``."""
    _reap_all()
    if baseline is None:
        return {"left": ["(no baseline: this worker does not wipe in place; the host resets it from scratch)"]}
    return {"left": worker_wipe.wipe(baseline)[:20]}


def main():
    global CFG, PROTO_IN, PROTO_OUT
    mode = sys.argv[1]
    CFG = _literal(sys.argv[2])
    sys.dont_write_bytecode = True  # no __pycache__ in the workspace
    if CFG.get("pyenv"):  # the task's own packages come first, for the agent's code and the tests alike
        sys.path.insert(0, CFG["pyenv"])
    for extra in (CFG.get("site"), "/usr/lib/python3/dist-packages"):  # what `python3 -c` would also see
        if extra and extra not in sys.path and os.path.isdir(extra):
            sys.path.append(extra)
    _prctl(4, 0)  # PR_SET_DUMPABLE=0: same-uid children cannot ptrace or read /proc/<worker>/mem or fds
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans are reaped here
    PROTO_IN, PROTO_OUT = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if mode == "serve" and CFG.get("warm_pytest", True):
        try:
            worker_pytest.warm_pytest(CFG)
        except Exception as exc:  # the worker still serves exec/python; pytest runs import it cold
            os.write(2, f"sandbox worker: pytest warm-up failed: {exc!r}\n".encode())
    import gc

    gc.freeze()  # children's collections (pytest runs two per session) skip the zygote's objects; less CoW too
    # before any agent code runs; never under weak isolation, where "/" is the host's own file system (walking it all
    # took 770 MB for 0.8M entries, past the sandbox's memory cgroup on a machine with many files)
    baseline = worker_wipe.snapshot() if mode == "serve" and CFG.get("wipe", True) else None
    _send({"ready": True, "pid": os.getpid()})
    reader = os.fdopen(PROTO_IN, "rb", buffering=0)
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = reader.read(1 << 20)
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        req = _literal(line.decode())
        try:
            # "wipe" (between episodes) runs in the worker itself: no agent code runs there
            res = _wipe(baseline) if req["op"] == "wipe" else run_request(req)
        except Exception:
            import traceback

            res = {"infra_error": traceback.format_exc()[-4000:]}
        res["rid"] = req.get("rid")  # the host matches every reply to its request
        _send(res)
        if mode == "oneshot":
            return


if __name__ == "__main__":
    main()

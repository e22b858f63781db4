"""The in-sandbox stateful Python REPL behind ``LocalCodeSession`` (stdlib only).

Started as ``python3 -I -S repl.py CFG`` inside its own bwrap. Each JSON-line request runs one cell in a kept
namespace; the per-cell timeout is enforced here with ``setitimer`` in the main thread, output goes to memfds, and
the last expression's repr is printed (notebook style). After each cell every stray process is killed.
"""

import ast
import builtins
import contextlib
import json
import os
import resource
import signal
import sys
import time
import traceback

KILL_ALL = False


class CellTimeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise CellTimeout()


def _limits(lim):
    for which, value, unit in ((resource.RLIMIT_AS, lim.get("as_mb"), 1 << 20),
                               (resource.RLIMIT_FSIZE, lim.get("fsize_mb"), 1 << 20),
                               (resource.RLIMIT_NPROC, lim.get("nproc"), 1),
                               (resource.RLIMIT_NOFILE, lim.get("nofile"), 1),
                               (resource.RLIMIT_CORE, 0, 1)):
        if value is not None:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (int(value) * unit, int(value) * unit))


def _run_cell(code, ns):
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), ns)
    if last is not None:
        value = eval(compile(last, "<cell>", "eval"), ns)
        if value is not None:
            print(repr(value))


def _read_capped(fd, cap):
    size = os.fstat(fd).st_size
    data = os.pread(fd, min(size, cap), 0)
    os.close(fd)
    return data.decode("utf-8", "replace"), size > cap


def run(req, ns):
    cap = int(req.get("max_output", 1 << 20))
    out_fd, err_fd = os.memfd_create("stdout"), os.memfd_create("stderr")
    saved = os.dup(1), os.dup(2)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    r0s, r0c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    exit_code, timed_out, oom = 0, False, False  # type: (int | None, bool, bool)
    signal.setitimer(signal.ITIMER_REAL, float(req.get("timeout", 10.0)))
    try:
        _run_cell(req["code"], ns)
    except CellTimeout:
        timed_out, exit_code = True, None
    except SystemExit as exc:
        exit_code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:
        oom = isinstance(exc, MemoryError)
        exit_code = 1
        try:
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename == run.__code__.co_filename:
                tb = tb.tb_next  # hide the REPL's own frames
            traceback.print_exception(type(exc), exc, tb)
        except BaseException:
            os.write(2, repr(exc).encode() + b"\n")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    wall = time.monotonic() - t0
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    if timed_out:
        os.write(2, f"TimeoutError: the cell exceeded its {req.get('timeout')} s timeout\n".encode())
    if KILL_ALL:  # strays the cell started (we are not pid 1 of our pid namespace, and kill(-1) spares us)
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    for fd in saved:
        os.close(fd)
    r1s, r1c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    stdout, t1 = _read_capped(out_fd, cap)
    stderr, t2 = _read_capped(err_fd, cap)
    cpu = sum(getattr(b, f) - getattr(a, f) for a, b in ((r0s, r1s), (r0c, r1c)) for f in ("ru_utime", "ru_stime"))
    return {"exit_code": exit_code, "stdout": stdout, "stderr": stderr, "timed_out": timed_out, "oom": oom,
            "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": max(r1s.ru_maxrss, r1c.ru_maxrss) / 1024.0,
            "output_truncated": t1 or t2}


def main():
    global KILL_ALL
    cfg = json.loads(sys.argv[1])
    KILL_ALL = bool(cfg.get("kill_all"))
    sys.dont_write_bytecode = True
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.set_inheritable(proto_in, False)
    os.set_inheritable(proto_out, False)
    os.chdir(cfg["workspace"])
    sys.path[:] = [cfg["workspace"]] + ([cfg["pyenv"]] if cfg.get("pyenv") else []) + sys.path + [cfg["site"]]
    _limits(cfg["limits"])
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    ns = {"__name__": "__main__", "__builtins__": builtins}
    reader = os.fdopen(proto_in, "rb", buffering=0)
    os.write(proto_out, b'{"ready": true}\n')
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = reader.read(1 << 20)
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        res = run(json.loads(line), ns)
        data = (json.dumps(res) + "\n").encode()
        while data:
            data = data[os.write(proto_out, data):]


if __name__ == "__main__":
    main()

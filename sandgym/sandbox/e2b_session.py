"""``E2BCodeSession``: the ``CodeSession`` protocol on E2B's code interpreter (a Jupyter kernel in the VM)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from sandgym.errors import SandboxError
from sandgym.sandbox.e2b_errors import TimeoutException, cap_text, infra_error, is_sandbox_gone
from sandgym.sandbox.protocol import ExecResult, Limits

__all__ = ["E2BCodeSession"]


class E2BCodeSession:
    """A stateful Python interpreter in an E2B code-interpreter VM (variables persist between ``run_code`` calls).

    ``sbx`` is an ``e2b_code_interpreter.Sandbox`` (or a fake with ``run_code``, ``create_code_context``,
    ``restart_code_context`` and ``remove_code_context``). The session runs in its own kernel context, created on
    first use with ``workdir`` as its working directory. The value of a cell's last expression is appended to
    ``stdout`` as its text form, like a notebook shows it. CPU time and peak RSS are not measured (0.0).
    """

    def __init__(self, sbx: Any, limits: Limits | None = None, *, workdir: str | None = None) -> None:
        self._sbx = sbx
        self.limits = limits or Limits()
        self.workdir = workdir
        self._context: Any = None
        self._closed = False

    def _ctx(self) -> Any:
        if self._context is None:
            try:
                self._context = self._sbx.create_code_context(cwd=self.workdir, language="python")
            except Exception as e:
                raise infra_error(e, "starting a code-interpreter context") from e
        return self._context

    def run_code(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run a cell. A Python exception gives exit code 1 with the traceback in ``stderr``; a timeout restarts
        the kernel (state lost) and says so in ``stderr``.

        Raises:
            SandboxError: the session is closed, or the VM is gone or unreachable.
        """
        if self._closed:
            raise SandboxError("this E2BCodeSession is closed; open a new one with E2BSandbox.session()")
        limit = float(timeout if timeout is not None else self.limits.timeout_s)
        context = self._ctx()
        start = time.monotonic()
        try:
            execution = self._sbx.run_code(code, context=context, timeout=limit)
        except TimeoutException as e:
            if is_sandbox_gone(e):
                raise infra_error(e, "running a cell") from e
            self.reset()
            return ExecResult(
                exit_code=None,
                stdout="",
                stderr=f"TimeoutError: the cell ran past {limit:g}s; the interpreter was restarted and its state reset\n",
                timed_out=True,
                wall_s=time.monotonic() - start,
            )
        except Exception as e:
            raise infra_error(e, "running a cell") from e
        wall = time.monotonic() - start
        stdout = "".join(execution.logs.stdout)
        for result in getattr(execution, "results", None) or ():
            text = getattr(result, "text", None)
            if text and getattr(result, "is_main_result", True):
                stdout += text if text.endswith("\n") else text + "\n"
        stderr = "".join(execution.logs.stderr)
        error = execution.error
        if error is not None:
            trace = error.traceback or f"{error.name}: {error.value}"
            stderr += trace if trace.endswith("\n") else trace + "\n"
        stdout, cut_out = cap_text(stdout, self.limits.max_output_bytes)
        stderr, cut_err = cap_text(stderr, self.limits.max_output_bytes)
        return ExecResult(
            exit_code=1 if error is not None else 0,
            stdout=stdout,
            stderr=stderr,
            oom=error is not None and error.name == "MemoryError",
            wall_s=wall,
            output_truncated=cut_out or cut_err,
        )

    def reset(self) -> None:
        """Forget every variable: restart this session's kernel (a new context if the restart fails)."""
        if self._context is None:
            return
        try:
            self._sbx.restart_code_context(self._context)
        except Exception:
            with contextlib.suppress(Exception):
                self._sbx.remove_code_context(self._context)
            self._context = None

    def close(self) -> None:
        """Drop the kernel context (errors swallowed). Safe to call more than once; the VM stays up."""
        if self._closed:
            return
        self._closed = True
        if self._context is not None:
            with contextlib.suppress(Exception):
                self._sbx.remove_code_context(self._context)
            self._context = None

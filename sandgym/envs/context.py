"""Per-episode state that tools act on: the sandbox (created on first use), the task, and runtime counters."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sandgym.envs.outcome import SandboxRuntime
from sandgym.sandbox.protocol import ExecResult, Sandbox
from sandgym.tasks.task import Task

__all__ = ["RuntimeStats", "ToolContext"]


@dataclass
class RuntimeStats:
    """Sandbox signals accumulated over an episode (mutable, owned by one ``ToolContext``)."""

    exec_calls: int = 0
    exceptions: int = 0
    timeouts: int = 0
    ooms: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0

    def record(self, result: ExecResult, *, python: bool = False) -> None:
        """Count one run; a non-zero exit with a traceback (or any failing ``python`` run) is an exception."""
        self.exec_calls += 1
        self.wall_s += result.wall_s
        self.cpu_s += result.cpu_s
        self.peak_rss_mb = max(self.peak_rss_mb, result.peak_rss_mb)
        if result.timed_out:
            self.timeouts += 1
        elif result.oom:
            self.ooms += 1
        elif result.exit_code not in (0, None) and (python or "Traceback (most recent call last)" in result.stderr):
            self.exceptions += 1

    def snapshot(self) -> SandboxRuntime:
        """The frozen totals so far (what ``EpisodeOutcome.runtime`` holds)."""
        return SandboxRuntime(
            exec_calls=self.exec_calls, exceptions=self.exceptions, timeouts=self.timeouts, ooms=self.ooms,
            sandbox_wall_s=round(self.wall_s, 4), sandbox_cpu_s=round(self.cpu_s, 4),
            peak_rss_mb=round(self.peak_rss_mb, 2),
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self.snapshot())


class ToolContext:
    """What a tool may touch during one episode. The sandbox starts on first use and gets the task's files."""

    def __init__(self, task: Task, sandbox_factory: Callable[[Task], Sandbox]) -> None:
        self.task = task
        self.stats = RuntimeStats()
        self.submitted: str | None = None
        """The argument of ``submit`` once called (the final answer, or "done")."""
        self.visible_results: list[bool] = []
        """One entry per ``run_tests`` call: did every visible test pass (the env reads them for ``Actions``)."""
        self._factory = sandbox_factory
        self._sandbox: Sandbox | None = None
        self._session: Any = None
        self._has_session = True

    @property
    def max_observation_chars(self) -> int:
        return self.task.limits.max_observation_chars

    @property
    def entry_file(self) -> str:
        """The file the agent is expected to edit (``metadata["entry_file"]``, default ``solution.py``)."""
        return str(self.task.metadata.get("entry_file", "solution.py"))

    @property
    def started(self) -> bool:
        return self._sandbox is not None

    @property
    def sandbox(self) -> Sandbox:
        """The episode's sandbox, created (and filled with the task's files) on first access."""
        if self._sandbox is None:
            sandbox = self._factory(self.task)
            self._sandbox = sandbox
            for path, data in self.task.workspace_files.items():
                sandbox.write_file(path, data)
            for path, text in self.task.visible_tests.items():  # visible by definition; hidden ones never
                if path not in self.task.files:
                    sandbox.write_file(path, text)
        return self._sandbox

    def run_python(self, code: str) -> ExecResult:
        """Run code in the stateful session when the sandbox has one, else as a fresh program."""
        sandbox = self.sandbox
        timeout = self.task.limits.exec_timeout_s
        if self._session is None and self._has_session and hasattr(sandbox, "session"):
            try:
                self._session = sandbox.session()
            except (NotImplementedError, ImportError, AttributeError):  # backend without sessions
                self._has_session = False
        if self._session is not None:
            result = self._session.run_code(code, timeout=timeout)
        else:
            result = sandbox.run_python(code, timeout=timeout)
        self.stats.record(result, python=True)
        return result

    def exec(self, cmd: str | list[str]) -> ExecResult:
        result = self.sandbox.exec(cmd, timeout=self.task.limits.exec_timeout_s)
        self.stats.record(result)
        return result

    def end_agent(self) -> None:
        """Stop everything the agent started (its REPL session; the sandbox's own sessions and strays) before
        grading, so that no process of the agent's can act while it is graded."""
        session, self._session = self._session, None
        self._has_session = False
        if session is not None:
            with contextlib.suppress(Exception):
                session.close()
        if self._sandbox is not None:
            stop = getattr(self._sandbox, "end_agent_processes", None)
            if stop is not None:
                stop()

    def detach(self) -> Sandbox | None:
        """Close the session and hand the sandbox over (not closed) for reuse; None if it never started."""
        session, sandbox = self._session, self._sandbox
        self._session = self._sandbox = None
        if session is not None:
            with contextlib.suppress(Exception):
                session.close()
        return sandbox

    def close(self) -> None:
        """Close the session and the sandbox (idempotent; errors on close are ignored)."""
        session, sandbox = self._session, self._sandbox
        self._session = self._sandbox = None
        for obj in (session, sandbox):
            if obj is not None:
                with contextlib.suppress(Exception):  # closing a dead sandbox must not fail the next episode
                    obj.close()

"""The sandbox contract shared by every backend: limits in, typed results out.

Rules that make backends interchangeable:
- ``exec`` never raises because the sandboxed program failed; only infrastructure problems raise ``SandboxError``.
- Paths are relative to ``workdir``; ``..`` and symlinks are refused by the host-side file API.
- A ``str`` command runs under ``bash -c``; a sequence runs as an argv.
- ``close()`` is idempotent and kills everything the sandbox started.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, Protocol, runtime_checkable

from sandgym.errors import SandboxError

__all__ = ["Limits", "ExecResult", "TestReport", "TestOutcome", "Sandbox", "CodeSession", "SandboxError"]


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every process a sandbox runs."""

    timeout_s: float = 10.0
    """Default wall-clock limit of one ``exec`` (a per-call ``timeout=`` overrides it)."""
    memory_mb: int = 1024
    """Address-space limit (RLIMIT_AS) of each process; exceeding it is reported as ``oom``. The local backend also
    holds all the sandbox's processes together to ``memory_mb + tmp_mb + workspace_mb`` (one memory cgroup, where the
    platform allows it; an OOM kill there is ``oom`` too). See docs/SANDBOX.md, "Limits per sandbox"."""
    max_procs: int = 64
    """Process limit (RLIMIT_NPROC, enforced because the sandbox runs as a dedicated unprivileged uid)."""
    max_output_bytes: int = 1 << 20
    """Bytes kept of stdout and of stderr each; more sets ``output_truncated``."""
    max_file_mb: int = 64
    """Largest single file a process may write (RLIMIT_FSIZE)."""
    tmp_mb: int = 64
    """Size cap of the private ``/tmp`` (a tmpfs: writes past it fail with ENOSPC)."""
    workspace_mb: int = 256
    """Size cap of the workspace. Local backend as root: a tmpfs of this size, so writes past it fail with ENOSPC
    and ``ExecResult.stderr`` says the workspace is full; elsewhere it is only checked after each call and a larger
    workspace is reported in ``ExecResult.stderr``. See docs/SANDBOX.md, "Limits per sandbox"."""

    def __post_init__(self) -> None:
        """Every limit is a finite number > 0: zero, negative, NaN or infinite limits (or a non-number) would
        disable a limit or kill every call, so they are a ValueError naming the field and the fix, at once."""

        for f in fields(self):
            value = getattr(self, f.name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
            if not ok:
                hint = " (a task's limits.exec_timeout_s sets it)" if f.name == "timeout_s" else ""
                raise ValueError(f"Limits.{f.name}={value!r}{hint} must be a finite number > 0; pass a positive "
                                 f"value, e.g. {f.name}={f.default!r} (the default)")


@dataclass(frozen=True)
class ExecResult:
    """What one sandboxed run did, with the runtime signals that rewards use."""

    exit_code: int | None
    """Exit status; ``128 + n`` when killed by signal ``n``; None when the harness killed it on timeout."""
    stdout: str
    stderr: str
    timed_out: bool = False
    oom: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    """User + system CPU time of the sandboxed process tree (less noisy than wall time on a shared machine)."""
    peak_rss_mb: float = 0.0
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom

    @property
    def status(self) -> Literal["ok", "error", "timeout", "oom"]:
        if self.timed_out:
            return "timeout"
        if self.oom:
            return "oom"
        return "ok" if self.exit_code == 0 else "error"


@dataclass(frozen=True)
class TestOutcome:
    """One hidden test's result, from the structured report (never from an exit code)."""

    name: str
    outcome: Literal["passed", "failed", "error", "skipped"]
    message: str = ""


@dataclass(frozen=True)
class TestReport:
    """The structured result of a hidden-test run.

    ``passed`` counts only tests the report lists as passed; a missing or short report (for example after
    ``os._exit(0)`` in the solution) means ``reported < expected`` and the missing tests count as failed.
    """

    expected: int
    outcomes: tuple[TestOutcome, ...] = ()
    exec: ExecResult | None = None
    report_found: bool = False

    @property
    def passed(self) -> int:
        return sum(1 for o in self.outcomes if o.outcome == "passed")

    @property
    def reported(self) -> int:
        return len(self.outcomes)

    @property
    def fraction(self) -> float:
        """Share of the expected tests that passed (0.0 when nothing was expected)."""
        return self.passed / self.expected if self.expected > 0 else 0.0

    @property
    def all_passed(self) -> bool:
        return self.report_found and self.expected > 0 and self.passed == self.expected


@runtime_checkable
class Sandbox(Protocol):
    """An isolated place to run untrusted code, with a private writable workspace."""

    workdir: str
    limits: Limits

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run a command in the workspace. Raises ``SandboxError`` only for infrastructure failures."""
        ...

    def run_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run a Python program (fresh state each call) on the fast warm path where the backend has one."""
        ...

    def run_tests(
        self, tests: Mapping[str, str | bytes], *, expected: int, timeout: float | None = None,
        isolation: str = "process",
    ) -> TestReport:
        """Run pytest on hidden test files (and the files beside them: text, or bytes for binary data) against the
        workspace.

        The files are placed where the agent's code cannot write them, ``conftest.py`` and ``sitecustomize.py``
        in the workspace have no effect, and the report is structured (never an exit code alone). Backends that
        can, accept ``isolation="in-process"`` (keyword) for tests that must share the solution's process; the
        default keeps the agent's code out of the grader's process (``Verifier.isolation``).
        """
        ...

    def write_file(self, path: str, data: str | bytes) -> None:
        """Write a workspace file (parents created). Raises ValueError for ``..``/absolute paths or symlinks."""
        ...

    def read_file(self, path: str) -> str:
        """Read a workspace file as UTF-8 (undecodable bytes replaced). FileNotFoundError if missing."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """Read a workspace file's bytes. FileNotFoundError if missing."""
        ...

    def list_files(self, path: str = ".") -> list[str]:
        """Regular files under ``path``, recursively, as sorted paths relative to the workspace."""
        ...

    def close(self) -> None:
        """Kill everything and remove the workspace. Safe to call more than once."""
        ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class CodeSession(Protocol):
    """A stateful Python interpreter (variables persist between calls), like a notebook kernel."""

    def run_code(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run a cell. A Python exception gives a non-zero ``exit_code`` with the traceback in ``stderr``;
        a timeout kills the interpreter, resets its state and says so in ``stderr``."""
        ...

    def reset(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class IsolationReport:
    """What ``sandgym sandbox check`` found: which probes were contained, and the measured latency."""

    backend: str
    probes: Mapping[str, bool] = field(default_factory=dict)
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def contained(self) -> bool:
        return all(self.probes.values())


def failure_summary(message: str, limit: int = 300) -> str:
    """The lines of a pytest failure an agent acts on: the failing source line (``>``) and the first error line
    (``E``), e.g. ``assert stretch('ab') == 'aabb' | AssertionError: assert 'aaabbb' == 'aabb'``. A message
    without them (a collection error, a crash) is kept whole, up to ``limit`` characters."""
    src = next((ln[1:].strip() for ln in message.splitlines() if ln.startswith(">")), "")
    err = next((ln[1:].strip() for ln in message.splitlines() if ln.startswith("E ") and ln[1:].strip()), "")
    text = " | ".join(x for x in (src, err) if x) or message.strip()
    return text[:limit]


def report_lines(report: TestReport) -> list[str]:
    """A test run as an agent reads it: the count, then one line per test that did not pass (the ``run_tests``
    tool's result, and the failing run a repository fix task shows in its prompt)."""
    lines = [f"Visible tests: {report.passed} passed, {report.expected - report.passed} not passed "
             f"(of {report.expected})."]
    if not report.report_found:
        tail = (report.exec.stderr or report.exec.stdout)[-600:] if report.exec else ""
        lines.append("The test run produced no report (crash, exit or timeout)." + (f"\n{tail}" if tail else ""))
    for o in report.outcomes:
        if o.outcome != "passed":
            lines.append(f"{o.outcome.upper()} {o.name.split('::', 1)[-1]}: {failure_summary(o.message)}")
    return lines

"""``SandboxPool``: warm sandboxes handed out per episode, a concurrency cap, and failure classification.

``with pool.acquire() as sb:`` gives a warm sandbox (a proxy that counts outcomes). On release the sandbox is
closed and a fresh one is pre-warmed in the background, so no state leaks between episodes. A ``SandboxError``
(sandbox died, backend unreachable) is an *infrastructure* failure: counted, the sandbox replaced, the error
re-raised for the caller to drop the sample. A timeout, OOM or crash of the agent's code is an *agent* failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sandgym.errors import SandboxError
from sandgym.sandbox.protocol import ExecResult, Sandbox, TestReport

Failure = Literal["ok", "agent", "infra"]


def classify(outcome: ExecResult | TestReport | BaseException) -> Failure:
    """``infra`` for SandboxError (not the agent's fault), ``agent`` for timeout/OOM/crash/non-zero, else ``ok``."""
    if isinstance(outcome, BaseException):
        return "infra" if isinstance(outcome, SandboxError) else "agent"
    if isinstance(outcome, TestReport):
        return "ok" if outcome.all_passed else "agent"
    return "ok" if outcome.ok else "agent"


@dataclass
class PoolStats:
    """Counters of a pool (a snapshot is returned by ``SandboxPool.stats``)."""

    created: int = 0
    acquired: int = 0
    released: int = 0
    replaced_broken: int = 0
    infra_failures: int = 0
    agent_failures: int = 0
    timeouts: int = 0
    ooms: int = 0
    calls: int = 0
    in_use: int = 0
    idle: int = 0


class PooledSandbox:
    """Delegates to a sandbox and records each outcome in the pool's stats; broken after a SandboxError."""

    def __init__(self, pool: SandboxPool, sandbox: Sandbox) -> None:
        self._pool = pool
        self.sandbox = sandbox
        self.broken = False
        self.workdir = sandbox.workdir
        self.limits = sandbox.limits

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            out = fn(*args, **kwargs)
        except SandboxError as exc:
            self.broken = True
            self._pool._record(exc)
            raise
        self._pool._record(out)
        return out

    def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
             env: Mapping[str, str] | None = None, stdin: str | bytes | None = None) -> ExecResult:
        return self._call(self.sandbox.exec, cmd, timeout=timeout, env=env, stdin=stdin)

    def run_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        return self._call(self.sandbox.run_python, code, timeout=timeout)

    def run_tests(self, tests: Mapping[str, str | bytes], *, expected: int, timeout: float | None = None,
                  **kwargs: Any) -> TestReport:
        return self._call(self.sandbox.run_tests, tests, expected=expected, timeout=timeout, **kwargs)

    def write_file(self, path: str, data: str | bytes) -> None:
        self.sandbox.write_file(path, data)

    def read_file(self, path: str) -> str:
        return self.sandbox.read_file(path)

    def read_bytes(self, path: str) -> bytes:
        return self.sandbox.read_bytes(path)

    def list_files(self, path: str = ".") -> list[str]:
        return self.sandbox.list_files(path)

    def session(self, **kwargs: Any) -> Any:
        return self.sandbox.session(**kwargs)  # type: ignore[attr-defined]

    def close(self) -> None:
        """Released by the pool when the ``with`` block ends; closing early marks it for replacement."""
        self.broken = True

    def __enter__(self) -> PooledSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class SandboxPool:
    """Up to ``size`` sandboxes in use at once; ``prewarm`` of them kept started and idle.

    Args:
        factory: creates one sandbox (e.g. ``lambda: make_sandbox("local", limits)``).
        size: concurrency cap (``acquire`` blocks when all are in use).
        prewarm: idle sandboxes to keep ready (default ``size``; 0 starts them on demand).
        reuse: keep a healthy sandbox for the next episode instead of replacing it, after its ``reset()`` (every
            process killed, every writable path wiped and checked); backends without ``reset`` are replaced.
    """

    def __init__(self, factory: Callable[[], Sandbox], size: int = 2, *, prewarm: int | None = None,
                 reuse: bool = False) -> None:
        if size < 1:
            raise ValueError(f"size={size} must be >= 1")
        self._factory = factory
        self.size = size
        self.prewarm = size if prewarm is None else max(0, min(prewarm, size))
        self.reuse = reuse
        self._sem = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)  # a pre-warming sandbox became idle (or failed)
        self._idle: list[Sandbox] = []
        self._stats = PoolStats()
        self._closed = False
        self._warming = 0
        for _ in range(self.prewarm):
            self._warm_async()

    @property
    def stats(self) -> PoolStats:
        with self._lock:
            s = dataclasses.replace(self._stats)
            s.idle = len(self._idle)
            return s

    def _record(self, outcome: ExecResult | TestReport | BaseException) -> None:
        kind = classify(outcome)
        with self._lock:
            self._stats.calls += 1
            if kind == "infra":
                self._stats.infra_failures += 1
            elif kind == "agent":
                self._stats.agent_failures += 1
            r = outcome.exec if isinstance(outcome, TestReport) else outcome
            if isinstance(r, ExecResult):
                self._stats.timeouts += int(r.timed_out)
                self._stats.ooms += int(r.oom)

    def _create(self) -> Sandbox:
        try:
            sb = self._factory()
        except SandboxError as exc:
            self._record(exc)
            raise
        with self._lock:
            self._stats.created += 1
        return sb

    def _warm_async(self) -> None:
        def start() -> Sandbox | None:
            try:
                sb = self._create()
            except Exception:  # noqa: BLE001 - counted; acquire() retries synchronously and raises to the caller
                return None
            ready = getattr(sb, "wait_ready", None)
            if ready is not None:
                try:
                    ready()  # hand out only sandboxes whose worker is really up
                except SandboxError as exc:
                    self._record(exc)
                    sb.close()
                    return None
            return sb

        def work() -> None:
            sb = start()
            with self._lock:
                self._warming -= 1
                self._ready.notify_all()  # an acquire() waiting for this one looks again
                if sb is None:
                    return
                if not self._closed and len(self._idle) < self.prewarm:
                    self._idle.append(sb)
                    return
            sb.close()

        with self._lock:
            if self._closed or len(self._idle) + self._warming >= self.prewarm:
                return
            self._warming += 1
        threading.Thread(target=work, name="sandgym-pool-warm", daemon=True).start()

    @contextlib.contextmanager
    def acquire(self, timeout: float | None = None) -> Iterator[PooledSandbox]:
        """A warm sandbox for one episode; blocks while ``size`` are in use (TimeoutError after ``timeout``)."""
        if not self._sem.acquire(timeout=timeout):
            raise TimeoutError(f"no sandbox free within {timeout} s (pool size {self.size})")
        try:
            with self._lock:
                # a sandbox being pre-warmed is nearly ready: wait for it rather than start one more
                self._ready.wait_for(lambda: self._idle or not self._warming or self._closed, timeout=timeout)
                if self._closed:
                    raise SandboxError("the sandbox pool is closed")
                sb = self._idle.pop() if self._idle else None
                self._stats.acquired += 1
                self._stats.in_use += 1
            if sb is None:
                sb = self._create()
            proxy = PooledSandbox(self, sb)
            try:
                yield proxy
            except SandboxError:
                proxy.broken = True
                raise
            finally:
                self._release(proxy)
        finally:
            self._sem.release()

    def _release(self, proxy: PooledSandbox) -> None:
        sb = proxy.sandbox
        healthy = not proxy.broken and bool(getattr(sb, "alive", True))
        with self._lock:
            self._stats.released += 1
            self._stats.in_use -= 1
            if proxy.broken:
                self._stats.replaced_broken += 1
            keep = self.reuse and healthy and not self._closed and len(self._idle) < self.prewarm
        if keep:  # reused only when the backend can wipe itself (every process, every writable path)
            try:
                reset = getattr(sb, "reset", None)
                if reset is None:
                    keep = False
                else:
                    reset()
            except Exception:  # noqa: BLE001 - a sandbox that cannot be wiped is replaced
                keep = False
        if keep:
            with self._lock:
                self._idle.append(sb)
        if not keep:
            sb.close()
            self._warm_async()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._ready.notify_all()
        for sb in idle:
            sb.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

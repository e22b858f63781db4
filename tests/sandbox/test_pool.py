"""SandboxPool: warm hand-out, concurrency cap, replacement of broken sandboxes, failure classification."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import pytest

from sandgym.errors import SandboxError
from sandgym.sandbox import ExecResult, Limits, SandboxPool, protocol
from sandgym.sandbox.pool import classify
from tests.fake_sandbox import FakeSandbox


class ScriptedSandbox(FakeSandbox):
    """The shared fake with ``exec`` answered from the command, no process, so the pool logic is tested fast and
    deterministically: ``ok`` passes, ``loop`` times out, ``die`` kills the sandbox, anything else fails."""

    def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
             env: Mapping[str, str] | None = None, stdin: str | bytes | None = None) -> ExecResult:
        if cmd == "die":
            raise SandboxError("sandbox died")
        if cmd == "loop":
            return ExecResult(exit_code=None, stdout="", stderr="", timed_out=True)
        return ExecResult(exit_code=0 if cmd == "ok" else 1, stdout="", stderr="")


def test_classify() -> None:
    assert classify(ExecResult(exit_code=0, stdout="", stderr="")) == "ok"
    assert classify(ExecResult(exit_code=None, stdout="", stderr="", timed_out=True)) == "agent"
    assert classify(ExecResult(exit_code=1, stdout="", stderr="", oom=True)) == "agent"
    assert classify(SandboxError("backend unreachable")) == "infra"
    assert classify(protocol.TestReport(expected=2)) == "agent"


def test_pool_counts_agent_and_infra_failures_and_replaces_broken() -> None:
    with SandboxPool(ScriptedSandbox, size=1, prewarm=0) as pool:
        with pool.acquire() as sb:
            assert sb.exec("ok").ok
            assert sb.exec("loop").timed_out
            first = sb.sandbox
        assert first.closed  # no reuse across episodes by default
        with pytest.raises(SandboxError), pool.acquire() as sb:
            sb.exec("die")
        with pool.acquire() as sb:
            assert sb.sandbox is not first and sb.exec("ok").ok
        s = pool.stats
    assert (s.agent_failures, s.infra_failures, s.timeouts, s.replaced_broken) == (1, 1, 1, 1)
    assert s.acquired == s.released == 3 and s.in_use == 0


def test_pool_reuse_keeps_healthy_sandbox() -> None:
    with SandboxPool(ScriptedSandbox, size=1, prewarm=1, reuse=True) as pool:
        with pool.acquire() as sb:  # at once: waits for the sandbox being pre-warmed instead of making another
            first = sb.sandbox
        with pool.acquire() as sb:
            assert sb.sandbox is first
        assert pool.stats.created == 1
    assert first.resets >= 1  # wiped between the two uses


def test_pool_never_reuses_a_backend_that_cannot_reset() -> None:
    class NoReset(ScriptedSandbox):
        reset = None  # type: ignore[assignment]

    with SandboxPool(NoReset, size=1, prewarm=1, reuse=True) as pool:
        with pool.acquire() as sb:
            first = sb.sandbox
        with pool.acquire() as sb:
            assert sb.sandbox is not first and first.closed


def test_pool_caps_concurrency() -> None:
    with SandboxPool(ScriptedSandbox, size=2, prewarm=0) as pool:
        inside = threading.Event()
        release = threading.Event()
        peak: list[int] = []

        def worker() -> None:
            with pool.acquire():
                peak.append(pool.stats.in_use)
                inside.set()
                release.wait(5)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        inside.wait(5)
        with pytest.raises(TimeoutError), pool.acquire(timeout=0.05):
            pass
        release.set()
        for t in threads:
            t.join(5)
        assert max(peak) <= 2


def test_factory_failure_is_infra() -> None:
    def broken() -> ScriptedSandbox:
        raise SandboxError("backend unreachable")

    pool = SandboxPool(broken, size=1, prewarm=0)
    with pytest.raises(SandboxError), pool.acquire():
        pass
    assert pool.stats.infra_failures == 1


def test_pool_with_real_local_sandbox_replaces_broken() -> None:
    from sandgym.sandbox import LocalSandbox

    try:
        probe = LocalSandbox(Limits(timeout_s=5))
    except SandboxError as exc:
        pytest.skip(str(exc))
    probe.close()
    with SandboxPool(lambda: LocalSandbox(Limits(timeout_s=5)), size=1, prewarm=1) as pool:
        with pool.acquire() as sb:
            sb.write_file("a.txt", "episode 1")
            assert sb.exec("cat a.txt").stdout == "episode 1"
        with pool.acquire() as sb:
            assert sb.list_files() == []  # a fresh sandbox for the next episode
            assert sb.run_python("print(1)").ok
        assert pool.stats.created >= 2

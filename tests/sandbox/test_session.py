"""LocalCodeSession: state persists, errors and timeouts are reported, a timeout resets the state."""

from __future__ import annotations

import os

import pytest

from sandgym.errors import SandboxError
from sandgym.sandbox import CodeSession, Limits, LocalSandbox


@pytest.fixture(scope="module")
def sb() -> LocalSandbox:
    try:
        box = LocalSandbox(Limits(timeout_s=5, memory_mb=512, max_output_bytes=4096))
    except SandboxError as exc:
        if os.environ.get("SANDGYM_REQUIRE_SANDBOX"):
            raise
        pytest.skip(f"local sandbox unavailable here: {exc}")
    yield box
    box.close()


def test_session_keeps_state(sb: LocalSandbox) -> None:
    with sb.session() as s:
        assert isinstance(s, CodeSession)
        assert s.run_code("x = 40\ndef f(y):\n    return y + 2").ok
        r = s.run_code("print('value'); f(x)")
        assert r.ok and r.stdout == "value\n42\n"


def test_exception_gives_nonzero_exit_and_traceback(sb: LocalSandbox) -> None:
    with sb.session() as s:
        r = s.run_code("a = 1\n1 / 0")
        assert r.exit_code == 1 and "ZeroDivisionError" in r.stderr and "repl.py" not in r.stderr
        assert s.run_code("a").stdout == "1\n"  # an exception keeps the state


def test_session_resets_after_timeout(sb: LocalSandbox) -> None:
    with sb.session() as s:
        s.run_code("kept = 'yes'")
        r = s.run_code("while True:\n    pass", timeout=1)
        assert r.timed_out and r.exit_code is None and "state reset" in r.stderr
        r = s.run_code("kept")
        assert r.exit_code == 1 and "NameError" in r.stderr
        assert s.run_code("1 + 1").stdout == "2\n"


def test_hard_kill_backstop_when_interpreter_dies(sb: LocalSandbox) -> None:
    with sb.session() as s:
        s.run_code("v = 1")
        r = s.run_code("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        assert not r.ok and "state reset" in r.stderr
        assert s.run_code("v").exit_code == 1


def test_session_shares_the_workspace(sb: LocalSandbox) -> None:
    with sb.session() as s:
        assert s.run_code("open('from_session.txt', 'w').write('hello')").ok
        assert sb.exec("cat from_session.txt").stdout == "hello"
        sb.write_file("from_host.txt", "host")
        assert s.run_code("open('from_host.txt').read()").stdout == "'host'\n"


def test_session_output_capped_and_oom(sb: LocalSandbox) -> None:
    with sb.session() as s:
        r = s.run_code("print('x' * 100000)")
        assert r.output_truncated and len(r.stdout) == 4096
        r = s.run_code("b = bytearray(2 << 30)")
        assert r.oom and "MemoryError" in r.stderr


def test_session_reset_and_close(sb: LocalSandbox) -> None:
    s = sb.session()
    s.run_code("z = 1")
    s.reset()
    assert s.run_code("z").exit_code == 1
    s.close()
    with pytest.raises(SandboxError):
        s.run_code("1")

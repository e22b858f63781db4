"""The E2B backend against the real E2B service. Runs only when ``E2B_API_KEY`` is set (it costs sandbox time):

E2B_API_KEY=e2b_... python -m pytest tests/sandbox/test_e2b_live.py -m e2b_live -q
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest.importorskip("e2b")

from sandgym.sandbox.e2b import E2BSandbox  # noqa: E402
from sandgym.sandbox.protocol import Limits  # noqa: E402

pytestmark = [
    pytest.mark.e2b_live,
    pytest.mark.skipif(not os.environ.get("E2B_API_KEY"), reason="set E2B_API_KEY to run the live E2B tests"),
]


@pytest.fixture()
def real_e2b(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make sure no loopback-fake URL left in the environment redirects the SDK."""
    for name in ("E2B_API_URL", "E2B_SANDBOX_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def sb(real_e2b: None) -> Iterator[E2BSandbox]:
    with E2BSandbox(Limits(timeout_s=20, memory_mb=512), lifetime_s=300) as sandbox:
        yield sandbox


def test_live_exec_measures_and_maps_exit_codes(sb: E2BSandbox) -> None:
    ok = sb.exec("python3 -c 'x = bytearray(50 << 20); print(len(x))'")
    assert ok.ok and ok.stdout.strip() == str(50 << 20)
    assert ok.peak_rss_mb >= 50 and ok.cpu_s > 0 and ok.wall_s > 0
    bad = sb.exec(["bash", "-c", "echo no >&2; exit 3"])
    assert (bad.exit_code, bad.stderr, bad.status) == (3, "no\n", "error")
    assert sb.exec("cat", stdin="piped").stdout == "piped"


def test_live_timeout_kills_the_command(sb: E2BSandbox) -> None:
    r = sb.exec("sleep 30", timeout=1)
    assert r.timed_out and r.exit_code is None and r.wall_s < 10


def test_live_memory_hog_is_oom(sb: E2BSandbox) -> None:
    r = sb.run_python("x = bytearray(2 << 30)")
    assert r.oom and not r.ok


def test_live_output_flood_is_capped(real_e2b: None) -> None:
    with E2BSandbox(Limits(max_output_bytes=1000)) as small:
        r = small.exec("yes | head -c 5000000")
    assert r.output_truncated and len(r.stdout) == 1000


def test_live_files_and_grading(sb: E2BSandbox) -> None:
    sb.write_file("sol.py", "def f(x):\n    return x + 1\n")
    assert sb.read_file("sol.py").startswith("def f") and "sol.py" in sb.list_files()
    with pytest.raises(FileNotFoundError):
        sb.read_file("missing.py")
    if not sb.exec("python3 -c 'import pytest'").ok:
        pytest.skip("this template has no pytest; grading needs a template with it")
    sb.write_file("conftest.py", "import os\nos._exit(0)\n")  # must have no effect
    tests = {
        "test_sol.py": "from sol import f\n\ndef test_a():\n    assert f(1) == 2\n\ndef test_b():\n    assert f(1) == 3\n"
    }
    rep = sb.run_tests(tests, expected=2)
    assert rep.report_found and rep.passed == 1 and rep.reported == 2


def test_live_code_interpreter_session(real_e2b: None) -> None:
    with E2BSandbox(Limits(timeout_s=30), code_interpreter=True) as sb:
        s = sb.session()
        assert s.run_code("x = 41").ok
        assert s.run_code("x + 1").stdout.strip() == "42"
        err = s.run_code("1 / 0")
        assert err.exit_code == 1 and "ZeroDivisionError" in err.stderr
        slow = s.run_code("import time; time.sleep(30)", timeout=2)
        assert slow.timed_out
        assert s.run_code("'x' in globals()").stdout.strip() == "False"

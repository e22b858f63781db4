"""The conformance suite every sandbox backend runs against itself: what the ``Sandbox`` protocol promises.

    from sandgym.sandbox.conformance import run_conformance
    failures = run_conformance(lambda: make_sandbox("my-backend"))   # [] when the backend conforms

Each check gets a fresh sandbox from the factory and raises ``AssertionError`` with what was wrong. The built-in
backends run it in ``tests/sandbox/test_conformance.py``; a plugin backend (``register_backend``) should too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from sandgym.errors import SandboxError
from sandgym.sandbox.protocol import Sandbox

TESTS = {"test_hidden.py": "from solution import add\n\n"
         "def test_one():\n    assert add(1, 2) == 3\n\n"
         "def test_two():\n    assert add(-1, 1) == 0\n"}


def _exec(sb: Sandbox) -> None:
    r = sb.exec("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr.strip()) == (3, "out\n", "err"), r
    r = sb.exec(["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "c"])
    assert r.ok and r.stdout.strip() == "['a b', 'c']", r
    r = sb.exec("cat", stdin="piped\n")
    assert r.stdout == "piped\n", r


def _timeout(sb: Sandbox) -> None:
    r = sb.exec("sleep 30", timeout=1)
    assert r.timed_out and r.exit_code is None and not r.ok, r
    assert sb.exec("echo alive").stdout == "alive\n", "the sandbox must keep working after a timeout"


def _files(sb: Sandbox) -> None:
    sb.write_file("pkg/data.bin", b"\x00\xffabc")
    sb.write_file("pkg/text.txt", "h\u00e9llo")
    assert sb.read_bytes("pkg/data.bin") == b"\x00\xffabc"
    assert sb.read_file("pkg/text.txt") == "h\u00e9llo"
    assert {"pkg/data.bin", "pkg/text.txt"} <= set(sb.list_files()), sb.list_files()
    assert sb.exec("cat pkg/text.txt").stdout == "h\u00e9llo", "exec must see files written through the API"
    sb.exec("echo made > made.txt")
    assert sb.read_file("made.txt") == "made\n", "the API must see files written by exec"
    for bad in ("../escape.txt", "/etc/passwd"):
        try:
            sb.write_file(bad, "x")
        except ValueError:
            continue
        raise AssertionError(f"write_file({bad!r}) must raise ValueError")
    try:
        sb.read_file("missing.txt")
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("read_file of a missing file must raise FileNotFoundError")


def _python(sb: Sandbox) -> None:
    sb.write_file("helper.py", "VALUE = 41\n")
    r = sb.run_python("import helper\nx = helper.VALUE + 1\nprint(x)")
    assert r.ok and r.stdout.strip() == "42", r
    r = sb.run_python("print('x' in globals())")
    assert r.stdout.strip() == "False", "run_python must start from a fresh state every call"
    r = sb.run_python("raise ValueError('boom')")
    assert r.exit_code == 1 and "ValueError: boom" in r.stderr, r


def _tests(sb: Sandbox) -> None:
    sb.write_file("solution.py", "def add(a, b):\n    return a + b\n")
    rep = sb.run_tests(TESTS, expected=2)
    assert rep.report_found and rep.passed == 2 and rep.all_passed, rep
    assert all(o.name.startswith("test_hidden.py::") for o in rep.outcomes), rep.outcomes
    sb.write_file("solution.py", "def add(a, b):\n    return 3 if (a, b) == (1, 2) else 99\n")
    rep = sb.run_tests(TESTS, expected=2)
    assert rep.passed == 1 and not rep.all_passed, rep
    sb.write_file("solution.py", "import os\nos._exit(0)\n")
    rep = sb.run_tests(TESTS, expected=2)
    assert rep.passed == 0, "an exit code of 0 must never count as passed tests"
    assert "test_hidden.py" not in sb.list_files(), "hidden tests must never land in the workspace"


def _output_cap(sb: Sandbox) -> None:
    cap = sb.limits.max_output_bytes
    r = sb.exec(f"head -c {cap * 3} /dev/zero | tr '\\\\0' x")
    assert r.output_truncated and len(r.stdout) <= cap + 1024, (len(r.stdout), cap)


def _close(sb: Sandbox) -> None:
    sb.close()
    assert not getattr(sb, "alive", False), "alive must be False once closed"
    try:
        sb.exec("true")
    except SandboxError:
        return
    raise AssertionError("a call on a closed sandbox must raise SandboxError")


def _reset(sb: Sandbox) -> None:
    reset = getattr(sb, "reset", None)
    if reset is None:
        return  # optional: a backend without reset is never reused (SandboxPool, ToolEnv)
    sb.write_file("left.txt", "x")
    sb.exec("echo x > /tmp/left_tmp")
    reset()
    assert sb.list_files() == [], "reset must leave an empty workspace"
    assert "left_tmp" not in sb.exec("ls -A /tmp").stdout, "reset must wipe /tmp"


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[Sandbox], None]


CHECKS = tuple(Check(fn.__name__.strip("_"), fn) for fn in
               (_exec, _timeout, _files, _python, _tests, _output_cap, _reset, _close))


def run_conformance(factory: Callable[[], Sandbox], checks: tuple[Check, ...] = CHECKS) -> list[str]:
    """Run every check on a fresh sandbox from ``factory``; the failures as ``"name: why"`` (empty: conforms)."""
    failures = []
    for check in checks:
        sb = factory()
        try:
            check.run(sb)
        except AssertionError as exc:
            failures.append(f"{check.name}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a crash is a failure of that check, not of the suite
            failures.append(f"{check.name}: {type(exc).__name__}: {exc}")
        finally:
            with contextlib.suppress(Exception):
                sb.close()
    return failures

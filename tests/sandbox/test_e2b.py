"""E2B backend: unit tests with an injected fake SDK object, then contract tests that drive the REAL e2b SDK
against the loopback fake of E2B's HTTP API (tests/sandbox/fake_e2b.py). Offline, no key, no command runs on
the host except the one test of the measuring init script itself."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

e2b = pytest.importorskip("e2b")

from sandgym.errors import SandboxError  # noqa: E402
from sandgym.sandbox.e2b import WORKDIR, E2BSandbox, parse_junit  # noqa: E402
from sandgym.sandbox.e2b_init import INIT_PATH, INIT_SOURCE, split_report  # noqa: E402
from sandgym.sandbox.e2b_session import E2BCodeSession  # noqa: E402
from sandgym.sandbox.protocol import CodeSession, Limits, Sandbox  # noqa: E402
from tests.sandbox.fake_e2b import Call, CellReply, FakeE2B, Reply  # noqa: E402

JUNIT_OK = (
    b'<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3">'
    b'<testcase classname="test_sol" name="test_a"/>'
    b'<testcase classname="test_sol" name="test_b"><failure message="assert 2 == 3">trace</failure></testcase>'
    b'<testcase classname="test_sol" name="test_c"><skipped message="later"/></testcase>'
    b"</testsuite></testsuites>"
)


def nonce_of(cmd: str) -> str:
    """The report marker the adapter put on the init's command line."""
    match = re.search(r"init\.py \d+ ([0-9a-f]+) ", cmd)
    assert match, cmd
    return match.group(1)


def measured(
    cmd: str, *, wall: float = 0.2, cpu: float = 0.1, rss: float = 42.0, truncated: bool = False
) -> str:
    """The stderr tail the in-VM init writes for ``cmd``."""
    flag = "true" if truncated else "false"
    return (
        f'\n{nonce_of(cmd)}{{"wall_s": {wall}, "cpu_s": {cpu}, "peak_rss_mb": {rss}, "truncated": {flag}}}\n'
    )


# ---- unit tests: an injected fake SDK object, no HTTP ---------------------------------------------------------


@dataclass
class FakeSDK:
    """Quacks like ``e2b.Sandbox``: ``commands.run`` answers from ``script(cmd)``, files live in a dict."""

    script: Callable[[str], Any] = lambda cmd: SimpleNamespace(exit_code=0, stdout="", stderr="")
    files_store: dict[str, bytes] = field(default_factory=dict)
    cmds: list[str] = field(default_factory=list)
    kills: int = 0
    kill_error: Exception | None = None

    def __post_init__(self) -> None:
        self.commands = SimpleNamespace(run=self._run)
        self.files = SimpleNamespace(
            write=self._write,
            read=self._read,
            make_dir=lambda p: True,
            write_files=self._write_files,
            list=self._list,
        )

    def _run(self, cmd: str, envs: Any = None, timeout: float | None = None) -> Any:
        self.cmds.append(cmd)
        out = self.script(cmd)
        if isinstance(out, BaseException):
            raise out
        return out

    def _write(self, path: str, data: str | bytes) -> None:
        self.files_store[path] = data.encode() if isinstance(data, str) else data

    def _write_files(self, entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            self._write(entry["path"], entry["data"])

    def _read(self, path: str, format: str = "text") -> bytearray:  # noqa: A002 - the SDK's name
        if path not in self.files_store:
            raise e2b.FileNotFoundException(f"path '{path}' does not exist")
        return bytearray(self.files_store[path])

    def _list(self, path: str, depth: int = 1) -> list[Any]:
        if path != WORKDIR:
            raise e2b.FileNotFoundException(path)
        return [
            SimpleNamespace(path=p, type=SimpleNamespace(value="file"))
            for p in self.files_store
            if p.startswith(path)
        ]

    def kill(self) -> bool:
        self.kills += 1
        if self.kill_error:
            raise self.kill_error
        return True


def make(sdk: FakeSDK, limits: Limits | None = None, **kw: Any) -> E2BSandbox:
    return E2BSandbox(limits or Limits(timeout_s=5), factory=lambda **_: sdk, **kw)


def result(code: int = 0, stdout: str = "", stderr: str = "") -> Any:
    return SimpleNamespace(exit_code=code, stdout=stdout, stderr=stderr)


def test_satisfies_the_sandbox_protocol_and_uploads_the_init_once() -> None:
    sdk = FakeSDK()
    sb = make(sdk)
    assert isinstance(sb, Sandbox)
    assert sdk.files_store[INIT_PATH] == INIT_SOURCE.encode()
    assert sb.workdir == WORKDIR and not WORKDIR.startswith("/tmp")


def test_str_command_runs_under_bash_c_inside_timeout_and_init() -> None:
    sdk = FakeSDK(script=lambda cmd: result(0, "hi\n", measured(cmd)))
    r = make(sdk).exec("echo hi | cat", timeout=3)
    assert r.ok and r.stdout == "hi\n" and r.stderr == ""
    assert sdk.cmds[-1].startswith(f"python3 {INIT_PATH} ")
    assert sdk.cmds[-1].endswith("-- timeout -k 1 3 bash -c 'echo hi | cat'")


def test_argv_command_is_shell_quoted() -> None:
    sdk = FakeSDK()
    make(sdk).exec(["printf", "%s", "a b; rm -rf /"])
    assert sdk.cmds[-1].endswith("bash -c 'printf %s '\"'\"'a b; rm -rf /'\"'\"''")


def test_nonzero_exit_from_command_exit_exception_is_a_result_not_an_error() -> None:
    sdk = FakeSDK(
        script=lambda cmd: e2b.CommandExitException(stderr="boom\n", stdout="", exit_code=3, error=None)
    )
    r = make(sdk).exec("false")
    assert (r.exit_code, r.stderr, r.status) == (3, "boom\n", "error")


def test_measured_cpu_rss_and_wall_come_from_the_init_report() -> None:
    sdk = FakeSDK(script=lambda cmd: result(0, "", "warn\n" + measured(cmd, wall=0.5, cpu=0.25, rss=200.0)))
    r = make(sdk).exec("python3 big.py")
    assert (r.wall_s, r.cpu_s, r.peak_rss_mb, r.stderr) == (0.5, 0.25, 200.0, "warn\n")


def test_forged_report_with_the_wrong_nonce_is_ignored() -> None:
    forged = '\n0000{"wall_s": 9, "cpu_s": 9, "peak_rss_mb": 9, "truncated": false}\n'
    r = make(FakeSDK(script=lambda cmd: result(0, "", forged))).exec("x")
    assert r.cpu_s == 0.0 and "0000" in r.stderr


@pytest.mark.parametrize(
    ("code", "wall", "timed_out", "oom"),
    [(124, 5.01, True, False), (137, 6.0, True, False), (137, 0.7, False, True), (124, 0.1, False, False)],
)
def test_timeout_and_oom_are_decided_by_exit_code_and_elapsed_time(
    code: int, wall: float, timed_out: bool, oom: bool
) -> None:
    sdk = FakeSDK(
        script=lambda cmd: e2b.CommandExitException(
            stderr=measured(cmd, wall=wall), stdout="", exit_code=code, error=None
        )
    )
    r = make(sdk).exec("work", timeout=5)
    assert (r.timed_out, r.oom) == (timed_out, oom)
    assert r.exit_code == (None if timed_out else code)


def test_memory_error_in_stderr_is_reported_as_oom() -> None:
    sdk = FakeSDK(script=lambda cmd: result(1, "", "Traceback ...\nMemoryError\n" + measured(cmd)))
    assert make(sdk).exec("python3 hog.py").status == "oom"


def test_sdk_timeout_is_a_timeout_result_but_a_dead_sandbox_is_a_sandbox_error() -> None:
    sb = make(FakeSDK(script=lambda cmd: e2b.TimeoutException("Request timed out")))
    r = sb.exec("sleep 100", timeout=1)
    assert r.timed_out and r.exit_code is None and r.status == "timeout"
    for exc in (e2b.SandboxNotRunningException("gone"), e2b.SandboxUnreachableException("net down")):
        with pytest.raises(SandboxError, match="gone or unreachable"):
            make(FakeSDK(script=lambda cmd, exc=exc: exc)).exec("true")


@pytest.mark.parametrize(
    ("exc", "fix"),
    [
        (e2b.AuthenticationException("401: Unauthorized"), "E2B_API_KEY"),
        (e2b.RateLimitException("429"), "rate-limited"),
        (e2b.SandboxException("template not found"), "template name"),
        (ConnectionRefusedError("refused"), "cannot reach E2B"),
    ],
)
def test_create_failures_become_sandbox_errors_that_say_what_to_fix(exc: Exception, fix: str) -> None:
    def factory(**_: Any) -> Any:
        raise exc

    with pytest.raises(SandboxError, match=fix):
        E2BSandbox(factory=factory)


def test_create_passes_template_lifetime_key_and_no_internet() -> None:
    seen: dict[str, Any] = {}
    E2BSandbox(
        template="my-tpl", api_key="k", lifetime_s=120, factory=lambda **kw: seen.update(kw) or FakeSDK()
    )
    assert seen == {"template": "my-tpl", "timeout": 120, "allow_internet_access": False, "api_key": "k"}


def test_missing_api_key_with_the_real_sdk_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(SandboxError, match="set E2B_API_KEY"):
        E2BSandbox()


def test_output_is_capped_with_a_flag() -> None:
    sdk = FakeSDK(script=lambda cmd: result(0, "x" * 100, measured(cmd)))
    r = make(sdk, Limits(max_output_bytes=10)).exec("flood")
    assert r.stdout == "x" * 10 and r.output_truncated
    sdk2 = FakeSDK(script=lambda cmd: result(0, "x" * 10, measured(cmd, truncated=True)))
    assert make(sdk2, Limits(max_output_bytes=10)).exec("flood").output_truncated


def test_limits_reach_the_init_as_rlimits() -> None:
    sdk = FakeSDK()
    make(sdk, Limits(memory_mb=300, max_file_mb=7, max_procs=11, max_output_bytes=999)).exec("true")
    assert re.search(rf"init\.py 999 [0-9a-f]+ {WORKDIR} '' 300 7 11 -- ", sdk.cmds[-1])


def test_stdin_is_uploaded_outside_the_workspace_and_handed_to_the_init() -> None:
    sdk = FakeSDK()
    make(sdk).exec("cat", stdin="hello")
    path = next(p for p in sdk.files_store if "/stdin-" in p)
    assert sdk.files_store[path] == b"hello" and not path.startswith(WORKDIR)
    assert f" {path} " in sdk.cmds[-1]


def test_template_without_python3_falls_back_to_unmeasured_runs() -> None:
    def script(cmd: str) -> Any:
        if cmd.startswith("python3 "):
            return e2b.CommandExitException(
                stderr="bash: python3: command not found\n", stdout="", exit_code=127, error=None
            )
        return result(0, "ok\n")

    sdk = FakeSDK(script=script)
    r = make(sdk).exec("echo ok")
    assert r.ok and r.stdout == "ok\n" and r.cpu_s == 0.0
    assert sdk.cmds[-1].startswith(f"mkdir -p {WORKDIR} && cd {WORKDIR} && timeout -k 1 5 bash -c")


def test_run_python_runs_a_temp_file_outside_the_workspace() -> None:
    sdk = FakeSDK(script=lambda cmd: result(0, "2\n"))
    r = make(sdk).run_python("print(1 + 1)")
    path = next(p for p in sdk.files_store if p.endswith(".py") and "/run-" in p)
    assert sdk.files_store[path] == b"print(1 + 1)" and r.stdout == "2\n"
    assert "runpy.run_path" in sdk.cmds[-1] and f" {path}; " in sdk.cmds[-1]  # run as __main__, workspace first


@pytest.mark.parametrize("bad", ["../etc/passwd", "/etc/passwd", "a/../../b", "", "a\x00b"])
def test_file_api_refuses_paths_outside_the_workspace(bad: str) -> None:
    sdk = FakeSDK()
    sb = make(sdk)
    before = dict(sdk.files_store)
    for call in (lambda: sb.write_file(bad, "x"), lambda: sb.read_file(bad), lambda: sb.list_files(bad)):
        with pytest.raises(ValueError):
            call()
    assert sdk.files_store == before


def test_files_round_trip_and_missing_file_is_file_not_found() -> None:
    sdk = FakeSDK()
    sb = make(sdk)
    sb.write_file("pkg/sol.py", "def f(): return 1\n")
    sb.write_file("blob.bin", b"\xff\x00")
    assert sdk.files_store[f"{WORKDIR}/pkg/sol.py"] == b"def f(): return 1\n"
    assert sb.read_file("pkg/sol.py") == "def f(): return 1\n"
    assert sb.read_bytes("blob.bin") == b"\xff\x00" and sb.read_file("blob.bin") == "\ufffd\x00"
    assert sb.list_files(".") == ["blob.bin", "pkg/sol.py"]
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        sb.read_file("nope.txt")
    with pytest.raises(FileNotFoundError):
        sb.list_files("nodir")


def test_close_is_idempotent_swallows_errors_and_blocks_further_use() -> None:
    sdk = FakeSDK(kill_error=e2b.SandboxException("already gone"))
    with make(sdk) as sb:
        pass
    sb.close()
    assert sdk.kills == 1
    with pytest.raises(SandboxError, match="closed"):
        sb.exec("true")


def test_a_failed_setup_kills_the_half_made_sandbox() -> None:
    sdk = FakeSDK()
    sdk.files.write = lambda *a: (_ for _ in ()).throw(e2b.SandboxException("disk"))
    with pytest.raises(SandboxError, match="preparing"):
        make(sdk)
    assert sdk.kills == 1


def _grading_sdk(report: bytes | None, exit_code: int = 1) -> FakeSDK:
    sdk = FakeSDK()

    def script(cmd: str) -> Any:
        if "pytest" in cmd and report is not None:
            path = re.search(r"--junitxml=(\S+)", cmd).group(1)  # type: ignore[union-attr]
            sdk.files_store[path] = report
        if cmd.startswith("rm -rf "):
            grade = cmd.split()[-1].strip("'")
            for p in [p for p in sdk.files_store if p.startswith(grade)]:
                del sdk.files_store[p]
        return result(exit_code, "", measured(cmd) if "init.py" in cmd else "")

    sdk.script = script
    return sdk


def test_run_tests_parses_the_report_and_hides_the_tests_outside_the_workspace() -> None:
    sdk = _grading_sdk(JUNIT_OK)
    rep = make(sdk).run_tests({"test_sol.py": "def test_a(): ..."}, expected=3)
    assert (rep.expected, rep.passed, rep.reported, rep.report_found, rep.all_passed) == (
        3,
        1,
        3,
        True,
        False,
    )
    assert [o.outcome for o in rep.outcomes] == ["passed", "failed", "skipped"]
    assert rep.outcomes[1].name == "test_sol::test_b" and rep.outcomes[1].message == "assert 2 == 3"
    pytest_cmd = next(c for c in sdk.cmds if "pytest" in c)
    for flag in ("-p no:cacheprovider", "--noconftest", "-c /dev/null", "-uPYTEST_ADDOPTS"):
        assert flag in pytest_cmd
    assert not any(p.startswith("/tmp/.sandgym/grade-") for p in sdk.files_store), "hidden tests left behind"
    assert WORKDIR not in re.search(r"--junitxml=(\S+)", pytest_cmd).group(1)  # type: ignore[union-attr]


def test_run_tests_applies_the_tasks_own_pytest_ini_and_conftest() -> None:
    sdk = _grading_sdk(JUNIT_OK)
    make(sdk).run_tests({"pytest.ini": "[pytest]\n", "tests/conftest.py": "", "tests/test_sol.py": "..."}, expected=3)
    pytest_cmd = next(c for c in sdk.cmds if "pytest" in c)
    grade = re.search(r"--rootdir (\S+)", pytest_cmd).group(1)  # type: ignore[union-attr]
    assert f"-c {grade}/pytest.ini" in pytest_cmd and f"--confcutdir {grade}" in pytest_cmd
    assert "--noconftest" not in pytest_cmd


def test_exit_zero_without_a_report_scores_nothing() -> None:
    rep = make(_grading_sdk(None, exit_code=0)).run_tests({"test_sol.py": "..."}, expected=2)
    assert rep.exec is not None and rep.exec.exit_code == 0
    assert (rep.report_found, rep.passed, rep.fraction, rep.all_passed) == (False, 0, 0.0, False)


def test_short_or_garbage_report_is_not_a_pass() -> None:
    one = b'<testsuites><testsuite><testcase classname="t" name="a"/></testsuite></testsuites>'
    rep = make(_grading_sdk(one)).run_tests({"test_t.py": "..."}, expected=2)
    assert rep.report_found and rep.passed == 1 and rep.fraction == 0.5 and not rep.all_passed
    rep = make(_grading_sdk(b"PASSED 2/2")).run_tests({"test_t.py": "..."}, expected=2)
    assert not rep.report_found and rep.passed == 0


def test_hidden_test_names_cannot_escape_their_folder() -> None:
    with pytest.raises(ValueError):
        make(FakeSDK()).run_tests({"../test_x.py": "..."}, expected=1)


def test_parse_junit_counts_errors_and_rejects_non_reports() -> None:
    xml = b'<testsuite><testcase classname="" name="test_x.py"><error message="collection failure"/></testcase></testsuite>'
    assert [(o.name, o.outcome) for o in parse_junit(xml) or []] == [("test_x.py", "error")]
    assert parse_junit(b"<html/>") is None and parse_junit(b"not xml") is None


@dataclass
class FakeInterpreter:
    """Quacks like ``e2b_code_interpreter.Sandbox`` for the session."""

    replies: list[Any]
    restarts: int = 0

    def create_code_context(self, cwd: str | None = None, language: str | None = None) -> str:
        return "ctx1"

    def restart_code_context(self, context: str) -> None:
        self.restarts += 1

    def remove_code_context(self, context: str) -> None:
        pass

    def run_code(self, code: str, context: Any = None, timeout: float | None = None) -> Any:
        out = self.replies.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out


def execution(stdout: str = "", error: Any = None, results: tuple[Any, ...] = ()) -> Any:
    return SimpleNamespace(
        logs=SimpleNamespace(stdout=[stdout] if stdout else [], stderr=[]), error=error, results=list(results)
    )


def test_code_session_maps_errors_results_and_timeouts() -> None:
    err = SimpleNamespace(name="ValueError", value="boom", traceback="Traceback...\nValueError: boom")
    fake = FakeInterpreter(
        [
            execution("a\n", results=(SimpleNamespace(text="2", is_main_result=True),)),
            execution(error=err),
            e2b.TimeoutException("Execution timed out"),
        ]
    )
    s = E2BCodeSession(fake, Limits(timeout_s=2))
    assert isinstance(s, CodeSession)
    assert s.run_code("print('a'); 1 + 1").stdout == "a\n2\n"
    bad = s.run_code("raise ValueError('boom')")
    assert bad.exit_code == 1 and "ValueError: boom" in bad.stderr
    slow = s.run_code("while True: pass")
    assert slow.timed_out and "state reset" in slow.stderr and fake.restarts == 1
    s.close()
    with pytest.raises(SandboxError):
        s.run_code("1")


def test_session_needs_the_code_interpreter() -> None:
    with pytest.raises(ValueError, match="code_interpreter=True"):
        make(FakeSDK()).session()


@pytest.mark.skipif(
    not shutil.which("timeout") or sys.platform != "linux", reason="needs GNU timeout on Linux"
)
def test_init_script_measures_caps_and_keeps_the_exit_code(tmp_path: Any) -> None:
    """The init is our trusted code that runs inside the VM; check it here on fixed, harmless commands."""
    init = tmp_path / "init.py"
    init.write_text(INIT_SOURCE)
    (tmp_path / "in.txt").write_text("from-stdin")
    work = tmp_path / "w"
    cmd = "cat; python3 -c 'x = bytearray(60 << 20)'; head -c 5000 /dev/zero | tr '\\0' y; exit 3"
    argv = [
        sys.executable,
        str(init),
        "100",
        "N0NCE",
        str(work),
        str(tmp_path / "in.txt"),
        "1024",
        "64",
        "100000",
    ]
    proc = subprocess.run(
        [*argv, "--", "timeout", "-k", "1", "5", "bash", "-c", cmd], capture_output=True, timeout=30
    )
    stderr, report = split_report(proc.stderr.decode(), "N0NCE")
    assert proc.returncode == 3 and proc.stdout.startswith(b"from-stdin") and len(proc.stdout) == 100
    assert report is not None and report.truncated and report.peak_rss_mb >= 60 and report.cpu_s > 0
    assert work.is_dir() and not (tmp_path / "in.txt").exists()


# ---- contract tests: the real SDK against the loopback fake (the ``fake`` fixture, tests/sandbox/conftest.py) -----


def test_real_sdk_create_exec_and_kill_on_exit(fake: FakeE2B) -> None:
    fake.on_command(
        r"bash -c 'echo hi'", lambda call: Reply(stdout="hi\n", stderr=measured(call.cmd, cpu=0.01))
    )
    with E2BSandbox(Limits(timeout_s=5), lifetime_s=90) as sb:
        r = sb.exec("echo hi")
        assert r.ok and r.stdout == "hi\n" and r.stderr == "" and r.cpu_s == 0.01
        sid = sb.sandbox_id
    body = fake.only.create_body
    assert (
        body["timeout"] == 90 and body["templateID"] == "base" and body.get("allow_internet_access") is False
    )
    assert fake.kills == [sid] and not fake.only.alive
    assert fake.only.files[INIT_PATH] == INIT_SOURCE.encode()


def test_real_sdk_nonzero_exit_and_in_vm_timeout(fake: FakeE2B) -> None:
    fake.on_command(r"bash -c false", lambda call: Reply(stderr="no\n" + measured(call.cmd), exit_code=2))
    fake.on_command(
        r"bash -c 'sleep 9'", lambda call: Reply(stderr=measured(call.cmd, wall=1.0), exit_code=124)
    )
    with E2BSandbox(Limits(timeout_s=1)) as sb:
        r = sb.exec("false")
        assert (r.exit_code, r.stderr, r.timed_out) == (2, "no\n", False)
        t = sb.exec("sleep 9")
        assert t.timed_out and t.exit_code is None


def test_real_sdk_stream_timeout_from_a_slow_sandbox(fake: FakeE2B, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E2BSandbox, "rpc_grace_s", 0.3)
    fake.on_command(r"hang", Reply(delay_s=3))
    with E2BSandbox() as sb:
        r = sb.exec("hang", timeout=0.3)
    assert r.timed_out and r.exit_code is None and r.wall_s < 2.5


def test_real_sdk_files_round_trip_listing_and_missing_file(fake: FakeE2B) -> None:
    with E2BSandbox() as sb:
        sb.write_file("src/sol.py", "x = 1\n")
        sb.write_file("data.bin", b"\x00\x01")
        assert fake.only.files[f"{WORKDIR}/src/sol.py"] == b"x = 1\n"
        assert sb.read_file("src/sol.py") == "x = 1\n" and sb.read_bytes("data.bin") == b"\x00\x01"
        assert sb.list_files() == ["data.bin", "src/sol.py"] and sb.list_files("src") == ["src/sol.py"]
        with pytest.raises(FileNotFoundError):
            sb.read_file("missing.py")
        with pytest.raises(FileNotFoundError):
            sb.list_files("nowhere")


def test_real_sdk_bad_key_is_a_sandbox_error_naming_the_fix(
    fake: FakeE2B, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("E2B_API_KEY", "e2b_wrong")
    with pytest.raises(SandboxError, match="E2B_API_KEY"):
        E2BSandbox()
    assert not fake.sandboxes


def test_real_sdk_rate_limit_is_a_sandbox_error(fake: FakeE2B) -> None:
    fake.create_status = 429
    with pytest.raises(SandboxError, match="rate-limited"):
        E2BSandbox()


def test_real_sdk_sandbox_killed_underneath_is_a_sandbox_error(fake: FakeE2B) -> None:
    with E2BSandbox() as sb:
        fake.only.alive = False  # E2B ended it (lifetime over)
        with pytest.raises(SandboxError, match="gone or unreachable"):
            sb.exec("true")


def test_real_sdk_run_tests_reads_the_report_pytest_wrote(fake: FakeE2B) -> None:
    def pytest_writes_report(call: Call) -> Reply:
        sbx = fake.sandboxes[call.sandbox_id]
        report = re.search(r"--junitxml=(\S+)", call.cmd).group(1)  # type: ignore[union-attr]
        tests_dir = report.rsplit("/", 1)[0] + "/tests/test_sol.py"
        # the hidden test is in place while pytest runs
        assert sbx.files[tests_dir] == b"def test_a(): pass\n"
        sbx.files[report] = JUNIT_OK
        return Reply(stdout="1 failed, 1 passed, 1 skipped\n", exit_code=1, stderr=measured(call.cmd))

    fake.on_command(r"-m pytest", pytest_writes_report)
    with E2BSandbox() as sb:
        rep = sb.run_tests({"test_sol.py": "def test_a(): pass\n"}, expected=3)
    assert rep.report_found and rep.passed == 1 and rep.reported == 3
    assert not [p for p in fake.only.files if "/grade-" in p], "hidden tests must not outlive grading"


def test_real_sdk_os_exit_zero_without_report_fails_grading(fake: FakeE2B) -> None:
    fake.on_command(r"-m pytest", Reply(exit_code=0))
    with E2BSandbox() as sb:
        rep = sb.run_tests({"test_sol.py": "..."}, expected=1)
    assert not rep.report_found and rep.passed == 0 and not rep.all_passed


def test_real_sdk_code_interpreter_session(fake: FakeE2B) -> None:
    fake.on_cell(r"^x = 41$", CellReply())
    fake.on_cell(r"^x \+ 1$", CellReply(result_text="42"))
    fake.on_cell(
        r"1 / 0", CellReply(error=("ZeroDivisionError", "division by zero", "Traceback\nZeroDivisionError"))
    )
    fake.on_cell(r"spin", CellReply(delay_s=3))
    with E2BSandbox(Limits(timeout_s=5), code_interpreter=True) as sb:
        s = sb.session()
        assert s.run_code("x = 41").ok and s.run_code("x + 1").stdout == "42\n"
        err = s.run_code("1 / 0")
        assert err.exit_code == 1 and "ZeroDivisionError" in err.stderr
        slow = s.run_code("spin", timeout=0.3)
        assert slow.timed_out and slow.wall_s < 2.5
        assert list(fake.only.contexts.values()) == [1], "the kernel must be restarted after a timeout"
    assert fake.only.template == "code-interpreter-v1"


def test_real_sdk_env_reaches_the_command_and_stdin_is_uploaded(fake: FakeE2B) -> None:
    fake.on_command(r"printenv", lambda call: Reply(stdout=call.envs.get("GREETING", "") + "\n"))
    with E2BSandbox() as sb:
        assert sb.exec("printenv GREETING", env={"GREETING": "hola"}).stdout == "hola\n"
        sb.exec("printenv", stdin=b"data")
    assert [v for k, v in fake.only.files.items() if "/stdin-" in k] == [b"data"]


def test_long_timeouts_are_written_without_exponents() -> None:
    sdk = FakeSDK()
    make(sdk).exec("true", timeout=1_000_000)
    assert "timeout -k 1 1000000 bash" in sdk.cmds[-1]


# ---- task environments (Task.requirements) in E2B -----------------------------------------------------------------


def test_requirements_are_installed_once_per_cache_key_before_any_agent_code() -> None:
    sdk = FakeSDK(script=lambda cmd: result())
    make(sdk, requirements=("sgdemo_lib==1.0", "freezegun"))
    install = [c for c in sdk.cmds if "pip install" in c]
    assert len(install) == 1 and sdk.cmds[0] == install[0]  # the first command the VM runs
    assert "--user" in install[0] and "freezegun sgdemo_lib==1.0" in install[0]  # sorted: one key per set
    cmd = E2BSandbox.install_command(["freezegun", "sgdemo_lib==1.0"])
    assert cmd == E2BSandbox.install_command(["sgdemo_lib==1.0", "freezegun"])  # order does not change the key
    assert cmd != E2BSandbox.install_command(["sgdemo_lib==2.0", "freezegun"])
    assert cmd.startswith('test -f "$HOME/.sandgym/envs/') and cmd in install[0]  # a template's build skips it


def test_a_template_built_with_the_install_command_skips_the_install(tmp_path) -> None:
    """The command itself, run twice by bash with a stand-in pip: installs once, then only checks the marker."""
    calls = tmp_path / "pip_calls"
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python3").write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n")
    (fake_bin / "python3").chmod(0o755)
    env = {"HOME": str(tmp_path / "home"), "PATH": f"{fake_bin}:/usr/bin:/bin"}
    cmd = E2BSandbox.install_command(["sgdemo_lib==1.0"])
    for _ in range(2):
        assert subprocess.run(["bash", "-c", cmd], env=env, timeout=30).returncode == 0
    assert calls.read_text().count("pip install") == 1


def test_a_failed_install_is_a_sandbox_error_naming_the_fix_and_the_vm_is_killed() -> None:
    sdk = FakeSDK(script=lambda cmd: result(1, stderr="ERROR: No matching distribution found for nope==9")
                  if "pip install" in cmd else result())
    with pytest.raises(SandboxError, match=r"(?s)nope==9.*install_command.*allow_internet=True"):
        make(sdk, requirements=("nope==9",))
    assert sdk.kills == 1


def test_real_sdk_installs_requirements_in_a_new_sandbox(fake: FakeE2B) -> None:
    fake.on_command(r"pip install", lambda call: Reply(stderr=measured(call.cmd)))
    with E2BSandbox(Limits(timeout_s=5), requirements=("sgdemo_lib==1.0",)):
        pass
    cmds = [c.cmd for c in fake.only.calls]
    assert any("pip install" in c and "sgdemo_lib==1.0" in c for c in cmds), cmds

"""Functional tests of LocalSandbox: exec, the warm path, files, grading, isolation between sandboxes."""

from __future__ import annotations

import os
import stat
import sys
import threading
import time

import pytest

from sandgym.errors import SandboxError
from sandgym.sandbox import ExecResult, Limits, LocalSandbox, Sandbox

LIMITS = Limits(timeout_s=10, memory_mb=512, max_procs=32, max_file_mb=8, max_output_bytes=64 << 10)
TESTS = {"test_hidden.py": "from solution import add\n\ndef test_one():\n    assert add(1, 2) == 3\n\n"
         "def test_two():\n    assert add(-1, 1) == 0\n\ndef test_three():\n    assert add(2, 2) == 4\n"}


def _start(**kw: object) -> LocalSandbox:
    try:
        box = LocalSandbox(LIMITS, **kw)  # type: ignore[arg-type]
        box.wait_ready()
        return box
    except SandboxError as exc:
        if os.environ.get("SANDGYM_REQUIRE_SANDBOX"):
            raise
        pytest.skip(f"local sandbox unavailable here: {exc}")


@pytest.fixture(scope="module")
def sb() -> LocalSandbox:
    box = _start()
    yield box
    box.close()


def test_is_a_sandbox(sb: LocalSandbox) -> None:
    assert isinstance(sb, Sandbox)
    assert sb.workdir == "/workspace"


def test_exec_shell_string_and_argv(sb: LocalSandbox) -> None:
    sb.write_file("sol.py", "def f(x):\n    return x + 1\n")
    r = sb.exec("python3 -c 'import sol; print(sol.f(1))' && echo done >&2")
    assert isinstance(r, ExecResult)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "2\n", "done\n")
    assert r.wall_s > 0 and r.cpu_s > 0 and r.peak_rss_mb > 0
    r = sb.exec(["python3", "-c", "import sys; sys.exit(3)"])
    assert r.exit_code == 3 and r.status == "error"


def test_exec_env_and_stdin(sb: LocalSandbox) -> None:
    r = sb.exec("echo $GREETING; cat", env={"GREETING": "hi"}, stdin="from stdin")
    assert r.stdout == "hi\nfrom stdin"


def test_exec_runs_as_unprivileged_uid_without_caps(sb: LocalSandbox) -> None:
    r = sb.exec("id -u; grep CapEff /proc/self/status")
    uid, caps = r.stdout.split("\n", 1)
    if os.geteuid() == 0:
        assert int(uid) == sb.uid and int(uid) >= 200000
    assert caps.split()[-1] == "0000000000000000"


def test_signal_death_is_128_plus_signal(sb: LocalSandbox) -> None:
    r = sb.exec(["python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert r.exit_code == 139


def test_missing_command_is_127_not_an_exception(sb: LocalSandbox) -> None:
    assert sb.exec(["no-such-binary-xyz"]).exit_code == 127


def test_agent_can_run_pytest_on_visible_tests(sb: LocalSandbox) -> None:
    sb.write_file("test_visible.py", "def test_a():\n    assert 1\n\ndef test_b():\n    assert 0\n")
    r = sb.exec("python3 -m pytest -q -p no:cacheprovider test_visible.py")
    assert r.exit_code == 1 and "1 failed, 1 passed" in r.stdout
    sb.exec(["rm", "test_visible.py"])


def test_run_python_speed_path_works(sb: LocalSandbox) -> None:
    sb.write_file("mod.py", "VALUE = 41\n")
    r = sb.run_python("import mod\nprint(mod.VALUE + 1)")
    assert r.ok and r.stdout == "42\n"
    r = sb.run_python("raise ValueError('boom')")
    assert r.exit_code == 1 and "ValueError: boom" in r.stderr and "worker.py" not in r.stderr
    assert sb.run_python("import sys; sys.exit(5)").exit_code == 5


def test_run_python_state_is_fresh_each_call(sb: LocalSandbox) -> None:
    sb.run_python("import json; json.GLOBAL_HACK = 1; x = 5")
    r = sb.run_python("import json\nprint(hasattr(json, 'GLOBAL_HACK'), 'x' in globals())")
    assert r.stdout == "False False\n"


def test_timeout_reports_timed_out(sb: LocalSandbox) -> None:
    r = sb.run_python("while True:\n    pass", timeout=1)
    assert r.timed_out and r.exit_code is None and r.status == "timeout"
    assert sb.run_python("print('alive')").stdout == "alive\n"


def test_background_process_does_not_outlive_the_call(sb: LocalSandbox) -> None:
    r = sb.exec("(sleep 30; echo late > late.txt) & echo started")
    assert r.stdout == "started\n"
    assert "late.txt" not in sb.list_files()
    assert "sleep" not in sb.exec("ps -eo comm").stdout


def test_agent_cannot_kill_or_trace_the_worker(sb: LocalSandbox) -> None:
    """The worker is pid 1 of the sandbox (bwrap --as-pid-1): signals from inside cannot kill it, and it is
    non-dumpable, so nothing in the sandbox can ptrace it or open its pipes through /proc."""
    restarts = sb.restarts
    r = sb.exec("kill -9 -1; kill -9 1; kill -9 $PPID; echo pid=$PPID; cat /proc/1/status | grep -i ^uid; "
                "ls -l /proc/1/fd/ 2>&1 | head -3", timeout=10)
    assert r.exit_code == 0 and "pid=1" in r.stdout, r
    assert "Permission denied" in r.stdout or "cannot" in r.stdout.lower() or "cannot" in r.stderr.lower(), r
    code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.ptrace(16, 1, 0, 0), ctypes.get_errno())")  # PTRACE_ATTACH pid 1
    out = sb.run_python(code).stdout.split()
    assert out[0] == "-1" and int(out[1]) in (1, 13), out  # EPERM / EACCES
    assert sb.run_python("print('back')").stdout == "back\n"
    assert sb.restarts == restarts


def test_worker_killed_from_outside_is_reported_and_restarted(sb: LocalSandbox) -> None:
    import signal
    import threading

    restarts = sb.restarts
    sb.wait_ready()
    assert sb._worker is not None
    pid = sb._worker.proc.pid
    threading.Timer(1.0, lambda: os.killpg(pid, signal.SIGKILL)).start()
    r = sb.exec("sleep 5", timeout=10)
    assert r.exit_code == 137 and not r.timed_out and "worker was killed" in r.stderr
    assert sb.run_python("print('back')").stdout == "back\n"
    assert sb.restarts == restarts + 1


def test_file_api_roundtrip(sb: LocalSandbox) -> None:
    sb.write_file("pkg/data.bin", b"\x00\xffabc")
    assert sb.read_bytes("pkg/data.bin") == b"\x00\xffabc"
    sb.write_file("pkg/text.txt", "héllo")
    assert sb.read_file("pkg/text.txt") == "héllo"
    assert {"pkg/data.bin", "pkg/text.txt"} <= set(sb.list_files())
    assert sb.list_files("pkg") == ["pkg/data.bin", "pkg/text.txt"]
    assert sb.exec("cat pkg/text.txt && echo more >> pkg/text.txt").exit_code == 0
    with pytest.raises(FileNotFoundError):
        sb.read_file("nope.txt")


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/../../x", ""])
def test_file_api_refuses_escaping_paths(sb: LocalSandbox, bad: str) -> None:
    with pytest.raises(ValueError):
        sb.write_file(bad, "x")
    with pytest.raises(ValueError):
        sb.read_file(bad)


def test_fifo_in_workspace_does_not_hang_the_host(sb: LocalSandbox) -> None:
    sb.exec("mkfifo pipe")
    with pytest.raises(ValueError):
        sb.read_file("pipe")
    with pytest.raises(ValueError):
        sb.write_file("pipe", "x")


def test_state_isolation_between_sandboxes(sb: LocalSandbox) -> None:
    sb.write_file("mine.txt", "private")
    other = _start()
    try:
        assert other.uid != sb.uid
        assert other.list_files() == []
        r = other.exec("cat mine.txt; ls /workspace")
        assert "private" not in r.stdout
    finally:
        other.close()
    assert not os.path.exists(other.host_workdir)


def test_uid_slots_are_exclusive_across_threads_and_processes() -> None:
    import subprocess
    import threading

    from sandgym.sandbox.bwrap_host import acquire_slot

    leases = []
    threads = [threading.Thread(target=lambda: leases.append(acquire_slot())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        slots = [lease.slot for lease in leases]
        assert len(set(slots)) == 4
        code = ("import sys\nfrom sandgym.errors import SandboxError\nfrom sandgym.sandbox.bwrap_host import acquire_slot\n"
                f"try:\n    acquire_slot({slots[0]})\nexcept SandboxError:\n    print('taken')\n"
                "print(acquire_slot().slot)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
        assert out[0] == "taken" and int(out[1]) not in slots
    finally:
        for lease in leases:
            lease.release()


def test_workspace_is_private_on_the_host(sb: LocalSandbox) -> None:
    mode = stat.S_IMODE(os.stat(sb.host_workdir).st_mode)
    assert mode & 0o077 == 0


def test_run_tests_counts_from_the_report(sb: LocalSandbox) -> None:
    sb.write_file("solution.py", "def add(a, b):\n    return a + b if a != 2 else 0\n")
    rep = sb.run_tests(TESTS, expected=3)
    assert rep.report_found and rep.reported == 3 and rep.passed == 2
    assert rep.fraction == pytest.approx(2 / 3) and not rep.all_passed
    failed = [o for o in rep.outcomes if o.outcome == "failed"]
    assert [o.name for o in failed] == ["test_hidden.py::test_three"] and "assert" in failed[0].message
    sb.write_file("solution.py", "def add(a, b):\n    return a + b\n")
    assert sb.run_tests(TESTS, expected=3).all_passed


def test_hidden_tests_can_use_common_fixtures(sb: LocalSandbox) -> None:
    tests = {"test_fixtures.py": (
        "import pytest\n\n"
        "def test_tmp(tmp_path, tmpdir):\n    (tmp_path / 'f').write_text('x')\n    assert tmpdir.check()\n\n"
        "def test_capsys(capsys):\n    print('hi')\n    assert capsys.readouterr().out == 'hi\\n'\n\n"
        "def test_monkeypatch(monkeypatch):\n    monkeypatch.setenv('A', '1')\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_param(n):\n    assert n\n\n"
        "@pytest.mark.skip(reason='no')\ndef test_skipped():\n    pass\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('setup')\n\n"
        "def test_setup_error(broken):\n    pass\n")}
    rep = sb.run_tests(tests, expected=7)
    kinds = {o.name.split("::")[1]: o.outcome for o in rep.outcomes}
    assert kinds == {"test_tmp": "passed", "test_capsys": "passed", "test_monkeypatch": "passed",
                     "test_param[1]": "passed", "test_param[2]": "passed", "test_skipped": "skipped",
                     "test_setup_error": "error"}
    assert rep.passed == 5 and not rep.all_passed


def test_os_exit_hack_earns_nothing(sb: LocalSandbox) -> None:
    sb.write_file("solution.py", "import os\nos._exit(0)\n")
    rep = sb.run_tests(TESTS, expected=3)
    assert rep.passed == 0 and not rep.all_passed and rep.fraction == 0.0
    assert "exited" in rep.outcomes[0].message  # the grader outlives the solution's process and says why


def test_blind_write_of_a_fake_report_is_rejected(sb: LocalSandbox) -> None:
    fake = ('{"done": true, "exitstatus": 0, "outcomes": [{"name": "test_hidden.py::test_%s", "outcome": "passed"}'
            ', {"name": "test_hidden.py::test_x%s", "outcome": "passed"}]}')
    lines = "\\n".join(fake % (n, n) for n in ("one", "two", "three"))
    sb.write_file("solution.py", f"import os\nos.write(3, b'{lines}\\n')\nos._exit(0)\n")
    rep = sb.run_tests(TESTS, expected=3)
    assert rep.passed == 0 and not any("test_x" in o.name for o in rep.outcomes)


def test_planted_conftest_and_sitecustomize_are_ignored(sb: LocalSandbox) -> None:
    hack = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
    sb.write_file("conftest.py", hack)
    sb.write_file("sitecustomize.py", "import builtins\nbuiltins.add = lambda a, b: a + b\n")
    sb.write_file("usercustomize.py", "raise SystemExit(0)\n")
    sb.write_file("evil_plugin.py", hack)
    sb.write_file("evil-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    sb.write_file("evil-1.0.dist-info/entry_points.txt", "[pytest11]\nevil = evil_plugin\n")
    sb.write_file("pytest.ini", "[pytest]\naddopts = -p no:python\n")
    sb.write_file("solution.py", "def add(a, b):\n    return 99\n")
    rep = sb.run_tests(TESTS, expected=3)
    assert rep.report_found and rep.reported == 3 and rep.passed == 0
    sb.exec("rm -rf conftest.py sitecustomize.py usercustomize.py pytest.ini evil_plugin.py evil-1.0.dist-info")


def test_hidden_tests_invisible_and_read_only(sb: LocalSandbox) -> None:
    """The solution runs in a sandbox without the grader's directory: even while it is graded it sees no hidden
    test, in /.grader or anywhere else."""
    sb.write_file("solution.py", "import glob, os\nopen('/workspace/seen.txt', 'w').write(repr(\n"
                  "    [os.path.exists('/.grader'), glob.glob('/*/test_hidden*') + glob.glob('/*/*/test_hidden*') + glob.glob('/.*/test_hidden*')]))\n"
                  "def add(a, b):\n    return a + b\n")
    assert sb.run_tests(TESTS, expected=3).passed == 3
    assert sb.read_file("seen.txt") == "[False, []]"
    assert sb.exec("ls -A /.grader").stdout in ("", "links\n")  # removed again after grading (the links folder
    assert sb.exec("ls -A /.grader/links 2>/dev/null").stdout == ""  # of the solution's zygote stays, empty)
    r = sb.exec("echo 'def test_x(): pass' > /.grader/test_planted.py")
    assert r.exit_code != 0


def test_run_tests_rejects_bad_names(sb: LocalSandbox) -> None:
    with pytest.raises(ValueError):
        sb.run_tests({"../test_x.py": ""}, expected=1)


def test_cold_path_matches_warm_path() -> None:
    cold = _start(warm=False)
    try:
        cold.write_file("solution.py", "def add(a, b):\n    return a + b\n")
        assert cold.exec("echo cold").stdout == "cold\n"
        assert cold.run_python("print(6 * 7)").stdout == "42\n"
        rep = cold.run_tests(TESTS, expected=3)
        assert rep.report_found and rep.passed == 3
    finally:
        cold.close()


def _fake_bwrap(tmp_path: object, message: str) -> str:
    path = os.path.join(str(tmp_path), "bwrap")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    os.chmod(path, 0o755)
    os.chmod(str(tmp_path), 0o755)
    return path


def test_probe_failure_gives_clear_sandbox_error(tmp_path: object) -> None:
    msg = "bwrap: No permissions to creating new namespace, likely because the kernel does not allow it"
    with pytest.raises(SandboxError, match="seccomp=unconfined") as info:
        LocalSandbox(LIMITS, bwrap=_fake_bwrap(tmp_path, msg))
    assert "No permissions to creating new namespace" in str(info.value) and "e2b" in str(info.value).lower()


def test_weak_isolation_only_by_opt_in_and_loud(tmp_path: object, caplog: pytest.LogCaptureFixture) -> None:
    bwrap = _fake_bwrap(tmp_path, "bwrap: unshare failed: Operation not permitted")
    with caplog.at_level("WARNING"), LocalSandbox(LIMITS, bwrap=bwrap, allow_weak_isolation=True) as weak:
        assert weak.weak
        r = weak.exec("echo weak; id -u")
        assert r.stdout.startswith("weak\n")
        assert weak.run_python("print(2)").stdout == "2\n"
    assert any("WEAK ISOLATION" in rec.getMessage() for rec in caplog.records)


def test_weak_worker_never_snapshots_or_wipes_the_host(tmp_path: object) -> None:
    """Under weak isolation "/" is the host's file system. The worker once snapshotted all of it at start (302 MB
    here, past the sandbox's memory cgroup on a machine with many files: the worker was OOM-killed before its ready
    line) and an in-place reset would have wiped host files the slot uid can delete. Now: no snapshot, and every
    reset is from scratch."""
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("the weak backend drops to a slot uid only as root")
    bwrap = _fake_bwrap(tmp_path, "bwrap: unshare failed: Operation not permitted")
    shared = tempfile.mkdtemp(prefix="sandgym-weak-host-")  # a world-writable host folder the slot uid can reach
    os.chmod(shared, 0o777)
    try:
        with LocalSandbox(LIMITS, bwrap=bwrap, allow_weak_isolation=True) as weak:
            weak.wait_ready()
            assert weak._worker is not None
            with open(f"/proc/{weak._worker.proc.pid}/status") as f:
                hwm_kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM"))
            assert hwm_kb < 150 << 10, f"the weak worker peaked at {hwm_kb >> 10} MB: it walks the host file system"
            with open(os.path.join(shared, "host.txt"), "w") as f:
                f.write("the host's\n")
            assert weak.exec("echo x > x.txt").exit_code == 0
            weak.reset()
            assert weak.in_place_resets == 0
            assert os.path.exists(os.path.join(shared, "host.txt"))
            assert weak.list_files() == [] and weak.exec("echo back").stdout == "back\n"
    finally:
        import shutil

        shutil.rmtree(shared, ignore_errors=True)


def test_unusable_python_gives_clear_sandbox_error(sb: LocalSandbox) -> None:
    for warm in (True, False):
        box = LocalSandbox(LIMITS, python="/nonexistent/bin/python3", warm=warm)  # bwrap works (sb started)
        try:
            with pytest.raises(SandboxError, match="python=.*unprivileged uid"):
                box.exec("true")
        finally:
            box.close()


def test_closed_sandbox_raises_sandbox_error() -> None:
    box = _start()
    box.close()
    box.close()  # idempotent
    with pytest.raises(SandboxError):
        box.exec("true")


def test_make_sandbox_factory() -> None:
    from sandgym.sandbox import make_sandbox
    from sandgym.sandbox.factory import resolve_backend

    with pytest.raises(SandboxError, match="Did you mean 'local'"):
        make_sandbox("locl")
    env_key = os.environ.pop("E2B_API_KEY", None)
    try:
        assert resolve_backend("auto") == "local"
    finally:
        if env_key is not None:
            os.environ["E2B_API_KEY"] = env_key
    try:
        box = make_sandbox("local", LIMITS)
    except SandboxError as exc:
        pytest.skip(str(exc))
    with box:
        assert isinstance(box, LocalSandbox) and box.exec("echo hi").stdout == "hi\n"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_a_sandbox_outlives_the_thread_that_started_it() -> None:
    """bwrap's --die-with-parent follows the starting *thread*: sandboxes are started from one long-lived thread,
    so one made in a pool's pre-warm thread or a rollout executor's worker keeps its worker when that thread ends."""
    made: list[LocalSandbox] = []

    def start() -> None:
        box = LocalSandbox()
        box.wait_ready()
        made.append(box)

    t = threading.Thread(target=start)
    t.start()
    t.join()
    box = made[0]
    try:
        time.sleep(0.2)  # time for a parent-death signal to land, if one were sent
        assert box.run_python("print(1)").stdout == "1\n"
        assert box.restarts == 0
    finally:
        box.close()

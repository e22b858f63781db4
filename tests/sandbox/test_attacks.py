"""Each attack from the threat model, run against LocalSandbox and asserted contained (bounded, shared-machine safe)."""

from __future__ import annotations

import os

import pytest

from sandgym.errors import SandboxError
from sandgym.sandbox import Limits, LocalSandbox, probes

LIMITS = Limits(timeout_s=10, memory_mb=256, max_procs=32, max_file_mb=8, max_output_bytes=64 << 10)


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


def _assert_contained(result: tuple[bool, str]) -> None:
    contained, detail = result
    assert contained, detail


def test_network_loopback_blocked(sb: LocalSandbox) -> None:
    _assert_contained(probes.network_loopback(sb))


def test_network_external_blocked(sb: LocalSandbox) -> None:
    _assert_contained(probes.network_external(sb))


def test_dns_blocked(sb: LocalSandbox) -> None:
    _assert_contained(probes.dns(sb))


def test_write_outside_workspace_blocked(sb: LocalSandbox) -> None:
    _assert_contained(probes.write_outside_workspace(sb))
    r = sb.exec("touch /usr/x /etc/x /opt/sandgym/x 2>&1; echo ok > /tmp/private && cat /tmp/private")
    assert r.stdout.count("Read-only file system") + r.stdout.count("Permission denied") >= 3
    assert r.stdout.endswith("ok\n")  # /tmp is private and writable


def test_tmp_is_size_capped(sb: LocalSandbox) -> None:
    r = sb.exec(f"head -c {(LIMITS.tmp_mb + 8) << 20} /dev/zero > /tmp/fill; du -m /tmp/fill | cut -f1", timeout=20)
    assert r.exit_code == 0 and int(r.stdout.split()[-1]) <= LIMITS.tmp_mb


def test_host_secret_file_unreadable(sb: LocalSandbox) -> None:
    _assert_contained(probes.host_secret_file(sb))


def test_host_env_secret_not_leaked(sb: LocalSandbox) -> None:
    _assert_contained(probes.host_env_secret(sb))


def test_fork_bomb_bounded(sb: LocalSandbox) -> None:
    if os.geteuid() != 0:
        pytest.skip("RLIMIT_NPROC per sandbox needs the root-only uid drop")
    _assert_contained(probes.fork_bomb(sb))
    assert sb.run_python("print('still works')").stdout == "still works\n"


def test_memory_hog_reported_oom(sb: LocalSandbox) -> None:
    _assert_contained(probes.memory_hog(sb))
    r = sb.run_python("x = bytearray(2 << 30)")
    assert r.oom and r.status == "oom"


def test_huge_file_capped(sb: LocalSandbox) -> None:
    _assert_contained(probes.huge_file(sb))


def test_output_flood_truncated(sb: LocalSandbox) -> None:
    _assert_contained(probes.output_flood(sb))
    r = sb.run_python("import sys\nsys.stderr.write('e' * 10**6)")
    assert r.output_truncated and len(r.stderr) == LIMITS.max_output_bytes


def test_infinite_loop_with_setsid_grandchild_leaves_nothing(sb: LocalSandbox) -> None:
    _assert_contained(probes.setsid_grandchild(sb))


def test_setsid_grandchild_cold_path_leaves_nothing() -> None:
    cold = _start(warm=False)
    try:
        _assert_contained(probes.setsid_grandchild(cold))
    finally:
        cold.close()


def test_cannot_signal_host_process(sb: LocalSandbox) -> None:
    _assert_contained(probes.signal_host(sb))
    r = sb.exec("ps -e --no-headers | wc -l")
    assert int(r.stdout) <= 5  # only the sandbox's own processes are visible


def test_cannot_create_user_namespace(sb: LocalSandbox) -> None:
    r = sb.exec("unshare -U true || echo refused")
    assert "refused" in r.stdout


def test_symlink_escape_refused_by_file_api(sb: LocalSandbox) -> None:
    sb.exec("ln -sf /etc/shadow leak; ln -sfn /etc linkdir; mkdir -p real; ln -sf ../../../../etc/passwd real/up")
    for path in ("leak", "linkdir/shadow", "real/up"):
        with pytest.raises(ValueError):
            sb.read_file(path)
    with pytest.raises(ValueError):
        sb.write_file("linkdir/evil", "x")
    with pytest.raises(ValueError):
        sb.write_file("leak", "x")
    assert not os.path.exists("/etc/evil")
    assert "leak" not in sb.list_files() and "linkdir/passwd" not in sb.list_files()


def test_hardened_flags_in_effect(sb: LocalSandbox) -> None:
    r = sb.exec("cat /proc/self/status | grep -E 'CapBnd|NoNewPrivs'; hostname; ls /home /root 2>&1 | head -2")
    assert "CapBnd:\t0000000000000000" in r.stdout and "sandbox" in r.stdout


def test_worker_memory_not_readable_by_agent(sb: LocalSandbox) -> None:
    r = sb.exec("cat /proc/$PPID/environ /proc/$PPID/mem 2>&1 | head -c 200; ls /proc/$PPID/fd 2>&1 | head -1")
    assert "Permission denied" in r.stdout

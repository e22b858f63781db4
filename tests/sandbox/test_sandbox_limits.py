"""Limits per sandbox: the workspace quota is enforced (a tmpfs of ``workspace_mb``: ENOSPC), and
memory is limited for the sandbox as a whole (one memory cgroup for all its processes), not per process."""

from __future__ import annotations

import logging
import os

import pytest

from sandgym.sandbox import Limits, LocalSandbox, bwrap_host, local

pytestmark = pytest.mark.skipif(
    not os.path.exists("/usr/bin/python3") or bwrap_host.find_bwrap() is None, reason="needs bwrap and /usr/bin/python3"
)

SMALL = Limits(timeout_s=10, memory_mb=256, tmp_mb=8, workspace_mb=8, max_file_mb=64, max_procs=32)


def _mounted(path: str) -> bool:
    return any(point == path for _, point, _, _ in bwrap_host._mounts())


@pytest.fixture(scope="module")
def sb():
    with LocalSandbox(SMALL) as box:
        yield box


def _need_quota(box: LocalSandbox) -> None:
    if not box.workspace_quota:
        pytest.skip("the workspace tmpfs cannot be mounted here (not root?): workspace_mb is only checked after "
                    "each call, as docs/SANDBOX.md 'Limits per sandbox' says")


def _need_cgroup(box: LocalSandbox) -> None:
    if box.memory_cgroup is None:
        pytest.skip("no usable memory cgroup here (not root, or memory controller not delegated): memory is "
                    "limited per process only, as docs/SANDBOX.md 'Limits per sandbox' says")


def test_writing_past_the_workspace_quota_fails_with_enospc(sb: LocalSandbox) -> None:
    _need_quota(sb)
    # several files, each under RLIMIT_FSIZE (max_file_mb = 64): only the workspace quota can stop them
    r = sb.exec("for i in 1 2 3 4; do head -c 3M /dev/zero > f$i || exit 9; done", timeout=10)
    assert r.exit_code == 9
    assert "No space left on device" in r.stderr
    assert "the workspace is full (Limits.workspace_mb = 8 MiB" in r.stderr
    used = sum(len(sb.read_bytes(name)) for name in sb.list_files())
    assert used <= SMALL.workspace_mb << 20
    # the agent's Python code sees the errno too
    r = sb.run_python("import errno\ntry:\n    open('g', 'wb').write(b'x' * (4 << 20))\nexcept OSError as e:\n"
                      "    print(errno.errorcode[e.errno])\n")
    assert r.stdout.strip() == "ENOSPC"
    # the host still works: it reads and lists; once the agent deletes files, everyone can write again
    assert sb.read_bytes("f1") == b"\0" * (3 << 20)
    assert "f1" in sb.list_files()
    with pytest.raises(OSError):
        sb.write_file("host.txt", b"y" * (2 << 20))  # the host is held to the same quota
    r = sb.exec("rm -f f* g; echo fine > ok.txt && cat ok.txt")
    assert r.ok and r.stdout == "fine\n" and "workspace is full" not in r.stderr
    sb.write_file("host.txt", "host write\n")
    assert sb.exec("cat host.txt").stdout == "host write\n"


def test_tmp_does_not_eat_the_workspace_quota_and_the_tmpfs_is_private(sb: LocalSandbox) -> None:
    _need_quota(sb)
    r = sb.exec("head -c 6M /dev/zero > /tmp/t && head -c 6M /dev/zero > w && df -k /workspace | tail -1", timeout=10)
    assert r.ok, r.stderr
    assert sb.exec("rm -f /tmp/t w").ok
    assert _mounted(sb.host_workdir)


def test_several_processes_together_cannot_exceed_the_sandbox_memory_limit(sb: LocalSandbox) -> None:
    _need_cgroup(sb)
    # 3 x 160 MiB: each under RLIMIT_AS (256 MiB), together over the sandbox's 256 + 8 + 8 MiB
    hog = "python3 -c 'import time; x = b\"x\" * (160 << 20); time.sleep(1.5)'"
    r = sb.exec(f"{hog} & {hog} & {hog} & wait", timeout=15)
    assert r.oom and r.status == "oom"
    assert "sandbox: out of memory: the sandbox's processes together reached its memory limit of 272 MiB" in r.stderr
    # the sandbox goes on, and a run within the limit is not flagged
    r = sb.exec(f"{hog}", timeout=15)
    assert r.ok, r


def test_every_process_of_the_sandbox_is_in_its_cgroup_and_close_removes_it() -> None:
    box = LocalSandbox(SMALL)
    try:
        _need_cgroup(box)
        box.wait_ready()
        assert box.memory_cgroup is not None
        pids = bwrap_host.SandboxCgroup(box.memory_cgroup, 1, 0).pids()
        assert box._worker is not None and box._worker.proc.pid in pids  # bwrap itself, so all it forks
        with box.session() as py:
            assert py.run_code("1 + 1").stdout == "2\n"
            assert len(bwrap_host.SandboxCgroup(box.memory_cgroup, 1, 0).pids()) > len(pids)
        cg, work = box.memory_cgroup, box.host_workdir
    finally:
        box.close()
    assert not os.path.exists(cg)
    assert not _mounted(work)


def test_reset_gives_a_fresh_empty_workspace_tmpfs() -> None:
    with LocalSandbox(SMALL) as box:
        _need_quota(box)
        assert box.exec("head -c 20M /dev/zero > big; ls").stdout == "big\n"
        box.reset()
        assert box.list_files() == [] and _mounted(box.host_workdir)
        r = box.exec("head -c 4M /dev/zero > a && echo ok")
        assert r.ok and r.stdout == "ok\n"


def test_stale_mount_of_a_crashed_holder_is_cleaned(tmp_path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    stale = tmp_path / "work"
    stale.mkdir()
    assert bwrap_host.mount_workspace(str(stale), 1, None) is None
    (stale / "x").write_bytes(b"1")
    bwrap_host.unmount_under(str(tmp_path))
    assert not _mounted(str(stale)) and list(stale.iterdir()) == []


def test_without_cgroups_or_mounts_one_warning_and_the_old_checks(monkeypatch, caplog) -> None:
    monkeypatch.setattr(bwrap_host, "mount_workspace", lambda path, mb, uid: "mount refused (test)")
    monkeypatch.setattr(bwrap_host.SandboxCgroup, "create", classmethod(lambda cls, name, limit: (None, "no (test)")))
    monkeypatch.setattr(local, "_LIMIT_WARNINGS", set())
    caplog.set_level(logging.WARNING, logger="sandgym.sandbox.local")
    with LocalSandbox(SMALL, warm=False) as a, LocalSandbox(SMALL, warm=False) as b:
        assert not a.workspace_quota and a.memory_cgroup is None and not b.workspace_quota
        r = a.exec("head -c 9M /dev/zero > big")
        assert r.exit_code == 0 and "over the 8 MiB limit; delete files" in r.stderr
    lines = [rec.getMessage() for rec in caplog.records if "SANDGYM LIMITS" in rec.getMessage()]
    assert len(lines) == 2  # one per kind, not one per sandbox
    assert any("not size-capped (mount refused (test))" in m for m in lines)
    assert any("limited per process only" in m for m in lines)

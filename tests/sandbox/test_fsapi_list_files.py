"""``fsapi.list_files``: iterative (a 5000-deep tree lists, no RecursionError), bounded in open file descriptors,
and still never follows a symlink."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from sandgym.sandbox import fsapi

DIR = os.O_RDONLY | os.O_DIRECTORY


def _deep_tree(top: Path, depth: int, *, sibling: bool = False) -> list[str]:
    """A chain of ``depth`` nested ``d`` directories built with openat (paths far beyond PATH_MAX); a file ``f``
    every 500 levels, and with ``sibling`` a directory ``s`` holding a file ``g`` at every level. Returns the
    expected listing."""
    top.mkdir()
    expected: list[str] = []
    fd = os.open(top, DIR)
    try:
        for i in range(depth):
            prefix = "d/" * i
            os.mkdir("d", dir_fd=fd)
            if i % 500 == 0:
                os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
                expected.append(prefix + "f")
            if sibling:
                os.mkdir("s", dir_fd=fd)
                sfd = os.open("s", DIR, dir_fd=fd)
                os.close(os.open("g", os.O_WRONLY | os.O_CREAT, dir_fd=sfd))
                os.close(sfd)
                expected.append(prefix + "s/g")
            nfd = os.open("d", DIR, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    return sorted(expected)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fds_under(root: Path) -> list[str]:
    """Open fds of this process that point inside ``root`` (other threads' fds do not count)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)):
            out.append(target)
    return out


def test_lists_a_5000_deep_tree_without_recursion(tmp_path: Path) -> None:
    expected = _deep_tree(tmp_path / "deep", 5000)
    try:
        assert fsapi.list_files(str(tmp_path / "deep")) == expected and len(expected) == 10
        assert _fds_under(tmp_path) == []  # every directory fd closed again
    finally:  # a 5000-deep tree left behind would break pytest's own recursive clean-up of old temp dirs
        fsapi.remove_tree(str(tmp_path / "deep"))


def test_deep_and_wide_stays_within_a_low_fd_limit(tmp_path: Path) -> None:
    """Each level has a sibling directory still to visit while the walk goes deeper: the walk neither holds an fd
    per level nor fails with EMFILE under a small RLIMIT_NOFILE."""
    expected = _deep_tree(tmp_path / "comb", 1500, sibling=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = _open_fds() + fsapi._LIST_OPEN_DIRS + 16
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(low, hard), hard))
    try:
        got = fsapi.list_files(str(tmp_path / "comb"))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        fsapi.remove_tree(str(tmp_path / "comb"))
    assert got == expected


def test_many_pending_parents_fall_back_to_reopening_from_the_root(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fsapi, "_LIST_OPEN_DIRS", 1)
    root = tmp_path / "w"
    for a in "abc":
        for b in "xyz":
            (root / a / b / "q").mkdir(parents=True)
            (root / a / b / "q" / "f.py").write_text("")
        (root / a / "top.txt").write_text("")
    expected = sorted([f"{a}/{b}/q/f.py" for a in "abc" for b in "xyz"] + [f"{a}/top.txt" for a in "abc"])
    assert fsapi.list_files(str(root)) == expected
    assert fsapi.list_files(str(root), "b") == [p for p in expected if p.startswith("b/")]
    assert _fds_under(tmp_path) == []


def test_symlinks_are_neither_listed_nor_followed_and_limit_holds(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host")
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("")
    (root / "b.py").write_text("")
    (root / "link").symlink_to(outside)
    (root / "pkg" / "flink").symlink_to(outside / "secret")
    assert fsapi.list_files(str(root)) == ["b.py", "pkg/a.py"]
    assert fsapi.list_files(str(root), limit=1) == ["b.py"]  # breadth-first: shallow files first
    with pytest.raises(ValueError, match="symlink"):
        fsapi.list_files(str(root), "link")
    with pytest.raises(FileNotFoundError):
        fsapi.list_files(str(root), "nodir")

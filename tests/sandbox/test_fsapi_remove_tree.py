"""``fsapi.remove_tree``: any depth, unreadable directories, and never a step outside the tree."""

from __future__ import annotations

import os
from pathlib import Path

from sandgym.sandbox import fsapi


def _deep_tree(top: Path, depth: int) -> None:
    """A chain of ``depth`` nested directories built with openat (its paths are far beyond PATH_MAX)."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(depth):
            os.mkdir("d", dir_fd=fd)
            if i % 500 == 0:
                os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
            nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)


def test_removes_a_5000_deep_tree_without_recursion(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    _deep_tree(top, 5000)
    fsapi.remove_tree(str(top))
    assert not top.exists()


def test_removes_unreadable_directories_and_keeps_symlink_targets(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    top = tmp_path / "tree"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "x.py").write_text("x")
    (top / "a" / "link").symlink_to(outside)
    (top / "a" / "filelink").symlink_to(outside / "keep.txt")
    for i in range(50):
        (top / f"wide{i}").mkdir()
    os.chmod(outside, 0o755)
    os.chmod(outside / "keep.txt", 0o600)
    modes = (os.stat(outside).st_mode, os.stat(outside / "keep.txt").st_mode)
    os.chmod(top / "a" / "b", 0)
    os.chmod(top / "a", 0)
    fsapi.remove_tree(str(top))
    assert not top.exists()
    assert (outside / "keep.txt").read_text() == "host file"
    assert (os.stat(outside).st_mode, os.stat(outside / "keep.txt").st_mode) == modes  # never chmod-ed


def test_a_symlink_given_as_the_top_is_unlinked_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("kept")
    link = tmp_path / "link"
    link.symlink_to(target)
    fsapi.remove_tree(str(link))
    assert not os.path.lexists(link)
    assert (target / "keep.txt").read_text() == "kept"


def test_missing_path_is_a_no_op(tmp_path: Path) -> None:
    fsapi.remove_tree(str(tmp_path / "nothing"))

"""Host-side workspace file access that cannot be tricked into leaving the workspace.

The sandboxed uid controls the workspace, so every path is walked one component at a time with ``openat`` and
``O_NOFOLLOW``: a symlink anywhere (final component or parent), ``..``, an absolute path, or a non-regular file
(a FIFO would block the harness) raises ``ValueError``. Nothing is ever resolved by path string.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections import deque

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def split_path(path: str) -> list[str]:
    """Components of a workspace-relative path; ValueError for absolute paths, ``..``, NUL or empty."""
    if not isinstance(path, str) or "\x00" in path:
        raise ValueError(f"path {path!r} must be a str without NUL bytes")
    if path.startswith("/"):
        raise ValueError(f"path {path!r} is absolute; pass a path relative to the workspace")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path {path!r} contains '..'; paths must stay inside the workspace")
    return parts


def _open_dir(root: str, parts: list[str], *, create: bool, owner: int | None, path: str) -> int:
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    if owner is not None:
                        os.chown(part, owner, owner, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise ValueError(f"path {path!r}: {part!r} is a symlink or not a directory; refused") from exc
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_file(root: str, path: str, flags: int, *, create_parents: bool, owner: int | None) -> int:
    parts = split_path(path)
    if not parts:
        raise ValueError(f"path {path!r} names the workspace itself, not a file")
    dfd = _open_dir(root, parts[:-1], create=create_parents, owner=owner, path=path)
    try:
        fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"path {path!r} is a symlink; refused") from exc
        if exc.errno in (errno.ENXIO, errno.EISDIR):
            raise ValueError(f"path {path!r} is not a regular file; refused") from exc
        raise
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ValueError(f"path {path!r} is not a regular file; refused")
    os.set_blocking(fd, True)
    return fd


def write_file(root: str, path: str, data: str | bytes, *, owner: int | None = None) -> None:
    """Write ``data`` to ``root/path`` (parents created, owned by ``owner`` when given)."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    fd = _open_file(root, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, create_parents=True, owner=owner)
    try:
        view = memoryview(raw)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if owner is not None:
            os.fchown(fd, owner, owner)
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)


def read_bytes(root: str, path: str, *, max_bytes: int = 1 << 30) -> bytes:
    """The bytes of ``root/path``; FileNotFoundError if missing, ValueError for symlinks/non-regular files."""
    fd = _open_file(root, path, os.O_RDONLY, create_parents=False, owner=None)
    try:
        chunks = []
        total = 0
        while total < max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


_LIST_OPEN_DIRS = 64
"""Directory fds ``list_files`` keeps open to reach pending subdirectories; past it they are reopened from the root."""


def list_files(root: str, path: str = ".", *, limit: int = 100_000) -> list[str]:
    """Regular files under ``root/path`` (recursively, symlinks neither listed nor followed), sorted; at most
    ``limit`` files, and at most ``limit`` directories are visited.

    Iterative and breadth-first (a tree of any depth lists, no RecursionError; shallow files come first when
    ``limit`` cuts the listing). Every directory is opened through its parent's fd with ``O_NOFOLLOW`` (no path
    string is resolved; a subdirectory replaced by a symlink meanwhile is skipped). A parent's fd stays open only
    while some of its subdirectories are still to be opened, and at most ``_LIST_OPEN_DIRS`` of them at once
    (further ones are reopened from ``root`` one component at a time), so neither depth nor width runs out of file
    descriptors."""

    parts = split_path(path)
    out: list[str] = []
    pending: dict[int, int] = {}  # parent fd -> its subdirectories still to be opened through it
    # (parent fd, or None to reopen from root) and the components of the directory from root
    queue: deque[tuple[int | None, list[str]]] = deque()

    def expand(fd: int, comps: list[str]) -> None:
        try:
            with os.scandir(fd) as it:
                entries = list(it)
        except OSError:
            entries = []
        prefix = "/".join(comps) + "/" if comps else ""
        subdirs: list[str] = []
        for e in entries:
            try:
                if e.is_file(follow_symlinks=False):
                    if len(out) < limit:
                        out.append(prefix + e.name)
                elif e.is_dir(follow_symlinks=False):
                    subdirs.append(e.name)
            except OSError:
                continue
        if subdirs and len(pending) < _LIST_OPEN_DIRS:
            pending[fd] = len(subdirs)
            queue.extend((fd, [*comps, name]) for name in subdirs)
        else:
            os.close(fd)
            queue.extend((None, [*comps, name]) for name in subdirs)

    def release(fd: int) -> None:
        pending[fd] -= 1
        if not pending[fd]:
            del pending[fd]
            os.close(fd)

    top = _open_dir(root, parts, create=False, owner=None, path=path)
    visited = 1
    try:
        expand(top, parts)
        while queue and len(out) < limit and visited < limit:
            parent, comps = queue.popleft()
            try:
                if parent is not None:
                    fd = os.open(comps[-1], _DIR_FLAGS, dir_fd=parent)
                else:
                    fd = _open_dir(root, comps, create=False, owner=None, path="/".join(comps))
            except (OSError, ValueError):  # gone, or no longer a directory (a symlink now): skip it
                continue
            finally:
                if parent is not None:
                    release(parent)
            visited += 1
            expand(fd, comps)
    finally:
        for fd in pending:
            os.close(fd)
    return sorted(out)


def tree_size(root: str, *, limit: int = 20_000) -> int:
    """Bytes used by regular files under ``root`` (symlinks not followed; stops after ``limit`` entries)."""
    total = 0
    seen = 0
    stack = [root]
    while stack and seen < limit:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    seen += 1
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        elif e.is_file(follow_symlinks=False):
                            total += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def _chmod_dir(parent_fd: int, name: str) -> None:
    """Make directory ``name`` (in ``parent_fd``) readable and writable by us, never following a symlink."""
    try:
        pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return
    try:
        os.chmod(f"/proc/self/fd/{pfd}", 0o700)
    except OSError:
        pass
    finally:
        os.close(pfd)


def _open_child_dir(parent_fd: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        _chmod_dir(parent_fd, name)
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


def _empty_dir(fd: int) -> list[str]:
    """Unlink every non-directory in ``fd``; the names of its subdirectories."""
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o700)
    with os.scandir(fd) as it:
        entries = list(it)
    subdirs: list[str] = []
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                subdirs.append(e.name)
            else:
                os.unlink(e.name, dir_fd=fd)
        except FileNotFoundError:
            continue
    return subdirs


def _remove_tree_once(top: str) -> None:
    """One pass of :func:`remove_tree`: depth first with a heap-allocated stack and one open fd at a time.

    Paths are never built (a deep tree's paths exceed PATH_MAX); the walk goes down by ``openat`` with
    ``O_NOFOLLOW`` and back up by ``..``, checking that ``..`` is the directory it came from.
    """
    try:
        fd = os.open(top, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink or a file: remove it, never its target
            os.unlink(top)
            return
        if exc.errno == errno.EACCES:
            with contextlib.suppress(OSError):
                os.chmod(top, 0o700)
            fd = os.open(top, _DIR_FLAGS)
        else:
            raise
    # one frame per open level: (dev, ino) of the directory, subdirectories still to visit, name in its parent
    stack: list[tuple[tuple[int, int], list[str], str]] = []
    try:
        st = os.fstat(fd)
        stack.append(((st.st_dev, st.st_ino), _empty_dir(fd), ""))
        while stack:
            ident, pending, name = stack[-1]
            if pending:
                child = pending.pop()
                try:
                    nfd = _open_child_dir(fd, child)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    os.unlink(child, dir_fd=fd)  # swapped for a symlink or file meanwhile
                    continue
                os.close(fd)
                fd = nfd
                st = os.fstat(fd)
                stack.append(((st.st_dev, st.st_ino), _empty_dir(fd), child))
                continue
            stack.pop()
            if not stack:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            pst = os.fstat(parent)
            if (pst.st_dev, pst.st_ino) != stack[-1][0]:
                os.close(parent)
                raise OSError(errno.EBUSY, f"{top}: tree moved while being removed")
            os.close(fd)
            fd = parent
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(top)


def remove_contents(path: str) -> None:
    """Empty the directory ``path`` (kept itself, with its inode: a bind mount of it stays valid), as
    :func:`remove_tree` removes each entry. Never raises."""
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        remove_tree(os.path.join(path, name))


def remove_tree(path: str, attempts: int = 5) -> None:
    """Remove a directory tree the sandbox uid may have made unreadable (chmod 000 dirs included).

    Only paths inside ``path`` are ever chmod-ed and no symlink is followed; a tree still being written to (a
    dying sandbox) is retried. Iterative, so a tree of any depth is removed (no RecursionError, no PATH_MAX).
    Never raises: what cannot be removed after ``attempts`` passes is left in place.
    """

    top = os.path.abspath(path)
    for i in range(attempts):
        if not os.path.lexists(top):
            return
        try:
            _remove_tree_once(top)
        except OSError:
            pass
        else:
            return
        time.sleep(0.01 * (i + 1))

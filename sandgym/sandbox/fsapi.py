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


def list_files(root: str, path: str = ".", *, limit: int = 100_000) -> list[str]:
    """Regular files under ``root/path`` (recursively, symlinks neither listed nor followed), sorted."""
    parts = split_path(path)
    out: list[str] = []

    def walk(fd: int, prefix: str) -> None:
        with os.scandir(fd) as it:
            entries = list(it)
        for e in entries:
            if len(out) >= limit:
                return
            rel = f"{prefix}{e.name}"
            if e.is_file(follow_symlinks=False):
                out.append(rel)
            elif e.is_dir(follow_symlinks=False):
                try:
                    sub = os.open(e.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                try:
                    walk(sub, rel + "/")
                finally:
                    os.close(sub)

    fd = _open_dir(root, parts, create=False, owner=None, path=path)
    try:
        walk(fd, "/".join(parts) + "/" if parts else "")
    finally:
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


def remove_tree(path: str, attempts: int = 5) -> None:
    """Remove a directory tree the sandbox uid may have made unreadable (chmod 000 dirs included).

    Only paths inside ``path`` are ever chmod-ed; a tree still being written to (a dying sandbox) is retried.
    """
    import shutil
    import time

    top = os.path.abspath(path)

    def onerror(func: object, p: str, exc: object) -> None:
        for target in (os.path.dirname(p), p):
            if os.path.abspath(target).startswith(top) and not os.path.islink(target):
                with contextlib.suppress(OSError):
                    os.chmod(target, 0o700)

    for i in range(attempts):
        if not os.path.lexists(top):
            return
        shutil.rmtree(top, onerror=onerror)
        time.sleep(0.01 * (i + 1))

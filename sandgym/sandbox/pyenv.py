"""Per-task Python environments: the packages a task's code and tests need, built once on the host and mounted
read-only into the sandbox (sandgym has no container images; this is its equivalent of one per suite).

``ensure_env(requirements)`` installs the requirements with the harness's pip into
``<runtime base>/envs/<key>/site`` (``pip install --target``), where the key hashes the sorted requirements, the
sandbox interpreter's version and the wheelhouse, so the second run (and every other task of the suite) hits the
cache. ``SANDGYM_WHEELHOUSE=/path/to/wheels`` builds offline from local wheels (``--no-index --find-links``).
The local sandbox binds the directory read-only at ``/opt/sandgym-env`` and puts it first on the Python path of the
agent's code, of the solution's process and of the tests.

Trust: the requirements are the task author's (``Task.requirements``), never the agent's, and building them runs
no agent code: pip runs on the host before any episode, as the harness's user, like installing the task suite.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from sandgym.errors import SandboxError
from sandgym.sandbox.bwrap_host import RUNTIME_BASE

IN_ENV = "/opt/sandgym-env"
"""Where the environment appears inside the sandbox."""


@functools.lru_cache(maxsize=4)
def sandbox_python_version(python: str) -> str:
    """``X.Y`` of the interpreter the sandbox runs (pip must pick wheels for it, not for the harness)."""
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"cannot run the sandbox interpreter {python!r}: {exc}") from exc
    return out.stdout.strip()


def env_key(requirements: Sequence[str], python_version: str, wheelhouse: str | None) -> str:
    h = hashlib.sha256(b"sandgym-env-v1\0")
    for part in [python_version, wheelhouse or "", *sorted(r.strip() for r in requirements)]:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def envs_dir() -> Path:
    return RUNTIME_BASE / "envs"


def ensure_env(requirements: Sequence[str], *, python: str = "/usr/bin/python3",
               wheelhouse: str | None = None, timeout_s: float = 900.0) -> str | None:
    """The host path of the environment for ``requirements`` (built now if not cached); None when empty.

    SandboxError names the requirement pip could not install, with pip's own last lines and the fix.
    """
    reqs = sorted({r.strip() for r in requirements if r.strip()})
    if not reqs:
        return None
    wheelhouse = wheelhouse if wheelhouse is not None else os.environ.get("SANDGYM_WHEELHOUSE") or None
    python = python if os.path.exists(python) else sys.executable
    version = sandbox_python_version(python)
    base = envs_dir()
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    dest = base / env_key(reqs, version, wheelhouse)
    site = dest / "site"
    if (dest / ".complete").is_file():
        return str(site)
    with open(base / f".{dest.name}.lock", "w") as lock:  # one build per key, across processes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".complete").is_file():
            return str(site)
        _build(dest, reqs, version, wheelhouse, timeout_s)
    return str(site)


def _build(dest: Path, reqs: list[str], version: str, wheelhouse: str | None, timeout_s: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=dest.parent))
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
           "--no-warn-script-location", "--no-compile", "--target", str(tmp / "site")]
    if version != f"{sys.version_info[0]}.{sys.version_info[1]}":  # wheels for the sandbox's interpreter, not the harness's
        cmd += ["--python-version", version, "--only-binary=:all:"]
    if wheelhouse:
        cmd += ["--no-index", "--find-links", wheelhouse]
    t0 = time.monotonic()
    try:
        proc = subprocess.run([*cmd, *reqs], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SandboxError(f"building the task environment {reqs} took over {timeout_s:.0f} s; "
                           "use a wheelhouse (SANDGYM_WHEELHOUSE) or fewer requirements") from exc
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        where = f"the wheelhouse {wheelhouse}" if wheelhouse else "the package index"
        raise SandboxError(f"cannot build the task environment {reqs} from {where}: {tail}\nFix the "
                           "requirement names/versions in the task, or put their wheels in a directory and set "
                           "SANDGYM_WHEELHOUSE to it on machines without a network.")
    (tmp / "requirements.txt").write_text("\n".join(reqs) + "\n")
    (tmp / "build_s").write_text(f"{time.monotonic() - t0:.1f}\n")
    for dirpath, _dirs, files in os.walk(tmp):  # the slot uids read it
        os.chmod(dirpath, 0o755)
        for f in files:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
    (tmp / ".complete").write_text("ok\n")
    if dest.exists():
        shutil.rmtree(dest, ignore_errors=True)
    os.rename(tmp, dest)

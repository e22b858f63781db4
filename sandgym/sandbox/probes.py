"""Isolation probes: bounded attacks run through a sandbox, each answering "was it contained?" with evidence.

Used by ``sandgym sandbox check`` and the attack tests. Every probe is bounded (<= 200 forks, seconds of sleep)
so it is safe on a shared machine. A probe returns ``(contained, detail)``.
"""

from __future__ import annotations

import os
import secrets
import socket
import textwrap
import time
from collections.abc import Callable

from sandgym.sandbox.protocol import Sandbox

Probe = Callable[[Sandbox], "tuple[bool, str]"]


def _py(sb: Sandbox, code: str, timeout: float = 10.0) -> tuple[int | None, str, str]:
    r = sb.exec(["python3", "-c", textwrap.dedent(code)], timeout=timeout)
    return r.exit_code, r.stdout.strip(), r.stderr.strip()


def _host_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing interface
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def _connect_probe(sb: Sandbox, host: str) -> tuple[bool, str]:
    with socket.socket() as srv:
        srv.bind(("0.0.0.0", 0))
        srv.listen(4)
        srv.settimeout(0.2)
        port = srv.getsockname()[1]
        _, out, _ = _py(sb, f"""
            import socket
            try:
                socket.create_connection(({host!r}, {port}), timeout=2).close(); print("CONNECTED")
            except OSError as e:
                print("BLOCKED", e)
        """)
        accepted = False
        try:
            srv.accept()[0].close()
            accepted = True
        except OSError:
            pass
    return ("CONNECTED" not in out and not accepted), f"{host}:{port}: {out}"


def network_loopback(sb: Sandbox) -> tuple[bool, str]:
    """A listener on the host's 127.0.0.1 is not reachable."""
    return _connect_probe(sb, "127.0.0.1")


def network_external(sb: Sandbox) -> tuple[bool, str]:
    """The host's own external address (a stand-in for the internet) is not reachable."""
    return _connect_probe(sb, _host_ip())


def dns(sb: Sandbox) -> tuple[bool, str]:
    """Names do not resolve."""
    _, out, _ = _py(sb, """
        import socket
        try:
            print("RESOLVED", socket.getaddrinfo("pypi.org", 443)[0][4])
        except OSError as e:
            print("BLOCKED", e)
    """)
    return "RESOLVED" not in out, out


def write_outside_workspace(sb: Sandbox) -> tuple[bool, str]:
    """Writes to /tmp, /etc, /usr, / and the host temp dir never land on the host."""
    tag = secrets.token_hex(6)
    targets = [f"/tmp/sandgym-escape-{tag}", f"/etc/sandgym-escape-{tag}", f"/usr/sandgym-escape-{tag}",
               f"/sandgym-escape-{tag}", f"/var/tmp/sandgym-escape-{tag}"]
    _py(sb, f"""
        for p in {targets!r}:
            try:
                open(p, "w").write("x")
            except OSError:
                pass
    """)
    leaked = [p for p in targets if os.path.exists(p)]
    for p in leaked:
        os.unlink(p)
    return not leaked, f"appeared on the host: {leaked}" if leaked else "no file appeared on the host"


def host_secret_file(sb: Sandbox) -> tuple[bool, str]:
    """A root-only host file, /etc/shadow and root's home are unreadable."""
    tag = secrets.token_hex(8)
    path = f"/tmp/sandgym-secret-{tag}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, f"SECRET-{tag}".encode())
    os.close(fd)
    try:
        _, out, _ = _py(sb, f"""
            for p in [{path!r}, "/etc/shadow", "/root/.bashrc", "/proc/1/environ"]:
                try:
                    print(p, open(p).read()[:200])
                except OSError as e:
                    print(p, "BLOCKED", type(e).__name__)
        """)
    finally:
        os.unlink(path)
    leaked = f"SECRET-{tag}" in out or "root:" in out
    return not leaked, out


def host_env_secret(sb: Sandbox) -> tuple[bool, str]:
    """Environment variables of the harness (API keys) are not passed in."""
    name, value = "SANDGYM_FAKE_E2B_API_KEY", f"e2b_{secrets.token_hex(8)}"
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        r = sb.exec("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
    return value not in r.stdout + r.stderr, f"{len(r.stdout.splitlines())} env lines, secret absent"


def fork_bomb(sb: Sandbox, attempts: int = 200) -> tuple[bool, str]:
    """At most ``max_procs`` processes: a bounded fork bomb (children sleep 2 s) is stopped."""
    _, out, _ = _py(sb, f"""
        import os, time
        n = 0
        for _ in range({attempts}):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(2); os._exit(0)
            n += 1
        print("FORKED", n)
    """, timeout=15)
    n = int(out.split()[-1]) if out.startswith("FORKED") else -1
    return 0 <= n < attempts and n <= sb.limits.max_procs, f"forked {n} of {attempts} (max_procs={sb.limits.max_procs})"


def memory_hog(sb: Sandbox) -> tuple[bool, str]:
    """Allocating 3 GiB in 100 MiB chunks is refused and reported as ``oom``."""
    r = sb.exec(["python3", "-c", "x = []\nfor _ in range(30): x.append(bytearray(100 << 20))\nprint('ALLOCATED')"],
                timeout=20)
    return r.oom and "ALLOCATED" not in r.stdout, f"oom={r.oom} exit={r.exit_code} peak_rss={r.peak_rss_mb:.0f} MB"


def huge_file(sb: Sandbox) -> tuple[bool, str]:
    """A file larger than ``max_file_mb`` cannot be written (RLIMIT_FSIZE)."""
    mb = sb.limits.max_file_mb + 16
    r = sb.exec(["python3", "-c", f"f = open('big.bin', 'wb')\nfor _ in range({mb}): f.write(b'0' * (1 << 20))"],
                timeout=20)
    size = len(sb.read_bytes("big.bin")) if "big.bin" in sb.list_files() else 0
    return size <= sb.limits.max_file_mb << 20, f"exit={r.exit_code}, big.bin is {size >> 20} MiB"


def output_flood(sb: Sandbox) -> tuple[bool, str]:
    """Output beyond ``max_output_bytes`` is dropped and flagged."""
    n = sb.limits.max_output_bytes * 4
    r = sb.exec(["python3", "-c", f"import sys\nsys.stdout.write('x' * {n})"], timeout=20)
    ok = r.output_truncated and len(r.stdout.encode()) <= sb.limits.max_output_bytes
    return ok, f"kept {len(r.stdout)} of {n} bytes, truncated={r.output_truncated}"


def setsid_grandchild(sb: Sandbox, timeout: float = 1.5) -> tuple[bool, str]:
    """An infinite loop with a ``setsid`` grandchild: the call times out and nothing survives it."""
    token = f"{900 + secrets.randbelow(99)}.{secrets.randbelow(10**6):06d}"
    r = sb.exec(["python3", "-c", textwrap.dedent(f"""
        import os
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", "{token}"])
            os._exit(0)
        while True:
            pass
    """)], timeout=timeout)
    time.sleep(0.2)
    survivors = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        survivors.append(pid)
            except OSError:
                pass
    return r.timed_out and not survivors, f"timed_out={r.timed_out}, survivors={survivors}"


def signal_host(sb: Sandbox) -> tuple[bool, str]:
    """The harness process cannot be signalled (nor seen)."""
    _, out, _ = _py(sb, f"""
        import os
        try:
            os.kill({os.getpid()}, 0); print("SIGNALLED")
        except OSError as e:
            print("BLOCKED", type(e).__name__)
        print("VISIBLE_PIDS", sum(p.isdigit() for p in os.listdir("/proc")))
    """)
    return "SIGNALLED" not in out, out


PROBES: dict[str, Probe] = {
    "network_loopback": network_loopback,
    "network_external": network_external,
    "dns": dns,
    "write_outside_workspace": write_outside_workspace,
    "host_secret_file": host_secret_file,
    "host_env_secret": host_env_secret,
    "fork_bomb": fork_bomb,
    "memory_hog": memory_hog,
    "huge_file": huge_file,
    "output_flood": output_flood,
    "setsid_grandchild": setsid_grandchild,
    "signal_host": signal_host,
}

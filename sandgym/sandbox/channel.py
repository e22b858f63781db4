"""Host side of a JSON-lines channel to a process in a sandbox: one deadline, select-based, never hangs on pipes."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, TypeVar

from sandgym.errors import SandboxError

T = TypeVar("T")


class _Spawner:
    """One long-lived thread that starts every sandbox process.

    bwrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) fires when the *thread* that started it exits, not the
    process: a sandbox started from a short-lived thread (a pool's pre-warm thread, a rollout executor's worker)
    would be killed with that thread and restarted at its next call. Started here, it lives as long as the harness.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="sandgym-spawner", daemon=True)
                self._thread.start()
        box: dict[str, Any] = {}
        done = threading.Event()
        self._jobs.put((fn, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]

    def _loop(self) -> None:
        while True:
            fn, box, done = self._jobs.get()
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = exc
            finally:
                done.set()


SPAWNER = _Spawner()


class ChannelDead(Exception):
    """The process closed its end (it died or was killed)."""


class ChannelTimeout(Exception):
    """No reply before the deadline."""


class Channel:
    """A child process (bwrap + in-sandbox script) that answers one JSON line per JSON line sent."""

    def __init__(self, argv: Sequence[str], *, log: BinaryIO, cwd: str | None = None,
                 env: dict[str, str] | None = None, popen_kw: dict[str, Any] | None = None,
                 literal_requests: bool = False) -> None:
        self.proc = SPAWNER.run(lambda: subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=cwd,
            env=env if env is not None else {}, **(popen_kw or {}),
        ))
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._buf = b""
        self._literal = literal_requests

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float, what: str, log_tail: str) -> dict[str, Any]:
        """The process's ready line, or (the process killed) ``SandboxError`` naming ``what`` and its log's tail."""
        try:
            ready = self.recv(time.monotonic() + timeout)
        except (ChannelDead, ChannelTimeout) as exc:
            self.kill()
            raise SandboxError(f"{what} did not start ({exc}): {log_tail}") from exc
        if not ready.get("ready"):
            self.kill()
            raise SandboxError(f"{what} sent {ready!r} instead of its ready line")
        return ready

    def send(self, obj: Any) -> None:
        data = ((ascii(obj) if self._literal else json.dumps(obj)) + "\n").encode()
        try:
            while data:
                _, w, _ = select.select([], [self._in], [], 30.0)
                if not w:
                    raise ChannelTimeout("the sandbox did not read its request within 30 s")
                n = os.write(self._in, data[:65536])
                data = data[n:]
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ChannelDead(str(exc)) from exc

    def recv(self, deadline: float) -> dict[str, Any]:
        """The next JSON line, or ChannelDead / ChannelTimeout (``deadline`` is a ``time.monotonic()`` value)."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("no reply before the deadline")
            r, _, _ = select.select([self._out], [], [], left)
            if not r:
                continue
            chunk = os.read(self._out, 1 << 20)
            if not chunk:
                raise ChannelDead("the sandbox process closed its output")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise ChannelDead(f"garbled reply from the sandbox: {line[:200]!r}") from exc
        if not isinstance(doc, dict):
            raise ChannelDead(f"garbled reply from the sandbox: {line[:200]!r}")
        return doc

    def kill(self) -> None:
        """Kill the whole process group (bwrap's pid namespace goes with it) and reap; never blocks long."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

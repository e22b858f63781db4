"""``EnvPool``: an env factory that hands back the envs of finished episodes before making new ones.

The rollout engine makes one env per episode and, when the factory has ``release``, gives each finished episode's
env back instead of closing it. The next episode resets it (``reset(options={"task": ...})`` starts a new episode
on any task), so a training run makes as many envs as it runs episodes at once, not one per episode. An env that
supports ``reuse_sandbox`` (sandgym's tool envs) gets it turned on: its sandbox is reset in place between episodes
(``LocalSandbox.reset``: the warm worker kept, everything the agent could write put back, proven clean or started
anew), which saves a sandbox start (a bwrap, an interpreter, pytest's import) per episode.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

DEFAULT_MAX_IDLE = 64
"""Idle envs kept at most (each may hold a warm sandbox: a few tens of MB)."""


class EnvPool:
    """A callable env factory over ``make`` with ``release(env)`` and ``close()``; thread-safe."""

    def __init__(self, make: Callable[[], Any], *, max_idle: int = DEFAULT_MAX_IDLE) -> None:
        self.make = make
        self.max_idle = max_idle
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self.made = 0
        self.reused = 0

    def __call__(self) -> Any:
        with self._lock:
            if self._idle:
                self.reused += 1
                return self._idle.pop()
            self.made += 1
        env = self.make()
        inner = getattr(env, "unwrapped", env)
        if hasattr(inner, "reuse_sandbox"):
            inner.reuse_sandbox = True  # a sandbox proven clean between episodes, not a fresh one each time
        return env

    def release(self, env: Any) -> None:
        """Take back the env of a finished episode (closed instead when the pool is full)."""
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(env)
                return
        env.close()

    def close(self) -> None:
        """Close every idle env (envs still out are their holders' to close)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for env in idle:
            with contextlib.suppress(Exception):  # best effort: one env failing to close must not keep others
                env.close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

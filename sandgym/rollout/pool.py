"""Ray plumbing shared by training and evaluation: start or join a cluster, and a fault-tolerant worker pool.

``WorkerPool`` keeps one unit of work in flight per actor. A unit whose actor dies (crash, OOM, ``ray.kill``,
lost node) is re-queued at the front and the actor is replaced, so work is never silently lost; callers keep a
ledger of accepted unit keys so nothing is counted twice. Ray is imported lazily: the single-process path
never needs it.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sandgym.errors import ConfigError, SandgymError

log = logging.getLogger(__name__)

U = TypeVar("U")


class WorkerPoolError(SandgymError, RuntimeError):
    """Rollout workers keep dying (more restarts than allowed); the message names the last error."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "distributed.backend='ray' (or --ray-workers) needs Ray; install it with pip install 'sandgym[ray]'"
        ) from e
    return ray


def init_ray(address: str = "", num_cpus: int | None = None) -> Any:
    """Join the cluster at ``address``, or start a local Ray instance with ``num_cpus``; reuse one already up."""
    ray = import_ray()
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return ray


@dataclass
class PoolStats:
    restarts: int = 0
    requeued: int = 0
    completed: int = 0


class WorkerPool(Generic[U]):
    """``size`` actors from ``make_actor(slot)``; each runs ``method(unit)`` on one unit at a time.

    ``on_start(actor)`` runs for every new actor (the first ones and replacements) before it gets work, e.g.
    to send the newest weights; Ray runs an actor's calls from one caller in submission order, so the weights
    are in place before the next unit starts. ``on_dispatch(slot, actor, unit)`` is a test hook.
    """

    def __init__(
        self,
        make_actor: Callable[[int], Any],
        size: int,
        *,
        method: str,
        key: Callable[[U], Hashable],
        on_start: Callable[[Any], None] | None = None,
        on_dispatch: Callable[[int, Any, U], None] | None = None,
        max_restarts: int | None = None,
    ) -> None:
        self.ray = import_ray()
        self._make = make_actor
        self._method = method
        self._key = key
        self._on_start = on_start
        self._on_dispatch = on_dispatch
        self.max_restarts = max_restarts if max_restarts is not None else 3 * size + 3
        self.stats = PoolStats()
        self.queue: deque[U] = deque()
        self.actors: list[Any] = []
        self._inflight: dict[Any, tuple[int, U]] = {}
        self._busy: set[int] = set()
        for slot in range(size):
            self.actors.append(self._start(slot))

    def _start(self, slot: int) -> Any:
        actor = self._make(slot)
        if self._on_start is not None:
            self._on_start(actor)
        return actor

    def wait_ready(self, method: str = "ping") -> None:
        """Block until every actor has started (a dead one is replaced)."""
        for slot in range(len(self.actors)):
            while True:
                try:
                    self.ray.get(getattr(self.actors[slot], method).remote())
                    break
                except self.ray.exceptions.RayActorError as e:
                    self._count_restart(slot, e)
                    self.actors[slot] = self._start(slot)

    def submit(self, units: Iterable[U], *, front: bool = False) -> None:
        if front:
            self.queue.extendleft(reversed(list(units)))
        else:
            self.queue.extend(units)

    @property
    def pending(self) -> int:
        """Units queued or in flight."""
        return len(self.queue) + len(self._inflight)

    def dispatch(self) -> None:
        """Give a queued unit to every idle actor."""
        for slot, actor in enumerate(self.actors):
            if not self.queue:
                return
            if slot in self._busy:
                continue
            unit = self.queue.popleft()
            ref = getattr(actor, self._method).remote(unit)
            self._inflight[ref] = (slot, unit)
            self._busy.add(slot)
            if self._on_dispatch is not None:
                self._on_dispatch(slot, actor, unit)

    def next_result(self, timeout: float | None = None) -> tuple[U, Any] | None:
        """The next finished ``(unit, result)``; a unit whose actor died is re-queued and ``None`` returned."""
        self.dispatch()
        if not self._inflight:
            return None
        ready, _ = self.ray.wait(list(self._inflight), num_returns=1, timeout=timeout)
        if not ready:
            return None
        ref = ready[0]
        slot, unit = self._inflight.pop(ref)
        self._busy.discard(slot)
        try:
            result = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as e:
            self._replace(slot, unit, e)
            return None
        self.stats.completed += 1
        self.dispatch()
        return unit, result

    def _replace(self, slot: int, unit: U, error: BaseException) -> None:
        self.stats.requeued += 1
        log.warning("worker %d died running unit %r (%s); replacing it and re-queueing the unit",
                    slot, self._key(unit), type(error).__name__)
        self._count_restart(slot, error)
        self.queue.appendleft(unit)
        self.actors[slot] = self._start(slot)

    def _count_restart(self, slot: int, error: BaseException) -> None:
        self.stats.restarts += 1
        if self.stats.restarts > self.max_restarts:
            raise WorkerPoolError(
                f"{self.stats.restarts} worker restarts (limit {self.max_restarts}); last error: {error!r}. "
                "Check the worker logs (ray logs) for the cause, e.g. memory or a sandbox that cannot start."
            ) from error

    def broadcast(self, method: str, *args: Any) -> list[Any]:
        """Call ``method(*args)`` on every actor (queued behind its current unit); returns the object refs."""
        return [getattr(a, method).remote(*args) for a in self.actors]

    def shutdown(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already dead
                self.ray.kill(actor)
        self.actors = []
        self._inflight.clear()
        self._busy.clear()

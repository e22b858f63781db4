"""Where a training step's rollouts and update run: one interface, a local and a Ray implementation.

The loop (:mod:`sandgym.train.loop`) is written once against :class:`Backend`:

    collect(step)            -> the step's trajectories (G samples of each of its tasks) and the rollout seconds
    update(samples, step)    -> one optimiser step on the driver's model (or data-parallel ranks that mirror it)
    publish(version)         -> the new adapter reaches whatever generates the next rollouts
    metrics(step, t_total)   -> backend-specific ``dist/*`` keys (none locally)
    sync_optimizer()         -> the driver's optimiser holds the current state (before a checkpoint)
    close()

:class:`LocalBackend` generates in this process with the policy being trained.
:class:`sandgym.train.distributed.ray_backend.RayBackend` (``[distributed] backend = "ray"``) uses Ray rollout
workers, optionally ahead of the learner (async, bounded staleness), and optionally data-parallel learner ranks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from sandgym.agents.trajectory import Trajectory
from sandgym.train import components
from sandgym.train.config import TrainConfig
from sandgym.train.domains import DomainMixer
from sandgym.train.step import Sample, StepStats, update_with_config

Learner = Callable[[list[Sample], int], StepStats]
"""``learner(samples, step)``: one optimiser step (the learning rate for ``step`` is already set)."""


class Backend(Protocol):
    label: str

    def collect(self, step: int) -> tuple[list[Trajectory], float]: ...

    def update(self, samples: list[Sample], step: int) -> StepStats: ...

    def publish(self, version: int) -> None: ...

    def metrics(self, step: int, t_total: float) -> dict[str, float]: ...

    def sync_optimizer(self) -> None: ...

    def close(self) -> None: ...


class LocalBackend:
    """Rollouts in this process with the live policy; the update on the same model (nothing to publish). Envs
    (and their sandboxes, reset in place) are kept from step to step, one pool per rollout
    (:class:`~sandgym.train.components.DomainEnvs`)."""

    label = "train"

    def __init__(self, config: TrainConfig, policy: Any, optimizer: Any, mixer: DomainMixer) -> None:
        self.config, self.policy, self.mixer = config, policy, mixer
        self.envs = components.DomainEnvs(config)
        self.update = make_learner(config, policy.model, optimizer, None, int(policy.tokenizer.pad_token_id))

    def collect(self, step: int) -> tuple[list[Trajectory], float]:
        t0 = time.perf_counter()
        tasks = self.mixer.sample(step, self.config.optim.tasks_per_step)
        trajs = components.collect(self.policy, self.envs, tasks, self.config,
                                   seed=step_seed(self.config, step), version=step)
        return trajs, time.perf_counter() - t0

    def publish(self, version: int) -> None:
        """The sampler is the model being trained: nothing to send."""

    def metrics(self, step: int, t_total: float) -> dict[str, float]:
        return {}

    def sync_optimizer(self) -> None:
        """The optimiser is the driver's own."""

    def close(self) -> None:
        self.envs.close()


def step_seed(config: TrainConfig, step: int) -> int:
    """The rollout seed of ``step`` (equal across backends, so a synchronous Ray step equals the local one)."""
    return config.seed * 100_003 + step


def make_learner(config: TrainConfig, model: Any, optimizer: Any, init_adapter: str | None, pad_id: int) -> Learner:
    """``update_with_config`` on the driver's model, or data-parallel ranks when ``learner_processes > 1``."""
    if config.distributed.learner_processes > 1:
        from sandgym.train.distributed.ddp import LearnerGroup  # Ray actors

        return LearnerGroup(config, model, optimizer, init_adapter, pad_id)

    def update(samples: list[Sample], step: int) -> StepStats:
        return update_with_config(model, optimizer, samples, config, pad_id=pad_id)

    return update

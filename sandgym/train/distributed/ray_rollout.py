"""Rollout workers: Ray actors that each hold a policy copy for generation and their own environments.

A step's tasks are cut into units (contiguous task groups, never splitting a group of G samples); a worker rolls
out a unit with the newest adapter weights it has received and tags the trajectories with that policy version.
Only the LoRA adapter travels after an update (``adapter_weights`` -> ``RolloutWorker.set_weights``), as numpy
arrays put in the object store once and shared by every worker.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sandgym.agents.trajectory import Trajectory
from sandgym.rollout.pool import import_ray
from sandgym.tasks.task import Task
from sandgym.train import components
from sandgym.train.config import TrainConfig

AdapterWeights = dict[str, np.ndarray]


@dataclass(frozen=True)
class RolloutUnit:
    """The G samples of each of ``tasks`` for training step ``step``; group ids start at ``first_group_id``."""

    step: int
    index: int
    tasks: tuple[Task, ...]
    first_group_id: int
    group_size: int
    seed: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.step, self.index)

    @property
    def episode_ids(self) -> list[str]:
        """``step/group/sample`` of every episode of the unit: the ledger's exactly-once identity."""
        return [
            episode_id(self.step, self.first_group_id + g, s)
            for g in range(len(self.tasks))
            for s in range(self.group_size)
        ]


def episode_id(step: int, group_id: int, sample_idx: int) -> str:
    return f"{step}/{group_id}/{sample_idx}"


@dataclass(frozen=True)
class UnitResult:
    trajectories: tuple[Trajectory, ...]
    policy_version: int
    worker: str
    wall_s: float

    @property
    def episode_ids(self) -> list[str]:
        step = self.trajectories[0].metadata.get("step", -1) if self.trajectories else -1
        return [episode_id(int(step), t.group_id, t.sample_idx) for t in self.trajectories]


def split_units(step: int, tasks: Sequence[Task], n_units: int, group_size: int, seed: int) -> list[RolloutUnit]:
    """Cut a step's tasks into at most ``n_units`` contiguous units; group ids equal the single-process ones."""
    n = max(1, min(n_units, len(tasks)))
    bounds = [round(i * len(tasks) / n) for i in range(n + 1)]
    return [
        RolloutUnit(step, i, tuple(tasks[bounds[i] : bounds[i + 1]]), bounds[i], group_size, seed)
        for i in range(n)
        if bounds[i + 1] > bounds[i]
    ]


def adapter_weights(model: Any) -> AdapterWeights:
    """The LoRA adapter's tensors (not the base model) as CPU numpy arrays, ready for the object store."""
    from peft import get_peft_model_state_dict

    return {k: v.detach().to("cpu", torch.float32).numpy().copy() for k, v in get_peft_model_state_dict(model).items()}


def load_adapter_weights(model: Any, weights: AdapterWeights) -> None:
    """Copy ``weights`` into ``model``'s adapter in place (the policy's merged generation copy then refreshes)."""
    from peft import set_peft_model_state_dict

    ref = next(model.parameters())
    state = {k: torch.from_numpy(np.array(v, copy=True)).to(ref.device, ref.dtype) for k, v in weights.items()}
    result = set_peft_model_state_dict(model, state)
    unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
    if unexpected:
        raise RuntimeError(f"adapter weights do not fit the worker's adapter: unexpected keys {unexpected[:3]}")


class RolloutWorker:
    """One rollout worker (wrapped with ``ray.remote`` by :func:`rollout_actor_class`)."""

    def __init__(self, config: TrainConfig, adapter: str | None, name: str, threads: int = 1) -> None:
        torch.set_num_threads(threads)
        self.config = config
        self.name = name
        self.policy = components.build_policy(config, adapter=adapter, trainable=False)
        self.policy.model.eval()
        self.envs = components.DomainEnvs(config)  # envs and sandboxes kept between units
        self.version = -1

    def set_weights(self, version: int, weights: AdapterWeights) -> int:
        """Install the adapter of policy ``version`` (older versions than the current one are ignored)."""
        if version >= self.version:
            load_adapter_weights(self.policy.model, weights)
            self.version = version
        return self.version

    def rollout(self, unit: RolloutUnit) -> UnitResult:
        """Roll out the unit's groups with the current weights; trajectories carry ``policy_version``."""
        t0 = time.perf_counter()
        trajs = components.collect(self.policy, self.envs, unit.tasks, self.config, seed=unit.seed,
                                   version=self.version, first_group_id=unit.first_group_id)
        tagged = tuple(
            dataclasses.replace(t, metadata={**t.metadata, "step": unit.step, "worker": self.name}) for t in trajs
        )
        return UnitResult(tagged, self.version, self.name, time.perf_counter() - t0)

    def ping(self) -> str:
        return self.name


def rollout_actor_class(num_cpus: float = 1.0) -> Any:
    """``RolloutWorker`` as a Ray actor class (Ray imported only here)."""
    ray = import_ray()
    return ray.remote(num_cpus=num_cpus, max_restarts=0)(RolloutWorker)

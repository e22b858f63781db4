"""The pieces the training loop wires together: policy, tasks per domain, environments, rollouts, progress."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from sandgym.agents.rollout_config import RolloutConfig
from sandgym.agents.trajectory import Trajectory
from sandgym.errors import ConfigError
from sandgym.rollout.progress import progress
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task
from sandgym.train.config import DomainConfig, TrainConfig

log = logging.getLogger(__name__)


def build_policy(config: TrainConfig, *, adapter: str | None, trainable: bool = True) -> Any:
    """An :class:`~sandgym.agents.hf.HFPolicy` with a fresh LoRA adapter, or ``adapter`` loaded for training."""
    from sandgym.agents.hf import HFPolicy, LoraSpec

    m = config.model
    lora = LoraSpec(r=m.lora_r, alpha=m.lora_alpha, dropout=m.lora_dropout, target_modules=m.target_modules or None)
    policy = HFPolicy(m.name, lora=lora, adapter=adapter, generation_weights=m.generation_weights)
    if trainable:
        policy.model.train()
        if config.optim.activation_checkpointing:
            from sandgym.train.shared_prefix import set_activation_checkpointing  # torch, transformers

            set_activation_checkpointing(policy.model, True)
    return policy


def domain_name(d: DomainConfig) -> str:
    return d.name or d.suite.split(":")[0].split("/")[0]


def domain_tasks(config: TrainConfig) -> dict[str, list[Task]]:
    """Load each configured domain's tasks (generated suites are cut to ``n_tasks``)."""

    out: dict[str, list[Task]] = {}
    for i, d in enumerate(config.domains.mix):
        tasks = load_suite(d.suite, n=d.n_tasks, seed=config.seed, difficulty=d.difficulty)
        if not tasks:
            raise ConfigError(f"domains.mix[{i}].suite={d.suite!r} has no tasks; check `sandgym tasks list`")
        out.setdefault(domain_name(d), []).extend(tasks)
    return out


def env_factory(config: TrainConfig) -> Callable[[], Any]:
    """A callable making one fresh environment of ``[rollout]`` (tasks are passed per episode through ``reset``)."""
    return config.rollout.env_factory()


def rollout_config(config: TrainConfig, *, seed: int, version: int) -> RolloutConfig:
    """The ``RolloutConfig`` of training rollouts (``[rollout]`` plus the step's seed and policy version)."""
    return config.rollout.rollout_config(seed, policy_version=version)


def collect(
    policy: Any,
    make_env: Callable[[], Any],
    tasks: Sequence[Task],
    config: TrainConfig,
    *,
    seed: int,
    version: int,
    first_group_id: int = 0,
) -> list[Trajectory]:
    """Roll out ``group_size`` samples of every task; trajectories carry their group id."""
    from sandgym.agents.rollout import rollout

    rc = rollout_config(config, seed=seed, version=version)
    return rollout(policy, make_env, list(tasks), group_size=config.algorithm.group_size, config=rc,
                   first_group_id=first_group_id)


def set_lr(optimizer: Any, config: TrainConfig, step: int) -> None:
    """Constant learning rate after a linear warm-up of ``optim.warmup_steps``."""
    warm = config.optim.warmup_steps
    scale = min(1.0, (step + 1) / warm) if warm > 0 else 1.0
    for group in optimizer.param_groups:
        group["lr"] = config.optim.lr * scale


__all__ = ["build_policy", "collect", "domain_name", "domain_tasks", "env_factory", "progress",
           "rollout_config", "set_lr"]

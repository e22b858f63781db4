"""The pieces the training loop wires together: policy, tasks per domain, environments, rollouts, progress."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sandgym.agents.env_pool import EnvPool
from sandgym.agents.rollout_config import RolloutConfig
from sandgym.agents.trajectory import Trajectory
from sandgym.errors import ConfigError
from sandgym.rollout.progress import progress
from sandgym.rollout.spec import RolloutSpec
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task
from sandgym.train.config import TrainConfig, domain_name, domain_rollout

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


DOMAIN_KEY = "train_domain"
"""``Task.metadata`` key naming the training domain a task was loaded for (:func:`domain_tasks`): its rollout
(:class:`DomainEnvs`) and the name its trajectories are normalised and logged under."""


def domain_tasks(config: TrainConfig) -> dict[str, list[Task]]:
    """Load each configured domain's tasks (generated suites are cut to ``n_tasks``), each tagged with its domain's
    name in ``metadata["train_domain"]`` (it travels with the task to Ray workers)."""

    out: dict[str, list[Task]] = {}
    for i, d in enumerate(config.domains.mix):
        tasks = load_suite(d.suite, n=d.n_tasks, seed=config.seed, difficulty=d.difficulty)
        if not tasks:
            raise ConfigError(f"domains.mix[{i}].suite={d.suite!r} has no tasks; check `sandgym tasks list`")
        name = domain_name(d)
        out.setdefault(name, []).extend(replace(t, metadata={**t.metadata, DOMAIN_KEY: name}) for t in tasks)
    return out


def domain_rollouts(config: TrainConfig) -> dict[str, RolloutSpec]:
    """Each domain's rollout: ``[rollout]``, with the keys of the domain's ``[domains.mix.rollout]`` replaced."""
    return {domain_name(d): domain_rollout(config, d) for d in config.domains.mix}


def task_domain(task: Task) -> str:
    """The training domain ``task`` was loaded for ("" for a task from elsewhere: it gets ``[rollout]``)."""
    return str(task.metadata.get(DOMAIN_KEY, ""))


def env_factory(config: TrainConfig) -> Callable[[], Any]:
    """A callable making one fresh environment of ``[rollout]`` (tasks are passed per episode through ``reset``)."""
    return config.rollout.env_factory()


def rollout_config(config: TrainConfig, *, seed: int, version: int) -> RolloutConfig:
    """The ``RolloutConfig`` of ``[rollout]`` (a domain with its own table: :class:`DomainEnvs`) plus the step's seed
    and policy version."""
    return config.rollout.rollout_config(seed, policy_version=version)


class DomainRollouts:
    """Which rollout each task of a run gets: its domain's own (``[domains.mix.rollout]``: its budgets, tools, env
    kwargs), else ``[rollout]`` (key "")."""

    def __init__(self, config: TrainConfig) -> None:
        self.index = {domain_name(d): i for i, d in enumerate(config.domains.mix) if d.rollout}  # the first entry
        self.specs = {name: spec for name, spec in domain_rollouts(config).items() if name in self.index}
        self.specs[""] = config.rollout

    def key(self, task: Task) -> str:
        """Which rollout ``task`` gets: its domain's own, else ``[rollout]`` ("")."""
        return self.key_of(task_domain(task))

    def key_of(self, domain: str) -> str:
        """The rollout of the training domain named ``domain``: its own, else ``[rollout]`` ("")."""
        return domain if domain in self.specs else ""

    def where(self, key: str) -> str:
        """The config table of rollout ``key``, for error messages."""
        return f"domains.mix[{self.index[key]}].rollout" if key else "rollout"

    def runs(self, tasks: Sequence[Task]) -> list[tuple[int, str, list[Task]]]:
        """``tasks`` cut into maximal consecutive runs with one rollout: (index of the first, key, tasks)."""
        out: list[tuple[int, str, list[Task]]] = []
        for i, task in enumerate(tasks):
            key = self.key(task)
            if out and out[-1][1] == key:
                out[-1][2].append(task)
            else:
                out.append((i, key, [task]))
        return out


class DomainEnvs(DomainRollouts):
    """The environments of a run's rollouts: one :class:`~sandgym.agents.env_pool.EnvPool` per rollout of
    :class:`DomainRollouts`. Envs and their sandboxes are kept from step to step."""

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(config)
        self.pools = {key: EnvPool(spec.env_factory()) for key, spec in self.specs.items()}

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()


def collect(
    policy: Any,
    envs: DomainEnvs,
    tasks: Sequence[Task],
    config: TrainConfig,
    *,
    seed: int,
    version: int,
    first_group_id: int = 0,
) -> list[Trajectory]:
    """Roll out ``group_size`` samples of every task, each in its domain's rollout; trajectories carry their group
    id (``first_group_id`` + the task's index, so the sampling seeds do not depend on how the tasks are cut) and
    their training domain's name."""
    from sandgym.agents.rollout import rollout

    out: list[Trajectory] = []
    for start, key, run in envs.runs(tasks):
        rc = envs.specs[key].rollout_config(seed, policy_version=version)
        out += rollout(policy, envs.pools[key], run, group_size=config.algorithm.group_size, config=rc,
                       first_group_id=first_group_id + start)
    return named_by_domain(out, tasks, first_group_id)


def named_by_domain(trajs: Sequence[Trajectory], tasks: Sequence[Task], first_group_id: int = 0) -> list[Trajectory]:
    """Each trajectory (of ``tasks[group_id - first_group_id]``) under its training domain's name
    (``domains.mix.name``, what normalisation and logging use); a task from elsewhere keeps its own domain."""
    out = []
    for t in trajs:
        name = task_domain(tasks[t.group_id - first_group_id])
        out.append(t if not name or t.domain == name else replace(t, domain=name))
    return out


def set_lr(optimizer: Any, config: TrainConfig, step: int) -> None:
    """Constant learning rate after a linear warm-up of ``optim.warmup_steps``."""
    warm = config.optim.warmup_steps
    scale = min(1.0, (step + 1) / warm) if warm > 0 else 1.0
    for group in optimizer.param_groups:
        group["lr"] = config.optim.lr * scale


__all__ = ["DOMAIN_KEY", "DomainEnvs", "DomainRollouts", "build_policy", "collect", "domain_name", "domain_rollouts", "domain_tasks",
           "env_factory", "named_by_domain", "progress", "rollout_config", "set_lr", "task_domain"]

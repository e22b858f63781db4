"""Advantages: the group estimators (pure functions from the rewards of G samples per task to one advantage per
sample), per-turn returns, and the step's per-token advantages built from trajectories with them.

>>> import torch
>>> [round(x, 4) for x in grpo_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 0, 0])).tolist()]
[1.0, -1.0, 1.0, -1.0]
>>> grpo_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), scale_by_std=False).tolist()
[0.5, -0.5]
>>> [round(x, 4) for x in rloo_advantages(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0, 0, 0])).tolist()]
[1.0, -0.5, -0.5]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sandgym.agents.trajectory import Trajectory
from sandgym.train.config import TrainConfig
from sandgym.train.domains import DomainMixer

ADVANTAGE_ESTIMATORS = ("grpo", "dr_grpo", "rloo")


def _group_mean(rewards: torch.Tensor, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample group mean, group size and the inverse index (shapes [N], [N], [N])."""
    _, inverse, counts = torch.unique(groups, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=rewards.dtype).index_add_(0, inverse, rewards)
    mean = (sums / counts.to(rewards.dtype))[inverse]
    return mean, counts[inverse].to(rewards.dtype), inverse


def grpo_advantages(
    rewards: torch.Tensor, groups: torch.Tensor, *, scale_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """GRPO: ``r - mean(group)``, divided by the group's (population) std when ``scale_by_std``.

    ``scale_by_std=False`` is Dr.GRPO (no std division, which biases towards easy/hard groups otherwise).
    Shapes: rewards [N] float, groups [N] int (samples of one task share a group id) -> [N].
    """
    mean, _, inverse = _group_mean(rewards, groups)
    adv = rewards - mean
    if scale_by_std:
        sq = torch.zeros(int(inverse.max()) + 1, dtype=rewards.dtype).index_add_(0, inverse, adv * adv)
        counts = torch.bincount(inverse).to(rewards.dtype)
        std = torch.sqrt(sq / counts)[inverse]
        adv = adv / (std + eps)
    return adv


def rloo_advantages(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """RLOO: each sample's reward minus the mean of the OTHER samples of its group.

    Equals ``G / (G - 1) * (r - mean)``; a group of one sample gets advantage 0.
    """
    mean, counts, _ = _group_mean(rewards, groups)
    scale = torch.where(counts > 1, counts / (counts - 1).clamp(min=1), torch.zeros_like(counts))
    return scale * (rewards - mean)


def compute_advantages(name: str, rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """Dispatch by estimator name (one of ``ADVANTAGE_ESTIMATORS``)."""
    if name == "grpo":
        return grpo_advantages(rewards, groups, scale_by_std=True)
    if name == "dr_grpo":
        return grpo_advantages(rewards, groups, scale_by_std=False)
    if name == "rloo":
        return rloo_advantages(rewards, groups)
    raise ValueError(f"advantage estimator {name!r} is not one of {ADVANTAGE_ESTIMATORS}")


def per_step_returns(turn_rewards: Sequence[float]) -> list[float]:
    """Return-to-go of each turn (undiscounted): ``G_t = sum_{k >= t} r_k``.

    >>> per_step_returns([0.0, 0.5, 1.0])
    [1.5, 1.5, 1.0]
    """
    out: list[float] = []
    acc = 0.0
    for r in reversed(list(turn_rewards)):
        acc += r
        out.append(acc)
    return out[::-1]


def per_step_advantages(
    turn_rewards: Sequence[Sequence[float]], groups: Sequence[int], *, scale_by_std: bool = True, eps: float = 1e-6
) -> list[list[float]]:
    """Per-turn advantages: each turn's return-to-go minus the group's mean return-to-go at the same turn index,
    divided by the std of all returns in the group when ``scale_by_std``.

    ``turn_rewards[i][t]`` is the reward of trajectory i's turn t (the final reward sits on the last turn;
    intermediate checkable states add earlier terms). Returns one advantage per turn of each trajectory.

    >>> per_step_advantages([[0.0, 1.0], [0.0, 0.0]], [0, 0], scale_by_std=False)
    [[0.5, 0.5], [-0.5, -0.5]]
    """
    returns = [per_step_returns(r) for r in turn_rewards]
    out: list[list[float]] = [[] for _ in returns]
    for g in set(groups):
        members = [i for i, gi in enumerate(groups) if gi == g]
        flat = [x for i in members for x in returns[i]]
        std = float(torch.tensor(flat, dtype=torch.float64).std(unbiased=False)) if len(flat) > 1 else 0.0
        depth = max(len(returns[i]) for i in members)
        for t in range(depth):
            at_t = [returns[i][t] for i in members if t < len(returns[i])]
            mean_t = sum(at_t) / len(at_t)
            for i in members:
                if t < len(returns[i]):
                    a = returns[i][t] - mean_t
                    out[i].append(a / (std + eps) if scale_by_std else a)
    return out


def compute_batch_advantages(trajs: Sequence[Trajectory], mixer: DomainMixer, config: TrainConfig) -> list[float]:
    """Per-trajectory advantages: per-domain normalised rewards, then the configured group estimator.

    Groups are the G samples of one task in this batch (``group_id``); a group left with fewer than two valid
    samples (after infra failures were dropped) gets advantage 0.
    """
    if not trajs:
        return []
    _observe(trajs, mixer)
    rewards = [mixer.stats[t.domain].normalize(t.reward) if config.domains.normalize else t.reward for t in trajs]
    groups = torch.tensor([t.group_id for t in trajs])
    adv = compute_advantages(config.algorithm.name, torch.tensor(rewards, dtype=torch.float64), groups)
    sizes = {g: int((groups == g).sum()) for g in set(groups.tolist())}
    return [0.0 if sizes[t.group_id] < 2 else float(a) for t, a in zip(trajs, adv, strict=True)]


def token_advantages(trajs: Sequence[Trajectory], mixer: DomainMixer, config: TrainConfig) -> list[list[float]]:
    """One advantage per token of each trajectory (0 on tokens the model did not sample):
    ``algorithm.advantage_mode = "trajectory"`` spreads the trajectory's advantage over its sampled tokens,
    ``"per_step"`` gives each turn's tokens that turn's return-to-go advantage."""
    if config.algorithm.advantage_mode == "per_step":
        return per_step_token_advantages(trajs, mixer, config)
    return [[a * m for m in t.action_mask]
            for t, a in zip(trajs, compute_batch_advantages(trajs, mixer, config), strict=True)]


def turn_rewards(t: Trajectory) -> list[float]:
    """Per-turn rewards: the env's ``turn_rewards`` when it recorded them, else the final reward on the last turn."""
    recorded = t.metadata.get("turn_rewards")
    if recorded is not None and len(recorded) == t.num_turns:
        return [float(x) for x in recorded]
    return [0.0] * (t.num_turns - 1) + [t.reward] if t.num_turns else []


def per_step_token_advantages(trajs: Sequence[Trajectory], mixer: DomainMixer, config: TrainConfig) -> list[list[float]]:
    """``per_step`` mode: turn rewards scaled by the domain's reward std, returns-to-go advantages per turn."""
    _observe(trajs, mixer)
    rewards = []
    for t in trajs:
        scale = mixer.stats[t.domain].std if config.domains.normalize else 1.0
        rewards.append([r / (scale if scale > 1e-4 else 1.0) for r in turn_rewards(t)])
    per_turn = per_step_advantages(rewards, [t.group_id for t in trajs], scale_by_std=config.algorithm.name == "grpo")
    out = []
    for t, adv in zip(trajs, per_turn, strict=True):
        tokens: list[float] = []
        for turn, a in zip(t.turns, adv, strict=True):
            tokens += [0.0] * len(turn.prompt_token_ids) + [a] * len(turn.completion_token_ids)
        out.append(tokens)
    return out


def _observe(trajs: Sequence[Trajectory], mixer: DomainMixer) -> None:
    """Feed each domain's rewards and successes of this batch to its running statistics."""
    for domain in {t.domain for t in trajs}:
        ds = [t for t in trajs if t.domain == domain]
        mixer.observe(domain, [t.reward for t in ds], [t.success for t in ds])

"""The learner's batch from a step's trajectories (one function for every backend): infra failures dropped,
groups without reward spread skipped, per-step credit per turn."""

from __future__ import annotations

import pytest

from sandgym.agents.trajectory import Trajectory, Turn
from sandgym.train.config import load_config
from sandgym.train.domains import DomainMixer
from sandgym.train.step import batch_samples


def _traj(turn_rewards: list[float], reward: float, group: int, infra: bool = False) -> Trajectory:
    turns = [Turn((1, 2), (3, 4, 5), (-0.1, -0.2, -0.3), "a", "obs"), Turn((6,), (7, 8), (-0.4, -0.5), "b")]
    return Trajectory.from_turns(turns, task_id=f"t{group}", domain="coding", family="f", split="train",
                                 reward=reward, success=reward > 0, group_id=group, infra_failure=infra,
                                 metadata={"turn_rewards": turn_rewards})


def _batch(mode: str):
    cfg = load_config(None, [f'algorithm.advantage_mode="{mode}"', 'distributed.backend="ray"',
                             "domains.normalize=false"])
    trajs = [_traj([1.0, 0.0], 0.0, 0), _traj([0.0, 1.0], 1.0, 0),
             _traj([0.0, 1.0], 1.0, 1), _traj([0.0, 1.0], 1.0, 1),  # no spread: skipped
             _traj([0.0, 0.0], 0.0, 0, infra=True)]  # infra failure: dropped
    mixer = lambda: DomainMixer(tasks={"coding": []}, weights={"coding": 1.0})  # noqa: E731
    return batch_samples(trajs, mixer(), cfg)


@pytest.mark.parametrize("mode", ["trajectory", "per_step"])
def test_infra_failures_are_dropped_and_groups_without_spread_skipped(mode):
    valid, samples = _batch(mode)
    assert len(valid) == 4 and not any(t.infra_failure for t in valid)
    assert len(samples) == 2 and all(s.token_ids == valid[0].token_ids for s in samples)


def test_per_step_credit_reaches_the_learner():
    _, samples = _batch("per_step")
    # returns-to-go: both group members have 1.0 from turn 1 on (no credit there); only the second keeps it on
    # turn 2, so the first one's turn 2 alone is pushed down. Trajectory credit spreads one value over both turns.
    first = samples[0]
    turn1 = [a for a, m in zip(first.advantages[2:5], first.action_mask[2:5], strict=True) if m]
    turn2 = [a for a, m in zip(first.advantages[6:8], first.action_mask[6:8], strict=True) if m]
    assert len(set(turn1)) == 1 and len(set(turn2)) == 1 and turn1[0] == 0 > turn2[0]
    _, flat = _batch("trajectory")
    assert len({a for a, m in zip(flat[0].advantages, flat[0].action_mask, strict=True) if m}) == 1

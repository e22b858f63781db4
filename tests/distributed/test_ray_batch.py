"""The Ray loop builds its learner batch exactly like the single-process loop, per-step advantages included."""

from __future__ import annotations

import pytest

from sandgym.agents.trajectory import Trajectory, Turn
from sandgym.train.config import load_config
from sandgym.train.distributed import ray_loop
from sandgym.train.domains import DomainMixer
from sandgym.train.loop import batch_samples


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
    return ray_loop._samples(trajs, mixer(), cfg), batch_samples(trajs, mixer(), cfg)


@pytest.mark.parametrize("mode", ["trajectory", "per_step"])
def test_ray_batch_equals_the_single_process_batch(mode):
    (valid, samples), (ref_valid, ref_samples) = _batch(mode)
    assert valid == ref_valid and samples == ref_samples
    assert len(valid) == 4 and len(samples) == 2


def test_per_step_credit_reaches_the_ray_learner():
    (_, samples), _ = _batch("per_step")
    # returns-to-go: both group members have 1.0 from turn 1 on (no credit there); only the second keeps it on
    # turn 2, so the first one's turn 2 alone is pushed down. Trajectory credit spreads one value over both turns.
    first = samples[0]
    turn1 = [a for a, m in zip(first.advantages[2:5], first.action_mask[2:5], strict=True) if m]
    turn2 = [a for a, m in zip(first.advantages[6:8], first.action_mask[6:8], strict=True) if m]
    assert len(set(turn1)) == 1 and len(set(turn2)) == 1 and turn1[0] == 0 > turn2[0]
    (_, flat), _ = _batch("trajectory")
    assert len({a for a, m in zip(flat[0].advantages, flat[0].action_mask, strict=True) if m}) == 1

"""Trajectory invariants and the JSONL round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandgym.agents.trajectory import Trajectory, TrajectoryError, Turn, load_jsonl, save_jsonl


def make(**kw: object) -> Trajectory:
    turns = [
        Turn((1, 2, 3), (4, 5), (-0.5, -1.25), "ab", "obs one"),
        Turn((6, 7), (8,), (-2.0,), "c", "", truncated=True),
    ]
    fields = dict(
        task_id="t/1", domain="coding", family="demo", split="train", reward=1.0,
        reward_components={"correctness@v1": 1.0}, runtime={"wall_s": 0.5, "inf": float("inf")}, success=True,
        failure_mode="success", truncated=True, truncation_reason="max_new_tokens", terminated=False,
        infra_failure=False, group_id=3, sample_idx=2, policy_version=7, retokenization_mismatch=True,
        metadata={"seed": 11, "outcome": {"tests_passed": 2}},
    )
    fields.update(kw)
    return Trajectory.from_turns(turns, **fields)  # type: ignore[arg-type]


def test_from_turns_concatenates_parts() -> None:
    t = make()
    assert t.token_ids == (1, 2, 3, 4, 5, 6, 7, 8)
    assert t.action_mask == (0, 0, 0, 1, 1, 0, 0, 1)
    assert t.logprobs == (0.0, 0.0, 0.0, -0.5, -1.25, 0.0, 0.0, -2.0)
    assert (t.num_turns, t.num_generated_tokens, t.num_tokens, t.completion_text) == (2, 3, 8, "abc")


def test_jsonl_round_trip(tmp_path: Path) -> None:
    trajs = [make(), make(task_id="t/2", sample_idx=3, truncated=False, truncation_reason=None)]
    path = tmp_path / "sub" / "trajs.jsonl"
    save_jsonl(trajs, path)
    assert load_jsonl(path) == trajs
    assert len(path.read_text().splitlines()) == 2


def test_text_only_trajectory_is_valid() -> None:
    t = Trajectory.from_turns([Turn((), (), (), "hello", "world")], task_id="x", domain="d", family="f", split="train", reward=0.0)
    assert not t.has_tokens and t.num_generated_tokens == 0
    assert Trajectory.from_json(t.to_json()) == t


def test_inconsistent_lengths_are_rejected() -> None:
    with pytest.raises(TrajectoryError, match="log-probs"):
        Turn((1,), (2, 3), (-1.0,), "x")
    with pytest.raises(TrajectoryError, match="same length"):
        Trajectory("x", "d", "f", "train", (), (1, 2), (0,), (0.0, 0.0), 0.0)
    with pytest.raises(TrajectoryError, match="truncation_reason"):
        make(truncation_reason=None)


def test_load_reports_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"task_id": "x"}\n')
    with pytest.raises(TrajectoryError, match="bad.jsonl:1"):
        load_jsonl(path)

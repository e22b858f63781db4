"""Trajectory invariants and the JSONL round trip (with its typed outcome; old flat outcomes are converted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandgym.agents.trajectory import Trajectory, TrajectoryError, Turn, load_jsonl, save_jsonl
from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade, SandboxRuntime

OUTCOME = EpisodeOutcome(
    task_id="t/1", domain="coding", family="demo", grade=Grade(tests_passed=2, tests_expected=2, wall_s=0.25),
    actions=Actions(turns=2, submitted=True, tool_calls=2), runtime=SandboxRuntime(exec_calls=3, sandbox_wall_s=0.5),
)


def make(**kw: object) -> Trajectory:
    turns = [
        Turn((1, 2, 3), (4, 5), (-0.5, -1.25), "ab", "obs one"),
        Turn((6, 7), (8,), (-2.0,), "c", "", truncated=True),
    ]
    fields = dict(
        task_id="t/1", domain="coding", family="demo", split="train", reward=1.0,
        reward_components={"correctness@v1": 1.0}, runtime={"wall_s": 0.5, "inf": float("inf")},
        truncated=True, truncation_reason="max_new_tokens", terminated=False,
        group_id=3, sample_idx=2, policy_version=7, retokenization_mismatch=True,
        metadata={"seed": 11}, outcome=OUTCOME,
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
    trajs = [make(), make(task_id="t/2", sample_idx=3, truncated=False, truncation_reason=None),
             make(task_id="t/3", outcome=None, success=False, failure_mode="budget")]
    path = tmp_path / "sub" / "trajs.jsonl"
    save_jsonl(trajs, path)
    back = load_jsonl(path)
    assert back == trajs
    assert back[0].outcome == OUTCOME and isinstance(back[0].outcome.grade, Grade)
    assert (back[0].success, back[0].failure_mode) == (True, "success") and back[2].outcome is None
    assert len(path.read_text().splitlines()) == 2 + 1
    logged = tmp_path / "trajectories.jsonl"  # as the training logger writes it: {"step": N, **to_json()}
    logged.write_text("".join(json.dumps({"step": 3, **t.to_json()}) + "\n" for t in trajs))
    assert load_jsonl(logged) == trajs


def test_outcome_decides_success_and_failure_mode() -> None:
    assert (make().success, make().failure_mode) == (True, "success")  # copied from the outcome
    failed = EpisodeOutcome(grade=Grade(tests_passed=1, tests_expected=2), actions=Actions(turns=1, submitted=True))
    t = make(outcome=failed)
    assert (t.success, t.failure_mode, t.infra_failure) == (False, "wrong_answer", False)
    with pytest.raises(TrajectoryError, match="disagree with its outcome"):
        make(success=True, failure_mode="success", outcome=failed)


def _flat(outcome: EpisodeOutcome) -> dict:
    """The flat outcome format that trajectories.jsonl files of earlier runs hold in metadata["outcome"]."""
    g, a, r = outcome.grade, outcome.actions, outcome.runtime
    return {"task_id": outcome.task_id, "domain": outcome.domain, "family": outcome.family, "verifier_kind": g.kind,
            "tests_passed": g.tests_passed, "tests_expected": g.tests_expected, "traps_passed": g.traps_passed,
            "traps_expected": g.traps_expected, "answer_matched": g.answer_matched, "script_score": g.script_score,
            "grader_exceptions": g.grader_exceptions, "malformed_calls": a.malformed_calls,
            "unknown_tools": a.unknown_tools, "bad_args": a.bad_args, "no_call_turns": a.no_call_turns,
            "tool_calls": a.tool_calls, "code_actions": a.code_actions, "tool_errors": a.tool_errors,
            "exceptions": r.exceptions, "timeouts": r.timeouts, "ooms": r.ooms, "sandbox_wall_s": r.sandbox_wall_s,
            "turns": a.turns, "submitted": a.submitted, "truncation": outcome.truncation,
            "infra_failure": outcome.infra_failure, "task_error": outcome.task_error,
            "failure_mode": outcome.failure_mode, "signals": dict(g.signals), "intermediate_matched": 0,
            "intermediate_expected": 0}


def test_old_flat_trajectories_load_converted(tmp_path: Path) -> None:
    """A trajectories.jsonl line of an earlier run: no "outcome" key, the outcome flat in metadata."""
    old = make().to_json()
    del old["outcome"]
    old["metadata"] = {"seed": 11, "outcome": _flat(OUTCOME)}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (t,) = load_jsonl(path)
    assert t.metadata == {"seed": 11}  # the outcome moved out of the metadata, typed
    assert t.outcome is not None and t.outcome.grade.tests_passed == 2 and t.outcome.actions.tool_calls == 2
    assert t.outcome.runtime.sandbox_wall_s == 0.5 and t.outcome.runtime.exec_calls == 0  # not recorded then
    assert (t.success, t.failure_mode) == (True, "success")
    old["metadata"]["outcome"]["failure_mode"] = "timeout"  # a stored verdict the outcome does not give
    path.write_text(json.dumps(old) + "\n")
    with pytest.raises(TrajectoryError, match=r"old.jsonl:1: .*stored \{'failure_mode': 'timeout'\}"):
        load_jsonl(path)


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

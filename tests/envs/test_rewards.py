"""Versioned rewards: golden cases, change detection, weights, failure modes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade, SandboxRuntime
from sandgym.envs.rewards import (
    GOLDEN_DIR,
    REWARDS,
    RewardConfig,
    check_golden,
    compute_rewards,
    register_reward,
)
from sandgym.errors import ConfigError


def test_golden_cases_match_every_reward_version() -> None:
    assert check_golden() == []


def test_rewards_check_command_passes() -> None:
    proc = subprocess.run([sys.executable, "-m", "sandgym", "rewards", "check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


def test_a_changed_reward_is_detected_and_named() -> None:
    changed = dict(REWARDS)
    changed["format@v1"] = lambda o, cfg: -0.5 * min(1.0, o.actions.format_errors / max(o.actions.turns, 1))
    problems = check_golden(rewards=changed)
    assert problems and all("format@v1 changed on golden case" in p for p in problems)
    assert any("coding_partial_format_errors" in p for p in problems)


def test_rewards_check_exits_1_naming_reward_and_case(tmp_path) -> None:
    case = json.loads((GOLDEN_DIR / "coding_solved_clean.json").read_text())
    case["expected"]["correctness@v1"] = 0.5
    for path in GOLDEN_DIR.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "coding_solved_clean.json").write_text(json.dumps(case))
    proc = subprocess.run([sys.executable, "-m", "sandgym", "rewards", "check", "--golden", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "correctness@v1 changed on golden case coding_solved_clean" in proc.stderr


def test_a_reward_without_golden_case_fails_the_check() -> None:
    extra = dict(REWARDS)
    extra["brevity@v1"] = lambda o, cfg: 0.0
    assert any("brevity@v1 has no golden case" in p for p in check_golden(rewards=extra))


def test_register_reward_requires_versions_and_refuses_redefinition() -> None:
    with pytest.raises(ValueError, match="name@vN"):
        register_reward("correctness")
    with pytest.raises(ValueError, match="new version"):
        register_reward("correctness@v1")(lambda o, c: 0.0)


def test_weighted_sum_and_infra_zero() -> None:
    o = EpisodeOutcome(grade=Grade(tests_passed=2, tests_expected=4), actions=Actions(turns=2, malformed_calls=1))
    total, parts = compute_rewards(o, RewardConfig())
    assert parts["correctness@v1"] == 0.5 and parts["format@v1"] == -0.5
    assert total == pytest.approx(0.5 - 0.05)
    solved = Grade(tests_passed=4, tests_expected=4)
    assert compute_rewards(EpisodeOutcome(grade=solved, infra_failure=True))[0] == 0.0


def test_reward_config_errors_name_the_fix() -> None:
    with pytest.raises(ConfigError, match="choose from"):
        RewardConfig(weights={"speed": 1.0})
    with pytest.raises(ConfigError, match="finite"):
        RewardConfig(weights={"correctness": float("nan")})
    assert "correctness@v1" in RewardConfig(weights={"correctness": 1.0}).weights


FAILED = Grade(tests_expected=3)
SOLVED = Grade(tests_passed=3, tests_expected=3)


@pytest.mark.parametrize(
    "outcome, mode",
    [(EpisodeOutcome(grade=SOLVED), "success"),
     (EpisodeOutcome(grade=FAILED, runtime=SandboxRuntime(ooms=1)), "memory"),
     (EpisodeOutcome(grade=FAILED, runtime=SandboxRuntime(timeouts=1)), "timeout"),
     (EpisodeOutcome(grade=FAILED, actions=Actions(malformed_calls=2, tool_calls=1)), "malformed_tool_call"),
     (EpisodeOutcome(grade=FAILED, actions=Actions(tool_calls=2), runtime=SandboxRuntime(exceptions=1)),
      "runtime_exception"),
     (EpisodeOutcome(grade=FAILED, actions=Actions(tool_calls=4), truncation="max_turns"), "budget"),
     (EpisodeOutcome(grade=FAILED, actions=Actions(tool_errors=2, tool_calls=3, submitted=True)), "tool_error"),
     (EpisodeOutcome(grade=FAILED, actions=Actions(tool_calls=3, submitted=True)), "wrong_answer"),
     (EpisodeOutcome(grade=SOLVED, infra_failure=True), "infra"),
     (EpisodeOutcome(grade=Grade(tests_passed=3, tests_expected=3, task_error="no module x"), infra_failure=True),
      "task_error")],
)
def test_failure_modes(outcome: EpisodeOutcome, mode: str) -> None:
    assert outcome.failure_mode == mode
    assert outcome.success == (mode == "success")


def test_outcome_round_trips_and_rejects_unknown_fields() -> None:
    o = EpisodeOutcome(task_id="x", grade=Grade(tests_passed=1, tests_expected=2), truncation="max_turns")
    assert EpisodeOutcome.from_dict(json.loads(json.dumps(o.to_dict()))) == o
    with pytest.raises(ValueError, match="no field"):
        EpisodeOutcome.from_dict({"grade": {"tests_pased": 1}})
    with pytest.raises(ValueError, match="no field"):
        EpisodeOutcome.from_dict({"tests_passed": 1, "tests_pased": 1})

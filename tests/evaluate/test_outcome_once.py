"""An episode's result is decided once, by the env's ``EpisodeOutcome``: the rollout engine (agents/_episode.py),
the trajectory and the evaluation row (evaluate/episodes.py) read ``success``/``failure_mode`` from it.

Each case hands the engine an outcome whose verdict could not be derived from anything else the env reports (the
reward, the truncation, ``info["infra_failure"]``), and checks that the verdict reaches the row unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import pytest

from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.rollout import RolloutConfig, rollout
from sandgym.envs.demo_tasks import demo_tasks
from sandgym.envs.outcome import Actions, EpisodeOutcome, FailureMode, Grade, SandboxRuntime
from sandgym.evaluate.episodes import EpisodeRow
from tests.agents.fakes import FakeTask, OkAgent

TASK = demo_tasks()[0]


@dataclass(frozen=True)
class Decided(EpisodeOutcome):
    """An outcome whose verdict is set by the test: a reader that recomputed it would get the parent's answer."""

    verdict: tuple[bool, str] = (False, "wrong_answer")

    @property
    def success(self) -> bool:
        return self.verdict[0]

    @property
    def failure_mode(self) -> FailureMode:
        return self.verdict[1]  # type: ignore[return-value]


class OneStepEnv(gym.Env):
    """Ends on the first step with reward 0.5 and the given outcome; says nothing else about success."""

    def __init__(self, outcome: EpisodeOutcome) -> None:
        self.outcome = outcome

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return "go", {"messages": [{"role": "user", "content": "go"}], "tools": []}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        info = {"messages": [], "reward_components": {"correctness@v1": 0.5}, "runtime": {},
                "infra_failure": self.outcome.infra_failure, "outcome": self.outcome}
        return "", 0.5, True, False, info


def _row(outcome: EpisodeOutcome) -> EpisodeRow:
    (traj,) = rollout(ScriptedPolicy(OkAgent), lambda: OneStepEnv(outcome), [FakeTask("t", 1)],
                      config=RolloutConfig(max_turns=2, seed=1))
    assert traj.outcome is outcome  # the env's object, carried typed
    return EpisodeRow.from_trajectory(traj, TASK, seed=0)


@pytest.mark.parametrize("verdict", [(True, "success"), (False, "timeout"), (False, "memory"), (False, "budget")])
def test_engine_and_rows_read_the_outcomes_verdict(verdict: tuple[bool, str]) -> None:
    half = Grade(tests_passed=1, tests_expected=2)  # by itself: wrong_answer, never a success
    row = _row(Decided(grade=half, actions=Actions(turns=1, submitted=True), verdict=verdict))
    assert (row.success, row.failure_mode) == verdict


def test_a_changed_outcome_changes_the_answer() -> None:
    solved = EpisodeOutcome(grade=Grade(tests_passed=2, tests_expected=2), actions=Actions(turns=1, submitted=True))
    row = _row(solved)
    assert (row.success, row.failure_mode, row.infra_failure) == (True, "success", False)
    oom = EpisodeOutcome(grade=Grade(tests_expected=2), actions=Actions(turns=1), runtime=SandboxRuntime(ooms=1))
    assert (_row(oom).success, _row(oom).failure_mode) == (False, "memory")


def test_a_task_error_is_an_infra_failure_with_its_own_mode() -> None:
    broken = EpisodeOutcome(grade=Grade(tests_passed=2, tests_expected=2, task_error="No module named 'xyz'"),
                            infra_failure=True)
    row = _row(broken)
    assert (row.success, row.failure_mode, row.infra_failure) == (False, "task_error", True)
    assert _row(EpisodeOutcome(grade=Grade(tests_passed=2, tests_expected=2), infra_failure=True)).failure_mode == "infra"

"""Per-turn credit for checkable intermediate states (``intermediate@v1``, ``ToolEnv(turn_rewards=True)``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.rollout import RolloutConfig, rollout
from sandgym.agents.scripted import call
from sandgym.envs.intermediate import claims, intermediate_turn_v1
from sandgym.envs.rewards import GOLDEN_DIR, INTERMEDIATE_DEFAULT_WEIGHT, REWARDS, check_golden
from sandgym.envs.tool_env import ToolEnv
from sandgym.envs.turn_terms import TURN_TERMS, TurnTermSpec, run_turns
from sandgym.tasks.suites.long_context import make_family
from sandgym.tasks.task import Task
from tests.fake_sandbox import FakeSandbox


def tracking_task() -> Task:
    return make_family("tracking")("train", 1, 0, 1, tokens=1000, placement="file")[0]


def claim(task: Task, k: int, value: int | None = None) -> str:
    cp = {c["update"]: c["value"] for c in task.metadata["checkpoints"]}
    var = task.metadata["variable"]
    return f"after update {k}: {var} = {cp[k] if value is None else value}"


def script(task: Task) -> list[str]:
    """4 checkpoints: turn 1 states two right, turn 2 repeats one and gets one wrong, turn 3 one right + submit."""
    doc = task.metadata["document"]
    return [
        f"{claim(task, 0)}\n{claim(task, 1)}\n" + call("read_file", path=doc),
        f"{claim(task, 1)}\n{claim(task, 2, value=-999)}\n{claim(task, 2)}\n" + call("read_file", path=doc),
        f"{claim(task, 3)}\n" + call("submit", answer=task.reference.answer),
    ]


def play(env: ToolEnv, task: Task, turns: list[str]) -> list[tuple[float, bool, dict[str, Any]]]:
    env.reset(options={"task": task})
    out = []
    for text in turns:
        _, reward, term, trunc, info = env.step(text)
        out.append((reward, term or trunc, info))
        if term or trunc:
            break
    return out


def test_correct_new_claims_earn_on_their_turn_and_repeats_or_wrong_earn_nothing(fake_factory) -> None:
    task = tracking_task()
    env = ToolEnv([task], sandbox_factory=fake_factory, turn_rewards=True)
    steps = play(env, task, script(task))
    w = INTERMEDIATE_DEFAULT_WEIGHT
    assert [s[2]["turn_reward"] for s in steps] == pytest.approx([w * 2 / 4, 0.0, w * 1 / 4])
    reward, done, info = steps[-1]
    assert done and info["outcome"].grade.answer_matched
    assert (info["outcome"].intermediate_matched, info["outcome"].intermediate_expected) == (3, 4)
    assert info["reward_components"]["intermediate@v1"] == pytest.approx(0.75)
    off = ToolEnv([task], sandbox_factory=FakeSandbox)
    off_steps = play(off, task, script(task))
    assert reward == off_steps[-1][0]  # the step reward never includes the per-turn term
    env.close()
    off.close()


def test_prompt_mentions_the_convention_only_when_on(fake_factory) -> None:
    task = tracking_task()
    on = ToolEnv([task], sandbox_factory=fake_factory, turn_rewards=True)
    off = ToolEnv([task], sandbox_factory=fake_factory)
    _, info_on = on.reset(options={"task": task})
    _, info_off = off.reset(options={"task": task})
    assert "after update K:" in info_on["system_prompt"]
    assert info_off["system_prompt"] == off.system_prompt(task)
    assert "after update" not in info_off["system_prompt"]


def test_option_off_changes_nothing(fake_factory) -> None:
    task = tracking_task()
    env = ToolEnv([task], sandbox_factory=fake_factory)
    steps = play(env, task, script(task))
    assert all("turn_reward" not in info for _, _, info in steps)
    info = steps[-1][2]
    assert "intermediate@v1" not in info["reward_components"]
    assert info["outcome"].intermediate_expected == 0 and info["outcome"].intermediate_matched == 0
    assert steps[-1][0] == pytest.approx(1.0)  # match correct, tools used correctly
    env.close()


def test_weight_comes_from_reward_config_and_is_not_in_final_reward(fake_factory) -> None:
    task = tracking_task()
    env = ToolEnv([task], sandbox_factory=fake_factory, turn_rewards=True,
                  reward_weights={"correctness": 1.0, "intermediate": 1.0})
    steps = play(env, task, script(task))
    assert [s[2]["turn_reward"] for s in steps] == pytest.approx([0.5, 0.0, 0.25])
    assert steps[-1][0] == pytest.approx(1.0)  # correctness only: the term is paid per turn, not again at the end


def test_tasks_without_checkpoints_earn_no_turn_reward(fake_factory) -> None:
    task = make_family("needle")("train", 1, 0, 1)[0]
    env = ToolEnv([task], sandbox_factory=fake_factory, turn_rewards=True)
    steps = play(env, task, ["after update 0: alpha = 1\n" + call("submit", answer=task.reference.answer)])
    assert steps[-1][2]["turn_reward"] == 0.0
    assert steps[-1][2]["reward_components"]["intermediate@v1"] == 0.0


def test_pure_term_rules() -> None:
    meta = {"variable": "x", "checkpoints": [{"update": 0, "value": 3}, {"update": 1, "value": 5}]}
    assert claims("After Update 1 x=5; after update 2: y = 1", "x") == [(1, 5)]
    # first claim per checkpoint decides: a wrong one locks it, guessing again pays nothing
    term = TURN_TERMS["intermediate@v1"].credit
    assert run_turns(term, ["after update 1: x = 4", "after update 1: x = 5"], meta) == [0.0, 0.0]
    assert run_turns(term, ["after update 1: x = 5 after update 1: x = 5", "after update 0: x = 3"], meta) == [0.5, 0.5]
    assert run_turns(term, ["after update 9: x = 5"], meta) == [0.0]
    assert intermediate_turn_v1("after update 0: x = 3", meta, {}) == (0.5, {0: True})


def test_golden_turn_cases_detect_a_changed_term() -> None:
    assert check_golden() == []
    case = json.loads((GOLDEN_DIR / "tracking_intermediate_turns.json").read_text())
    assert "intermediate@v1" in case["expected"] and case["turn_cases"]["intermediate@v1"]

    def pay_wrong(turn, decided):  # wrong claims pay too: a behaviour change
        credit, new = intermediate_turn_v1(turn.text, turn.metadata, decided)
        return credit + 0.1 * sum(1 for v in new.values() if not v), new

    spec = TURN_TERMS["intermediate@v1"]
    generous = TurnTermSpec(credit=pay_wrong, items=spec.items, hint=spec.hint)
    problems = check_golden(turn_terms={**TURN_TERMS, "intermediate@v1": generous})
    assert problems and all("intermediate@v1 (per-turn) changed on golden case tracking_intermediate_turns" in p
                            for p in problems)
    assert any("no golden turn case" in p for p in check_golden(turn_terms={**TURN_TERMS, "x@v1": generous}))
    assert "intermediate@v1" in REWARDS


class _TrackingAgent:
    def reset(self, task: Task) -> None:
        self._turns, self._i = script(task), 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        turn = self._turns[min(self._i, len(self._turns) - 1)]
        self._i += 1
        return turn


def test_rollout_engine_records_turn_rewards() -> None:
    task = tracking_task()
    cfg = RolloutConfig(max_new_tokens=256, max_total_tokens=100_000, max_turns=8, seed=3)

    def make(turn_rewards: bool):
        return lambda: ToolEnv([task], sandbox_factory=FakeSandbox, turn_rewards=turn_rewards)

    (traj,) = rollout(ScriptedPolicy(_TrackingAgent), make(True), [task], config=cfg)
    w = INTERMEDIATE_DEFAULT_WEIGHT
    assert traj.metadata["turn_rewards"] == pytest.approx([w * 0.5, 0.0, traj.reward + w * 0.25])
    (plain,) = rollout(ScriptedPolicy(_TrackingAgent), make(False), [task], config=cfg)
    assert "turn_rewards" not in plain.metadata
    assert plain.reward == traj.reward

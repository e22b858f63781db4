"""Test-and-fix warm start: the oracle's planted bug is context, never a target; engine-cut episodes keep actions."""

import pytest

from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.rollout import RolloutConfig, rollout
from sandgym.agents.scripted import OracleAgent, fix_plan
from sandgym.envs.builtin_tools import builtin_tools
from sandgym.envs.tool_env import ToolEnv
from sandgym.evaluate.behaviour import actions_of, behaviour
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.tasks.registry import load_suite
from sandgym.train.sft import demonstrated_mask, teaches


@pytest.fixture(scope="module")
def fix_demos(local_ok, tiny_tokenizer):
    if not local_ok:
        pytest.skip("the local sandbox cannot run here")
    tasks = load_suite("coding/strings:train", n=8, seed=0, difficulty=2)
    policy = ScriptedPolicy(lambda: OracleAgent(style="fix"), tokenizer=tiny_tokenizer)

    def env():
        return ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=4)

    return tasks, rollout(policy, env, tasks, group_size=1,
                          config=RolloutConfig(max_new_tokens=4096, max_turns=4, max_total_tokens=16384))


def test_half_the_plans_plant_a_bug_and_every_demo_solves(fix_demos):
    tasks, trajs = fix_demos
    plans = [fix_plan(t, t.reference.files["solution.py"]) for t in tasks]
    assert {len(p) for p in plans} == {2, 3} and all(p[-1] == "SUBMIT" for p in plans)
    assert all(t.success for t in trajs)


def test_the_planted_bug_is_masked_and_the_fix_is_learned(fix_demos):
    _, trajs = fix_demos
    fixed = [t for t in trajs if t.outcome.actions.first_test_passed is False and teaches(t)]
    direct = [t for t in trajs if t.outcome.actions.first_test_passed is True]
    assert fixed and direct
    for t in fixed:
        mask, first = demonstrated_mask(t), len(t.turns[0].completion_token_ids)
        start = list(t.action_mask).index(1)
        assert not any(mask[start:start + first])  # the bug: context only
        assert sum(mask) == sum(t.action_mask) - first > 0  # the fix and SUBMIT are targets
    for t in direct:
        assert demonstrated_mask(t) == tuple(t.action_mask)


def test_an_episode_cut_by_the_engine_keeps_what_the_agent_did(local_ok, tiny_tokenizer):
    if not local_ok:
        pytest.skip("the local sandbox cannot run here")
    task = load_suite("coding/strings:train", n=1, seed=3, difficulty=2)[0]

    class BugThenRamble:
        def reset(self, task):
            self.turn = 0

        def act(self, observation, info):
            self.turn += 1
            return "```python\ndef f(:\n```" if self.turn == 1 else "x " * 3000

    policy = ScriptedPolicy(BugThenRamble, tokenizer=tiny_tokenizer)
    env = lambda: ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=4)  # noqa: E731
    (t,) = rollout(policy, env, [task], group_size=1,
                   config=RolloutConfig(max_new_tokens=4096, max_turns=4, max_total_tokens=1500))
    assert t.outcome is None and t.truncation_reason == "max_total_tokens"
    row = EpisodeRow.from_trajectory(t, task, seed=0)
    a = actions_of(row)
    assert a["test_runs"] == 1 and a["first_test_passed"] is False
    assert behaviour([row])["recovery"]["value"] == 0.0  # a failed first attempt that never recovered counts


def test_balanced_demos_take_half_fixes_when_there_are_enough(fix_demos):
    from sandgym.train.sft import balanced_fix_demos

    _, trajs = fix_demos
    fixes = [t for t in trajs if t.outcome.actions.first_test_passed is False and teaches(t)]
    for n in (2, 4, 6):
        picked = balanced_fix_demos(trajs, n)
        n_fix = sum(t.outcome.actions.first_test_passed is False for t in picked)
        assert len(picked) == min(n, sum(teaches(t) for t in trajs))
        assert n_fix == min(len(fixes), max(n // 2, n - (len(picked) - n_fix)))
        assert len({id(t) for t in picked}) == len(picked)

"""ToolEnv contract: Gymnasium checker on every id, reset/step info, budgets, infra failures."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import sandgym  # noqa: F401 - registers the envs
from sandgym.agents.scripted import OracleAgent, call, run_episode
from sandgym.envs.demo_tasks import demo_tasks
from sandgym.envs.registration import BUILTIN_ENVS
from sandgym.envs.rewards import RewardConfig
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError
from tests.fake_sandbox import FakeSandbox


def solved(reward: float, info: dict) -> bool:
    """A solved episode without format errors scores 1.0 plus runtime@v1's term, which reads the sandbox's wall time
    (grading included): 0 on an idle machine, below it where a loaded one makes the hidden tests' run slow."""
    parts = info["reward_components"]
    return parts["correctness@v1"] == 1.0 and reward == pytest.approx(
        1.0 + RewardConfig().weights["runtime@v1"] * parts["runtime@v1"])


@pytest.mark.parametrize("env_id", sorted(BUILTIN_ENVS))
def test_check_env_passes_on_every_registered_id(env_id: str, local_ok) -> None:
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_reset_info_and_seeded_choice(fake_factory) -> None:
    env = ToolEnv(sandbox_factory=fake_factory)
    obs, info = env.reset(seed=3)
    obs2, info2 = env.reset(seed=3)
    assert obs == obs2 and info["task_id"] == info2["task_id"]
    assert obs == info["task"].prompt == info["messages"][1]["content"]
    assert info["messages"][0] == {"role": "system", "content": info["system_prompt"]}
    assert "<tools>" in info["system_prompt"] and '"name":"read_file"' in info["system_prompt"]
    assert {t["function"]["name"] for t in info["tools"]} >= {"python", "grep", "submit", "run_tests"}
    assert not fake_factory.made  # the sandbox starts lazily, on first tool use
    env.close()


def test_reset_by_task_id_and_unknown_id(fake_factory) -> None:
    env = ToolEnv(sandbox_factory=fake_factory)
    _, info = env.reset(options={"task": "demo/vault"})
    assert info["task"].id == "demo/vault"
    with pytest.raises(ConfigError, match="Did you mean"):
        env.reset(options={"task": "demo/vaultt"})


def test_max_turns_truncates_and_still_grades(fake_factory) -> None:
    env = ToolEnv(sandbox_factory=fake_factory, max_turns=2)
    env.reset(options={"task": "demo/add"})
    good = "def add(a: int, b: int) -> int:\n    return a + b\n"
    _, r1, term, trunc, _ = env.step(call("write_file", path="solution.py", content=good))
    assert (r1, term, trunc) == (0.0, False, False)
    obs, reward, term, trunc, info = env.step(call("list_files"))
    assert trunc and not term and "max_turns" in obs
    assert info["truncation"] == "max_turns" and info["outcome"].truncation == "max_turns"
    assert solved(reward, info)  # graded although never submitted
    assert not info["outcome"].actions.submitted


def test_require_submit_fails_an_unsubmitted_episode_whatever_its_workspace(fake_factory) -> None:
    """The option for the JSON track's learned shortcut (write, then let the turns run out): with
    ``require_submit`` only a submitted episode is graded."""
    good = "def add(a: int, b: int) -> int:\n    return a + b\n"
    env = ToolEnv(sandbox_factory=fake_factory, max_turns=2, require_submit=True)
    env.reset(options={"task": "demo/add"})
    env.step(call("write_file", path="solution.py", content=good))
    _, reward, term, trunc, info = env.step(call("list_files"))
    assert trunc and not term and reward <= 0.0
    assert not info["outcome"].success and info["failure_mode"] == "budget"
    env.reset(options={"task": "demo/add"})
    env.step(call("write_file", path="solution.py", content=good))
    _, reward, term, _, info = env.step(call("submit"))
    assert term and info["outcome"].success and solved(reward, info)
    env.close()


def test_observation_budget_truncates(fake_factory) -> None:
    env = ToolEnv(sandbox_factory=fake_factory, max_total_observation_chars=500)
    env.reset(options={"task": "demo/vault"})
    _, _, term, trunc, info = env.step(call("read_file", path="notes.txt"))
    assert trunc and info["truncation"] == "observation_budget"
    assert info["outcome"].failure_mode == "budget"


def test_sandbox_failure_is_flagged_as_infra_not_raised() -> None:
    env = ToolEnv(sandbox_factory=lambda t: FakeSandbox(fail_after=2))
    env.reset(options={"task": "demo/add"})
    obs, reward, term, trunc, info = env.step(call("list_files") + call("list_files"))
    assert info["infra_failure"] is True and reward == 0.0 and trunc
    assert info["outcome"].failure_mode == "infra" and "sandbox failed" in info["error"]


def test_step_after_the_end_and_before_reset(fake_factory) -> None:
    env = ToolEnv(sandbox_factory=fake_factory)
    with pytest.raises(gym.error.ResetNeeded):
        env.step("hi")
    env.reset(options={"task": "demo/capital"})
    _, reward, term, _, info = env.step(call("submit", answer="Fredville"))
    assert term and reward == 1.0 and info["outcome"].grade.answer_matched
    obs, reward, term, _, _ = env.step(call("submit", answer="x"))
    assert term and reward == 0.0 and "reset()" in obs


def test_reward_weights_are_configurable(fake_factory) -> None:
    env = ToolEnv(sandbox_factory=fake_factory, reward_weights={"correctness": 1.0, "completion": 2.0})
    env.reset(options={"task": "demo/capital"})
    _, reward, _, _, info = env.step(call("submit", answer="Fredville"))
    assert reward == 3.0 and set(info["reward_components"]) == {"correctness@v1", "completion@v1"}
    with pytest.raises(ConfigError, match="unknown reward"):
        ToolEnv(reward_weights={"corectness": 1.0})


def test_reuse_sandbox_wipes_the_workspace(fake_factory) -> None:
    env = ToolEnv(sandbox_factory=fake_factory, reuse_sandbox=True)
    for _ in range(2):
        result = run_episode(env, OracleAgent(), demo_tasks()[0])
        assert result.success
    env.reset(options={"task": "demo/vault"})
    _, _, _, _, info = env.step(call("list_files"))
    assert info["messages"][0]["content"] == "notes.txt"  # nothing left from the coding episodes
    assert len(fake_factory.made) == 1
    env.close()


def test_bad_kwargs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="code_action"):
        ToolEnv(code_action="bash")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_turns"):
        ToolEnv(max_turns=0)


def _task(**kw):
    from sandgym.tasks.task import Reference, Task, Verifier

    base = dict(id="t/x", domain="coding", family="x", split="train", prompt="do it",
                verifier=Verifier(kind="match", answer="1"), reference=Reference(answer="1"))
    base.update(kw)
    return Task(**base)


def test_script_verifier_scores_from_the_last_json_line(fake_factory) -> None:
    from sandgym.tasks.task import Verifier

    script = ("import json\nanswer = open('answer.txt').read().strip()\n"
              "print(json.dumps({'score': 0.5 if answer == 'half' else 0.0}))\n")
    task = _task(verifier=Verifier(kind="script", script=script), files={"json.py": "raise SystemExit(3)\n"})
    env = ToolEnv([task], sandbox_factory=fake_factory)
    env.reset(options={"task": task})
    _, reward, _, _, info = env.step(call("submit", answer="half"))
    assert info["outcome"].grade.script_score == 0.5 and reward == pytest.approx(0.5)  # workspace json.py is ignored


def test_traps_are_graded_apart_from_the_hidden_tests(fake_factory) -> None:
    from sandgym.tasks.task import Reference, Verifier

    tests = {"test_main.py": "from solution import f\n\n\ndef test_one():\n    assert f(1) == 1\n"}
    traps = {"test_trap.py": "from solution import f\n\n\ndef test_zero():\n    assert f(0) == 0\n\n\n"
                             "def test_neg():\n    assert f(-1) == 1\n"}
    task = _task(verifier=Verifier(kind="tests", tests=tests, expected_tests=1, traps=traps, expected_traps=2),
                 reference=Reference(files={"solution.py": "def f(x):\n    return x\n"}))
    env = ToolEnv([task], sandbox_factory=fake_factory, reward_weights={"correctness": 1.0, "traps": 0.0})
    result = run_episode(env, OracleAgent(), task)
    assert result.success and result.reward == pytest.approx(1.0)
    assert (result.outcome.grade.traps_passed, result.outcome.grade.traps_expected) == (1, 2)
    assert result.reward_components["traps@v1"] == 0.5

"""A training or evaluation ``rollout.env`` gets the rollout's max_turns, sandbox, code_action and
tools, so an episode the rollout cuts at max_turns is cut and graded by the env (partial credit), not dropped at 0."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

import tests.train.toy_env  # noqa: F401  (registers toy/Letters-v0)
from sandgym.errors import ConfigError
from sandgym.evaluate.config import EvalConfig
from sandgym.rollout.spec import RolloutSpec
from sandgym.train.config import load_config

TOY = "tests.train.toy_env:toy/Letters-v0"


def toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def train_config(**overrides: Any) -> Any:
    return load_config(None, [f"rollout.{k}={toml(v)}" for k, v in overrides.items()])


def test_settings_reach_a_registered_env() -> None:
    from sandgym.train.components import env_factory

    cfg = train_config(env="sandgym/Coding-v0", max_turns=2, code_action="python", tools=["write_file", "submit"])
    env = env_factory(cfg)()
    try:
        inner = env.unwrapped
        assert inner.max_turns == 2 and inner.backend == "local" and inner.code_action == "python"
        assert inner.toolset.names == ["write_file", "submit"]
    finally:
        env.close()
    none = env_factory(train_config(env="sandgym/LongContext-v0", code_action="none"))()
    try:  # "none" reaches a ToolEnv as None; max_turns (default 3) is passed too
        assert none.unwrapped.code_action is None and none.unwrapped.max_turns == 3
    finally:
        none.close()


def test_evaluation_env_gets_the_same_settings() -> None:
    from sandgym.evaluate.run import env_factory

    cfg = EvalConfig(policy="noop", suites=("coding:heldout",),
                     rollout=RolloutSpec(env="sandgym/RepoFix-v0", max_turns=5, code_action="python"))
    env = env_factory(cfg)()
    try:
        assert env.unwrapped.max_turns == 5 and env.unwrapped.code_action == "python"
    finally:
        env.close()


def test_periodic_eval_keeps_the_training_env() -> None:
    from pathlib import Path

    from sandgym.experiments.periodic_eval import eval_config

    cfg = train_config(env=TOY, max_turns=1, env_kwargs={"first_only": True})
    ev = eval_config(cfg, Path("unused"))
    assert ev.rollout == replace(cfg.rollout, temperature=cfg.eval.temperature)
    assert ev.rollout.env == TOY and ev.rollout.env_kwargs == {"first_only": True} and ev.rollout.max_turns == 1


def test_an_env_without_the_settings_still_works_when_they_are_left_at_defaults() -> None:
    from sandgym.train.components import env_factory

    cfg = train_config(env=TOY, max_turns=1, env_kwargs={"first_only": True})  # the rollout enforces max_turns
    env = env_factory(cfg)()
    assert env.unwrapped.first_only
    env.close()


@pytest.mark.parametrize("overrides, match", [
    ({"env": TOY, "sandbox": "e2b"}, r"rollout\.sandbox='e2b'.*does not take 'backend'.*remove rollout\.sandbox"),
    ({"env": TOY, "code_action": "python"}, r"rollout\.code_action='python'.*does not take 'code_action'"),
    ({"env": TOY, "tools": ["submit"]}, r"rollout\.tools=.*does not take 'tools'"),
    ({"env": "sandgym/Coding-v0", "env_kwargs": {"max_turns": 8}},
     r"rollout\.env_kwargs\.max_turns=8 disagrees with rollout\.max_turns=3: set rollout\.max_turns only"),
    ({"env_kwargs": {"max_turns": 8}}, r"rollout\.env_kwargs\.max_turns=8 disagrees"),  # the tool env too
    ({"env": "sandgym/Coding-v0", "sandbox": "e2b", "env_kwargs": {"backend": "local"}},
     r"rollout\.env_kwargs\.backend='local' disagrees with rollout\.sandbox='e2b'"),
    ({"env": "sandgym/Codin-v0"}, r"rollout\.env='sandgym/Codin-v0' is not a registered env id; did you mean "
                                   r"'sandgym/Coding-v0'"),
    ({"env": "no_such_module_xyz:x/Y-v0"}, r"cannot import the module"),
    ({"env": "sandgym/Coding-v0", "env_kwargs": {"max_turn": 4}}, r"'max_turn' is not a parameter.*'max_turns'"),
    ({"env_kwargs": {"require_submits": True}},  # the generic tool env checks its keys too
     r"env_kwargs key 'require_submits' is not a parameter of the tool environment; did you mean 'require_submit'"),
    ({"env_kwargs": {"require_submit": "yes"}},  # ... and their types, with the same check as a registered env's
     r"env_kwargs key 'require_submit': .*bool"),
])
def test_settings_the_env_cannot_take_are_config_errors(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        train_config(**overrides)


def test_the_tool_env_takes_its_own_keywords_from_env_kwargs() -> None:
    from sandgym.train.components import env_factory

    env = env_factory(train_config(env_kwargs={"require_submit": True}))()
    try:
        assert env.require_submit is True
    finally:
        env.close()


def test_eval_config_checks_its_env_too() -> None:
    with pytest.raises(ConfigError, match=r"rollout\.sandbox='e2b'.*does not take 'backend'"):
        EvalConfig(policy="noop", suites=("coding:heldout",), rollout=RolloutSpec(env=TOY, sandbox="e2b"))


def test_env_kwargs_equal_to_a_setting_are_fine() -> None:
    cfg = train_config(env="sandgym/Coding-v0", max_turns=4, env_kwargs={"max_turns": 4, "backend": "local"})
    assert cfg.rollout.env_kwargs == {"max_turns": 4, "backend": "local"}


class WriteNoSubmit:
    """Writes the task's reference solution, then keeps listing files: never submits."""

    def reset(self, task: Any) -> None:
        from sandgym.agents.scripted import call

        self.turns = ["\n".join(call("write_file", path=p, content=c) for p, c in task.reference.files.items())]

    def act(self, observation: str, info: Any) -> str:
        from sandgym.agents.scripted import call

        return self.turns.pop(0) if self.turns else call("list_files")


def test_a_truncated_episode_through_rollout_env_is_graded(local_ok: bool) -> None:
    from sandgym.agents.policy import ScriptedPolicy
    from sandgym.agents.rollout import rollout
    from sandgym.tasks.registry import load_suite
    from sandgym.train.components import env_factory, rollout_config

    cfg = train_config(env="sandgym/Coding-v0", max_turns=2)
    task = load_suite("coding/strings:train", n=1, seed=0, difficulty=1)[0]
    [traj] = rollout(ScriptedPolicy(WriteNoSubmit), env_factory(cfg), [task],
                     config=rollout_config(cfg, seed=0, version=0))
    assert traj.truncated and not traj.terminated and not traj.infra_failure
    assert traj.truncation_reason == "max_turns" and traj.num_turns == 2
    # graded by the env at its own max_turns (= the rollout's): credit for the correct, unsubmitted code; before
    # the fix the env allowed more turns, the rollout cut the episode first and it was never graded (reward 0.0)
    assert traj.reward > 0.5, traj.reward
    assert traj.outcome is not None and traj.outcome.truncation == "max_turns" and not traj.outcome.actions.submitted

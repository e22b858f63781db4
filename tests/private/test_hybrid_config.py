"""A hybrid (rules + judge) reward named from a config: the judged env, and the judge's re-calibration drift."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
from sandgym.configs import from_dict
from sandgym.errors import ConfigError
from sandgym.experiments.judge_drift import CALIBRATION, JudgeDriftWarning, judge_spec, maybe_recalibrate
from sandgym.private.hybrid import JudgeSpec
from sandgym.rollout.spec import RolloutSpec
from sandgym.tasks.registry import load_suite
from sandgym.train.config import TrainConfig
from tests.fake_sandbox import FakeSandbox
from tests.private import judges_for_tests

ENV = "sandgym.private.hybrid:sandgym/Judged-v0"
JUDGE = {"policy": "python:tests.private.judges_for_tests:keyword_judge", "rubric": "The agent submits.",
         "rules": {"correctness@v1": 1.0}, "weight": 0.5}


def judged_env(**judge: object):
    spec = RolloutSpec(env=ENV, sandbox="unsafe-local", max_turns=8,
                       env_kwargs={"inner": "sandgym/Coding-v0", "judge": {**JUDGE, **judge},
                                   "sandbox_factory": lambda _t: FakeSandbox()})
    return spec.env_factory()()


def test_the_judged_env_mixes_rules_and_judge() -> None:
    tasks = load_suite("coding/strings:train", n=2)
    env = judged_env()
    try:
        solved = run_episode(env, OracleAgent(), tasks[0])
        idle = run_episode(env, NoopAgent(), tasks[1])
    finally:
        env.close()
    # oracle: correctness 1, judge 1 ("submit" in its turns) -> 1.0; noop submits at once: correctness 0, judge 1
    assert solved.reward == pytest.approx(1.0) and solved.reward_components["correctness@v1"] == 1.0
    judge_key = next(k for k in solved.reward_components if k.startswith("judge@"))
    assert solved.reward_components[judge_key] == 1.0
    assert any(k.startswith("hybrid@") for k in solved.reward_components)
    assert idle.reward == pytest.approx(0.5 / 1.5) and idle.reward_components["inner_reward"] <= 0.0


def test_judge_spec_errors_name_the_fix() -> None:
    with pytest.raises(ConfigError, match="below the rules' total"):
        JudgeSpec.from_dict({**JUDGE, "weight": 1.0})
    with pytest.raises(ConfigError, match="unknown key"):
        JudgeSpec.from_dict({**JUDGE, "wieght": 0.1})
    with pytest.raises(ConfigError, match="needs judge.labelled"):
        JudgeSpec.from_dict({**JUDGE, "calibrate_every": 5})
    with pytest.raises(ConfigError, match="python:module:attr or openai"):
        JudgeSpec.from_dict({**JUDGE, "policy": "gpt-judge"})


def labelled(tmp_path: Path) -> Path:
    rows = [{"prompt": "fix it", "answer": f"{'I ran the tests and called submit' if i % 2 else 'gave up'} #{i}",
             "label": i % 2} for i in range(10)]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_training_config_recalibrates_every_n_steps_and_warns_on_drift(tmp_path: Path) -> None:
    config = from_dict(TrainConfig, {"rollout": {"env": ENV, "env_kwargs": {"inner": "sandgym/Coding-v0", "judge": {
        **JUDGE, "labelled": str(labelled(tmp_path)), "calibrate_every": 2, "max_drift": 0.2}}}})
    assert judge_spec(config) is not None and judge_spec(replace(config, rollout=RolloutSpec())) is None
    first = maybe_recalibrate(config, 0, tmp_path)
    assert first is not None and first["agreement"] == 1.0 and not first["drifted"]
    assert maybe_recalibrate(config, 1, tmp_path) is None  # not due
    judges_for_tests.STATE["broken"] = True
    try:
        with pytest.warns(JudgeDriftWarning, match="drifted at step 2"):
            row = maybe_recalibrate(config, 2, tmp_path)
    finally:
        judges_for_tests.STATE["broken"] = False
    assert row is not None and row["drifted"] and row["agreement_drift"] == pytest.approx(0.5)
    curve = [json.loads(x) for x in (tmp_path / CALIBRATION).read_text().splitlines()]
    assert [r["step"] for r in curve] == [0, 2] and curve[1]["ece_drift"] == pytest.approx(0.4)

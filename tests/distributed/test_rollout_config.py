"""Training and evaluation rollouts (local and Ray workers share these builders) sample with the configured settings."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

import sandgym.agents.rollout as rollout_mod
from sandgym.envs.parsing import stop_strings_for
from sandgym.evaluate.config import EVAL_ROLLOUT, EvalConfig
from sandgym.evaluate.policies import PolicyInfo
from sandgym.evaluate.run import evaluate_policy, load_tasks, rollout_config
from sandgym.train import components
from sandgym.train.config import load_config


@pytest.fixture
def captured(monkeypatch) -> list[Any]:
    seen: list[Any] = []

    def fake_rollout(policy, make_env, tasks, *, group_size=1, config=None, first_group_id=0):
        seen.append(config)
        return []

    monkeypatch.setattr(rollout_mod, "rollout", fake_rollout)
    return seen


@pytest.mark.parametrize("code_action", ["submit", "python", "none"])
def test_training_rollouts_use_the_rollout_section(captured, code_action):
    cfg = load_config(None, [f"rollout.code_action={json.dumps(code_action)}", "rollout.temperature=0.7",
                             "rollout.max_new_tokens=77"])
    task = components.domain_tasks(cfg)["coding"][0]
    components.collect(None, components.DomainEnvs(cfg), [task], cfg, seed=11, version=3)
    (rc,) = captured
    assert rc == components.rollout_config(cfg, seed=11, version=3)
    assert (rc.seed, rc.policy_version, rc.temperature, rc.max_new_tokens) == (11, 3, 0.7, 77)
    assert rc.stop_strings == stop_strings_for(None if code_action == "none" else code_action)


@pytest.mark.parametrize("code_action", ["submit", "python", "none"])
def test_eval_rollouts_use_the_eval_config(captured, code_action, tmp_path):
    cfg = EvalConfig(policy="oracle", suites=("coding/strings:heldout",), n_tasks=1, samples=1, seeds=(4,),
                     rollout=replace(EVAL_ROLLOUT, code_action=code_action, max_new_tokens=33))
    evaluate_policy(None, PolicyInfo("oracle", "scripted", "oracle"), cfg, tmp_path, tasks=load_tasks(cfg))
    (rc,) = captured
    assert rc == rollout_config(cfg, 4)
    assert (rc.seed, rc.max_new_tokens, rc.temperature) == (4, 33, cfg.rollout.temperature)
    assert rc.stop_strings == stop_strings_for(None if code_action == "none" else code_action)

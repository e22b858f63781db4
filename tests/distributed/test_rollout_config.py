"""Ray workers sample with exactly the rollout settings of the single-process paths (guards against drift)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import sandgym.agents.rollout as rollout_mod
from sandgym.evaluate import distributed as eval_dist
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.policies import PolicyInfo
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.train import runtime
from sandgym.train.config import load_config
from sandgym.train.distributed.ray_rollout import rollout_config


@pytest.fixture
def captured(monkeypatch) -> list[Any]:
    seen: list[Any] = []

    def fake_rollout(policy, make_env, tasks, *, group_size=1, config=None, first_group_id=0):
        seen.append(config)
        return []

    monkeypatch.setattr(rollout_mod, "rollout", fake_rollout)
    return seen


@pytest.mark.parametrize("code_action", ["submit", "python", "none"])
def test_training_worker_config_equals_collect(captured, code_action):
    cfg = load_config(None, [f"rollout.code_action={json.dumps(code_action)}", "rollout.temperature=0.7"])
    runtime.collect(None, lambda: None, [], cfg, seed=11, version=3)
    assert captured == [rollout_config(cfg, seed=11, version=3)]


@pytest.mark.parametrize("code_action", ["submit", "python", "none"])
def test_eval_worker_config_equals_evaluate_policy(captured, code_action, tmp_path):
    cfg = EvalConfig(policy="oracle", suites=("coding/strings:heldout",), n_tasks=1, samples=1, seeds=(4,),
                     code_action=code_action, max_new_tokens=33)
    evaluate_policy(None, PolicyInfo("oracle", "scripted", "oracle"), cfg, tmp_path, tasks=load_tasks(cfg))
    assert captured == [eval_dist.rollout_config(cfg, 4)]

"""The engine against the real ToolEnv (with the shared fake sandbox): oracle solves, model rows stay exact."""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("sandgym.envs.tool_env")
pytest.importorskip("sandgym.agents.scripted")

from sandgym.agents.hf import HFPolicy, LoraSpec  # noqa: E402
from sandgym.agents.policy import ScriptedPolicy  # noqa: E402
from sandgym.agents.rollout import RolloutConfig, rollout  # noqa: E402
from sandgym.agents.scripted import NoopAgent, OracleAgent  # noqa: E402
from sandgym.envs.demo_tasks import demo_tasks  # noqa: E402
from sandgym.envs.tool_env import ToolEnv  # noqa: E402
from tests.fake_sandbox import FakeSandbox  # noqa: E402

TASKS = demo_tasks()


def make_env() -> ToolEnv:
    return ToolEnv(TASKS, sandbox_factory=lambda task: FakeSandbox())


def test_oracle_solves_through_the_engine(tiny_tokenizer: Any) -> None:
    cfg = RolloutConfig(max_total_tokens=20000, max_turns=8)
    out = rollout(ScriptedPolicy(OracleAgent, tokenizer=tiny_tokenizer), make_env, TASKS, group_size=2, config=cfg)
    assert [t.task_id for t in out] == [t.id for t in TASKS for _ in range(2)]
    assert all(t.success and t.failure_mode == "success" and t.terminated and not t.truncated for t in out)
    assert all(t.reward > 0 and "correctness@v1" in t.reward_components and "episode_s" in t.runtime for t in out)
    assert all(t.outcome is not None and t.outcome.failure_mode == "success" for t in out)
    text = tiny_tokenizer.decode(list(out[0].token_ids))
    assert "<tool_response>" in text and text.count("<|im_start|>assistant") == out[0].num_turns


def test_noop_fails(tiny_tokenizer: Any) -> None:
    out = rollout(ScriptedPolicy(NoopAgent), make_env, TASKS[2:], config=RolloutConfig(max_turns=8))
    assert not out[0].success and out[0].failure_mode != "success"


def test_model_rows_are_exact_on_toolenv(tiny_model_dir: Any) -> None:
    policy = HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0))
    cfg = RolloutConfig(max_new_tokens=24, max_total_tokens=4000, max_turns=3, seed=4)
    out = rollout(policy, make_env, TASKS[1:], group_size=2, config=cfg)
    for t in out:
        assert t.task_id in {"demo/vault", "demo/capital"} and t.num_generated_tokens > 0
        with torch.no_grad():
            lp = torch.log_softmax(policy.model(input_ids=torch.tensor([t.token_ids])).logits[0], -1)
        pos = torch.nonzero(torch.tensor(t.action_mask)).squeeze(1)
        again = lp[pos - 1, torch.tensor(t.token_ids)[pos]]
        torch.testing.assert_close(again, torch.tensor([t.logprobs[i] for i in pos.tolist()]), atol=1e-4, rtol=0)

"""Prompts are never cut silently: a prompt longer than the budget, or a budget past the window, fails early."""

import pytest

from sandgym.agents.context_window import check_context, context_window
from sandgym.agents.hf import HFPolicy
from sandgym.agents.rollout_config import RolloutConfig
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError
from sandgym.tasks.task import Reference, Task, Verifier


def task(i: int, words: int) -> Task:
    return Task(id=f"long-{i}", domain="long_context", family="needle", split="train",
                prompt="word " * words + "What is the code?", verifier=Verifier(kind="match", answer="x"),
                reference=Reference(answer="x"))


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return HFPolicy(str(tiny_model_dir), lora=None)


def env_factory():
    return ToolEnv(tasks=[], code_action=None, system_prompt="Answer.")


def test_budget_past_the_model_window_is_refused(policy):
    assert context_window(policy) == 4096
    with pytest.raises(ConfigError, match=r"max_total_tokens=8192 exceeds the model's context window of 4096"):
        check_context(policy, env_factory, [task(0, 10)], RolloutConfig(max_total_tokens=8192, max_new_tokens=64))


def test_long_prompt_is_named_with_its_length_and_the_fix(policy):
    tasks = [task(0, 10), task(1, 600), task(2, 20)]
    with pytest.raises(ConfigError) as e:
        check_context(policy, env_factory, tasks, RolloutConfig(max_total_tokens=512, max_new_tokens=64))
    msg = str(e.value)
    assert "1 of 3 tasks" in msg and "long-1 (" in msg and "long-0" not in msg
    assert "raise rollout.max_total_tokens to" in msg


def test_prompts_that_fit_pass_and_report_their_lengths(policy):
    lengths = check_context(policy, env_factory, [task(0, 10), task(1, 40)],
                            RolloutConfig(max_total_tokens=1024, max_new_tokens=64))
    assert [p.task_id for p in lengths] == ["long-0", "long-1"] and lengths[1].tokens > lengths[0].tokens

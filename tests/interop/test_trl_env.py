"""sandgym under TRL's ``GRPOTrainer(environment_factory=...)`` with the real ``trl`` package, offline.

The tool methods act in the local sandbox and the reward is sandgym's grader's (an oracle played through the tool
methods scores what sandgym scores it; an episode without a call scores the format penalty); a tiny random model
then trains 2 steps on CPU through ``environment_factory``, and every episode TRL scored is in the trajectory file,
in sandgym's format, with the reward TRL logged."""

from __future__ import annotations

import inspect
import math
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from transformers.utils import get_json_schema  # noqa: E402

from sandgym.agents.trajectory import load_jsonl  # noqa: E402
from sandgym.envs.rewards import RewardConfig, compute_rewards  # noqa: E402
from sandgym.errors import ConfigError  # noqa: E402
from sandgym.interop.trl import SandgymSpec, tool_calling_tokenizer  # noqa: E402
from sandgym.rollout.spec import RolloutSpec  # noqa: E402
from tests.interop.tasks_fixture import ADD_ONE  # noqa: E402
from tests.tiny import build_tiny_model_dir  # noqa: E402

TOOLS = ("write_file", "run_tests", "submit")
SHORT = "Write the solution with write_file, then call submit."
NO_CALL = {"correctness@v1": 0.0, "format@v1": -1.0}
"""What sandgym's grader gives a one-turn episode without a tool call on the untouched add-one stub."""


def spec_for(tmp_path: Path, **kwargs: object) -> SandgymSpec:
    rollout = RolloutSpec(code_action="none", tools=TOOLS, max_turns=4, env_kwargs={"system_prompt": SHORT})
    return SandgymSpec([ADD_ONE], rollout=rollout, record=tmp_path / "trajectories.jsonl",
                       **kwargs)  # type: ignore[arg-type]


def test_tool_methods_act_in_the_sandbox_and_the_grader_scores(tmp_path: Path) -> None:
    with spec_for(tmp_path) as spec:
        env: Any = spec.environment_factory()  # its tool methods are made from the env's tool schemas
        public = sorted(n for n, _ in inspect.getmembers(type(env), inspect.isfunction) if not n.startswith("_"))
        assert public == sorted({"reset", "get_reward", *TOOLS})  # what TRL offers the model: the env's tools
        for schema in spec.tools:  # rendered from the methods as TRL renders them: sandgym's own schemas
            mine, theirs = schema["function"], get_json_schema(getattr(env, schema["function"]["name"]))["function"]
            assert (theirs["description"], theirs["parameters"]["properties"]) == (
                mine["description"], mine["parameters"]["properties"])
            assert sorted(theirs["parameters"].get("required", [])) == sorted(mine["parameters"]["required"])
        assert env.reset(task_id=ADD_ONE.id, prompt=[]) is None
        env.write_file(path="solution.py", content="def add_one(x: int) -> int:\n    return x + 1\n")
        assert env.submit() == "Submitted."
        assert env.get_reward() == pytest.approx(1.0)
        assert env.outcome is not None and env.outcome.success
        assert env.write_file(path="x.py", content="").startswith("The episode is over")

        env.reset(task_id=ADD_ONE.id)  # the model says nothing: one turn without a call, graded
        reward = env.get_reward()
        assert {k: env.reward_components[k] for k in NO_CALL} == NO_CALL
        assert env.outcome is not None and env.outcome.truncation == "max_turns"
        assert reward == pytest.approx(compute_rewards(env.outcome, RewardConfig())[0]) == pytest.approx(-0.1)

        drawn = env.reset()  # no dataset row: a task of the suite, its system prompt and text for TRL to append
        assert drawn is not None and SHORT in drawn and ADD_ONE.prompt in drawn
        assert "Bad arguments for write_file" in env.write_file(pth="solution.py")
        assert env.get_reward() == pytest.approx(-0.1)

        trajs = spec.trajectories()
        assert [t.reward for t in trajs] == pytest.approx([1.0, -0.1, -0.1])
        assert [len(t.turns) for t in trajs] == [2, 1, 2]
        assert trajs[0].turns[0].text.startswith('<tool_call>{"name": "write_file"')
        assert trajs[0].success and not trajs[1].success and trajs[1].truncation_reason == "max_turns"


def test_bad_settings_are_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="code_action='none'"):
        SandgymSpec([ADD_ONE], rollout=RolloutSpec(code_action="submit"))
    with pytest.raises(ConfigError, match="not a task of this suite"):
        spec_for(tmp_path).environment_factory().reset(task_id="demo/nope")


SOLVE = ('<tool_call>\n{"name": "write_file", "arguments": {"path": "solution.py", "content": '
         '"def add_one(x: int) -> int:\\n    return x + 1\\n"}}\n</tool_call><|im_end|>')
"""What the tiny model is taught to answer: a correct solution through a native tool call (the Qwen2.5 format)."""


def taught_to_call(model: Any, prompt_ids: list[int], completion_ids: list[int]) -> Any:
    """``model`` fitted to answer the prompt with exactly ``completion_ids`` (a few dozen AdamW steps)."""
    import torch

    ids = torch.tensor([prompt_ids + completion_ids])
    labels = torch.tensor([[-100] * len(prompt_ids) + completion_ids])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(200):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if loss.item() < 0.005:
            break
    return model


@pytest.mark.slow
def test_grpo_trainer_trains_through_environment_factory(tmp_path: Path) -> None:
    """TRL parses the model's tool call, runs it through the environment's method in the sandbox, and trains on
    the reward sandgym's grader gives the episode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    model_dir = build_tiny_model_dir(tmp_path / "model")
    tokenizer = tool_calling_tokenizer(AutoTokenizer.from_pretrained(str(model_dir)))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    spec = spec_for(tmp_path)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2, max_completion_length=512,
        max_steps=2, learning_rate=1e-3, beta=0.0, temperature=0.01, use_cpu=True, report_to="none",
        save_strategy="no", logging_steps=1, disable_tqdm=True, max_tool_calling_iterations=1, seed=0,
        dataloader_num_workers=0, gradient_checkpointing=False,
    )
    trainer = GRPOTrainer(model=model, args=args, train_dataset=spec.train_dataset, processing_class=tokenizer,
                          environment_factory=spec.environment_factory)
    assert sorted(t.__name__ for t in trainer.tools) == sorted(TOOLS)  # rendered into every prompt by TRL
    prompt_ids = tokenizer.apply_chat_template(  # the prompt as TRL renders it, its tools the env's methods
        spec.train_dataset[0]["prompt"], tools=trainer.tools, add_generation_prompt=True, tokenize=True,
        return_dict=True)["input_ids"]
    taught_to_call(model, list(prompt_ids), tokenizer(SOLVE, add_special_tokens=False)["input_ids"])
    try:
        trainer.train()
    finally:
        spec.close()
    logged = [e for e in trainer.state.log_history if "reward" in e]
    assert len(logged) == 2 and trainer.state.global_step == 2
    assert all(e["tools/call_frequency"] > 0 for e in logged)
    trajs = load_jsonl(tmp_path / "trajectories.jsonl")  # sandgym's own reader: sandgym's trajectory format
    assert len(trajs) == 4  # 2 steps x 1 prompt x 2 generations, each graded once
    weights = RewardConfig().weights
    for t in trajs:  # the call TRL parsed ran in the sandbox; the grader's hidden tests pass
        assert t.task_id == ADD_ONE.id and t.metadata["source"] == "trl" and t.outcome is not None
        assert t.turns[0].text.startswith('<tool_call>{"name": "write_file"') and "return x + 1" in t.turns[0].text
        assert t.turns[-1].text == ""  # the message after the tool's reply called no tool: the closing turn
        assert t.success and t.reward_components["correctness@v1"] == 1.0
        assert t.reward == pytest.approx(sum(weights[k] * t.reward_components[k] for k in weights))
    for step, entry in enumerate(logged):  # the reward TRL trained on is the grader's, episode by episode
        mean = sum(t.reward for t in trajs[2 * step: 2 * step + 2]) / 2
        assert math.isclose(entry["rewards/SandgymEnvironment/mean"], mean, abs_tol=1e-6)
        assert math.isclose(entry["reward"], mean, abs_tol=1e-6)

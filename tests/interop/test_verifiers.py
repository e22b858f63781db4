"""``sandgym.interop.verifiers.load_environment``: a real ``verifiers`` MultiTurnEnv driven offline (no model
server): its own init_state / setup_state / env_response / is_completed / rubric with scripted assistant turns."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers")
if not hasattr(vf, "MultiTurnEnv"):  # verifiers 0.4 dropped the classic stack
    pytest.skip("needs verifiers>=0.3,<0.4 (vf.MultiTurnEnv)", allow_module_level=True)

from sandgym.agents.scripted import OracleAgent, call  # noqa: E402
from sandgym.interop.verifiers import SandgymVerifiersEnv, load_environment  # noqa: E402
from tests.interop.tasks_fixture import ADD_ONE, write_suite  # noqa: E402

WRONG = [call("write_file", path="solution.py", content="def add_one(x):\n    return x\n"),
         call("submit", answer="done")]


def rollout(env: SandgymVerifiersEnv, turns: list[str]) -> dict:
    """What MultiTurnEnv.rollout does, with scripted assistant messages instead of a model call."""

    async def go():
        row = env.get_dataset()[0]
        client = vf.ClientConfig(api_base_url="http://127.0.0.1:9/v1", api_key_var="SANDGYM_NO_KEY")
        state = await env.init_state(row, client=client, model="scripted")
        state = await env.setup_state(state) or state
        messages = list(state["prompt"])
        assert [m.role for m in messages] == ["system", "user"]
        for text in turns:
            assert not await env.is_completed(state)
            messages.append({"role": "assistant", "content": text})
            state["trajectory"].append({"prompt": messages[:-1], "completion": [messages[-1]]})
            reply = await env.env_response(messages, state)
            messages += reply
            if await env.is_completed(state):
                break
        assert await env.is_completed(state)
        await env.rubric.score_rollout(state)
        await env.cleanup(state)
        return state

    return asyncio.run(go())


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> SandgymVerifiersEnv:
    suite = write_suite(tmp_path_factory.mktemp("suite") / "tasks.jsonl")
    return load_environment("sandgym/Coding-v0", suite=str(suite), n=1)


def test_dataset_rows_are_the_env_prompts(env: SandgymVerifiersEnv):
    row = env.get_dataset()[0]
    assert json.loads(row["info"])["task_id"] == ADD_ONE.id
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and row["prompt"][1]["content"] == ADD_ONE.prompt
    assert isinstance(env, vf.MultiTurnEnv)


def test_oracle_answer_scores_one(env: SandgymVerifiersEnv):
    agent = OracleAgent()
    agent.reset(ADD_ONE)
    turns = [agent.act("", {}) for _ in range(4)]
    state = rollout(env, turns)
    assert state["sandgym"]["reward_components"]["correctness@v1"] == 1.0
    assert state["metrics"]["sandgym_correctness"] == 1.0 and state["metrics"]["sandgym_success"] == 1.0
    assert state["reward"] == pytest.approx(state["sandgym"]["reward"]) and state["reward"] >= 1.0
    assert state["final_env_response"] is not None


def test_wrong_answer_scores_zero(env: SandgymVerifiersEnv):
    state = rollout(env, WRONG)
    assert state["metrics"]["sandgym_correctness"] == 0.0 and state["metrics"]["sandgym_success"] == 0.0
    assert state["reward"] <= 0.1


def test_tasks_can_be_given_directly(tmp_path: Path):
    env = load_environment("sandgym/Coding-v0", suite=[ADD_ONE])
    assert len(env.get_dataset()) == 1 and env.max_turns == ADD_ONE.limits.max_turns + 1

"""verifiers, both ways, with the real ``verifiers`` package (0.3.x; the Makefile installs it) and offline:

- export: ``sandgym.interop.verifiers.load_environment`` is a real ``vf.MultiTurnEnv`` driven by its own
  init_state / setup_state / env_response / is_completed / rubric with scripted assistant turns (no model server);
- import: a verifiers env package defined here (``tests/interop/vf_capitals.py``, loaded by
  ``vf.load_environment``) becomes sandgym Tasks scored by its rubric as a host-side verifier, played through
  real sandgym episodes (``sandgym/Coding-v0``, the local sandbox) by scripted agents."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from importlib.metadata import version
from pathlib import Path

import gymnasium as gym
import pytest

if importlib.util.find_spec("verifiers") is None:  # `make test` installs it (Makefile); a bare `.[dev]` may not
    pytest.skip("verifiers is not installed (see the Makefile / docs/INTEROP.md)", allow_module_level=True)
if not version("verifiers").startswith("0.3."):  # 0.4 dropped the classic stack
    pytest.skip(f"needs verifiers 0.3.x (vf.MultiTurnEnv), not {version('verifiers')}", allow_module_level=True)
import verifiers as vf  # noqa: E402  (installed but broken, e.g. a missing dependency: fail, never skip)

from sandgym.agents.scripted import OracleAgent, call, run_episode  # noqa: E402
from sandgym.envs.host_verifiers import HOST_VERIFIERS  # noqa: E402
from sandgym.interop.verifiers import (  # noqa: E402
    SandgymVerifiersEnv,
    load_environment,
    register_verifiers_env,
    verifiers_suite,
)
from sandgym.rollout.runner import RunConfig, run  # noqa: E402
from sandgym.tasks.load import save_jsonl  # noqa: E402
from tests.interop import vf_capitals  # noqa: E402
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


# --- import: a verifiers env as sandgym tasks, its rubric as the host-side verifier ----------------------------


class Says:
    """A scripted agent that submits one fixed answer."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def reset(self, task) -> None:
        pass

    def act(self, observation, info) -> str:
        return call("submit", answer=self.answer)


@pytest.fixture()
def cleanup_verifiers():
    yield
    for name in [n for n in HOST_VERIFIERS if n.startswith("verifiers.test_")]:
        del HOST_VERIFIERS[name]


def test_dataset_rows_become_tasks(cleanup_verifiers):
    env = vf.load_environment("tests.interop.vf_capitals")
    assert isinstance(env, vf.SingleTurnEnv)
    tasks = register_verifiers_env(env, "test_capitals")
    assert [t.verifier.answer for t in tasks] == [r["answer"] for r in vf_capitals.ROWS]
    first = tasks[0]
    assert first.id == "verifiers/test_capitals/train-0" and first.split == "train" and first.family == "test_capitals"
    assert first.prompt == vf_capitals.SYSTEM + "\n\n" + vf_capitals.ROWS[0]["question"]
    assert first.verifier.kind == "host" and first.verifier.host == "verifiers.test_capitals@v1"
    assert first.reference is not None and first.reference.answer == "Paris"
    assert first.metadata["verifiers"]["row"]["answer"] == "Paris"
    heldout = register_verifiers_env(env, "test_capitals", split="heldout")  # the eval dataset, same verifier
    assert [(t.id, t.verifier.answer) for t in heldout] == [("verifiers/test_capitals/heldout-0", "Nairobi")]
    with pytest.raises(ValueError, match="new version"):  # another env under the same name@vN
        register_verifiers_env(vf.load_environment("tests.interop.vf_capitals"), "test_capitals")


def test_the_rubric_scores_real_episodes(cleanup_verifiers):
    tasks = register_verifiers_env("tests.interop.vf_capitals", "test_capitals")  # by id: vf.load_environment
    env = gym.make("sandgym/Coding-v0", tasks=tasks)
    try:
        right = run_episode(env, OracleAgent(), tasks[0])
        wrong = run_episode(env, Says("Lyon"), tasks[0])
        cased = run_episode(env, Says("  tokyo "), tasks[1])  # the rubric's own rule: case and space ignored
    finally:
        env.close()
    assert right.outcome.success and right.reward_components["correctness@v1"] == 1.0 and right.reward == 1.0
    assert right.reward_components["verifiers.test_capitals@v1/correct_city"] == 1.0
    assert right.reward_components["verifiers.test_capitals@v1/brief"] == 1.0  # a metric: a component, weight 0
    assert not any(k.endswith("/num_turns") for k in right.reward_components)  # the env's monitor is left out
    assert wrong.outcome.failure_mode == "wrong_answer" and wrong.reward == 0.0
    assert wrong.reward_components["correctness@v1"] == 0.0
    assert wrong.reward_components["verifiers.test_capitals@v1/correct_city"] == 0.0
    assert cased.reward_components["correctness@v1"] == 1.0


def test_sandgym_run_oracle_one_noop_zero(tmp_path: Path, cleanup_verifiers):
    suite = verifiers_suite("tests.interop.vf_capitals", "test_capitals")  # a plugin's sandgym.tasks callable
    tasks = suite("train", 2, 0) + suite("heldout", 1, 0)
    assert len(tasks) == 3 and {t.split for t in tasks} == {"train", "heldout"}
    path = save_jsonl(tasks, tmp_path / "capitals.jsonl")
    for agent, want in (("oracle", 1.0), ("noop", 0.0)):  # noop submits an empty answer
        summary = run(RunConfig(env="sandgym/Coding-v0", tasks=str(path), agent=agent, workers=2, progress=False))
        assert len(summary.results) == 3 and summary.success_rate == want, summary.results


def test_a_raising_reward_function_is_a_task_error_not_the_agents_zero(cleanup_verifiers):
    tasks = register_verifiers_env("tests.interop.vf_capitals", "test_broken", fail=True)
    env = gym.make("sandgym/Coding-v0", tasks=tasks)
    try:
        result = run_episode(env, OracleAgent(), tasks[0])
    finally:
        env.close()
    assert result.outcome.failure_mode == "task_error" and result.infra_failure and result.reward == 0.0
    assert "Error calling reward function broken" in result.outcome.grade.task_error

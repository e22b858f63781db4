"""Oracle solves and noop fails a sample of EVERY built-in family (both domains), through the real sandbox."""

from __future__ import annotations

import pytest

from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
from sandgym.envs.tool_env import ToolEnv

suites = pytest.importorskip("sandgym.tasks.suites")
from sandgym.tasks.registry import load_suite  # noqa: E402

FAMILIES = [f.suite for f in suites.families()]


def test_there_are_families_of_both_domains() -> None:
    domains = {s.split("/")[0] for s in FAMILIES}
    assert {"coding", "long_context"} <= domains


@pytest.mark.parametrize("suite", FAMILIES)
def test_oracle_solves_and_noop_fails(suite: str, local_ok) -> None:
    tasks = load_suite(suite, n=2, seed=7, difficulty=None)
    env = ToolEnv(tasks, reuse_sandbox=True)
    try:
        for task in tasks:
            good = run_episode(env, OracleAgent(), task)
            assert good.success, f"oracle failed {task.id}: {good.outcome}"
            assert good.reward_components["correctness@v1"] == 1.0 and not good.infra_failure
            bad = run_episode(env, NoopAgent(), task)
            assert not bad.success, f"noop solved {task.id}"
            assert bad.reward_components["completion@v1"] == 0.0
            assert bad.outcome.failure_mode == "wrong_answer"
    finally:
        env.close()


def test_oracle_handles_documents_only_reachable_by_tools(local_ok) -> None:
    tasks = load_suite("long_context/needle", n=1, seed=3, difficulty=3)
    assert tasks[0].metadata["placement"] == "file"
    env = ToolEnv(tasks)
    result = run_episode(env, OracleAgent(), tasks[0])
    env.close()
    assert result.success
    assert any("grep" in m["content"] for m in result.messages if m["role"] == "assistant")

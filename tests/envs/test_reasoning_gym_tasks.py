"""Imported reasoning-gym haystacks played in the real sandbox: an agent that greps the question's predicate and
submits the name it finds is rewarded; one that submits another name of the haystack, or nothing, is not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandgym.agents.scripted import NoopAgent, OracleAgent, call, run_episode
from sandgym.envs.builtin_tools import builtin_tools
from sandgym.envs.tool_env import ToolEnv
from sandgym.tasks.importers import import_file
from sandgym.tasks.importers.reasoning_gym import write_entries

pytest.importorskip("reasoning_gym")


@pytest.fixture
def task_and_entry(tmp_path: Path):
    path = write_entries("needle_haystack", tmp_path / "rg.jsonl", size=1, seed=5, min_num_statements=600,
                         max_num_statements=600)
    (task,) = import_file("reasoning_gym", path)
    return task, json.loads(path.read_text().splitlines()[0])


def test_grep_then_submit_the_name_found_earns_reward(task_and_entry, local_ok) -> None:
    task, entry = task_and_entry
    predicate = entry["metadata"]["question"].split("?")[0].split(" ", 2)[2]  # "Who <verb> <subject>?"
    env = ToolEnv([task], tools=builtin_tools(["grep", "read_file", "submit"]), code_action=None)
    try:
        env.reset(options={"task": task})
        obs, *_ = env.step(call("grep", pattern=predicate, path="document.txt"))
        assert entry["answer"] in obs
        _, reward, done, _, info = env.step(call("submit", answer=entry["answer"]))
        assert done and reward > 0 and info["outcome"].success
        env.reset(options={"task": task})
        wrong = next(line.split(" ")[0] for line in task.files["document.txt"].splitlines()
                     if not line.startswith(entry["answer"] + " "))
        _, reward, done, _, info = env.step(call("submit", answer=wrong))
        assert done and not info["outcome"].success and reward <= 0
    finally:
        env.close()


def test_oracle_solves_and_noop_fails(task_and_entry, local_ok) -> None:
    task, _ = task_and_entry
    env = ToolEnv([task], tools=builtin_tools(["grep", "read_file", "submit"]), code_action=None)
    try:
        assert run_episode(env, OracleAgent(), task).success
        assert not run_episode(env, NoopAgent(), task).success
    finally:
        env.close()

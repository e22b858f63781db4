"""The example plugin package installs with pip (offline, into a temp dir) and runs through gymnasium.make."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

from sandgym.agents.scripted import OracleAgent, run_episode
from sandgym.envs.registration import plugin_env_ids, register_plugins
from tests.fake_sandbox import FakeSandbox

ENV_ID = "sandgym_plugin_example/Arith-v0"


def test_plugin_env_and_suite_run_through_gymnasium_make(installed) -> None:
    assert ENV_ID in register_plugins() and ENV_ID in plugin_env_ids()
    from sandgym.tasks.registry import load_suite

    tasks = load_suite("arith:train", n=3)
    assert len(tasks) == 3 and all(t.family == "arith" for t in tasks)
    env = gym.make(ENV_ID, sandbox_factory=lambda t: FakeSandbox())
    try:
        _, info = env.reset(seed=0)
        assert [t["function"]["name"] for t in info["tools"]] == ["python", "submit"]
        for task in tasks:
            result = run_episode(env, OracleAgent(), task)
            assert result.success and result.reward == pytest.approx(1.0)
    finally:
        env.close()


def test_sandgym_envs_lists_the_plugin(plugin_env) -> None:
    proc = subprocess.run([sys.executable, "-m", "sandgym", "envs"], capture_output=True, text=True, env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    assert ENV_ID in proc.stdout and "[plugin]" in proc.stdout
    assert "sandgym/Coding-v0" in proc.stdout

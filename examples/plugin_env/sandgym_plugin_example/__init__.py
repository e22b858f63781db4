"""Example sandgym plugin: ``sandgym_plugin_example/Arith-v0`` and the ``arith`` task suite."""

from __future__ import annotations

import gymnasium as gym

ENV_ID = "sandgym_plugin_example/Arith-v0"


def register_envs() -> None:
    """The ``sandgym.envs`` entry point: register this package's env ids with Gymnasium."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="sandgym_plugin_example.env:ArithEnv", kwargs={"tasks": "arith:train"})

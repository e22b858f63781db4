"""Example sandgym plugin: envs ``sandgym_plugin_example/Arith-v0`` and ``.../Stats-v0``, suites ``arith`` and
``stats/*``, and the host-side verifier ``plugin_example.stats@v1``."""

from __future__ import annotations

import gymnasium as gym

ENV_ID = "sandgym_plugin_example/Arith-v0"
STATS_ENV_ID = "sandgym_plugin_example/Stats-v0"


def register_envs() -> None:
    """The ``sandgym.envs`` entry point: register this package's env ids with Gymnasium."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="sandgym_plugin_example.env:ArithEnv", kwargs={"tasks": "arith:train"})
    if STATS_ENV_ID not in gym.registry:
        gym.register(id=STATS_ENV_ID, entry_point="sandgym_plugin_example.env:StatsEnv",
                     kwargs={"tasks": "stats:train"})

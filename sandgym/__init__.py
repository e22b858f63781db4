"""sandgym: post-train LLM agents with RL on multi-step tasks run as Gymnasium environments in a real sandbox.

Importing sandgym registers its environments with Gymnasium, so ``gymnasium.make("sandgym/Coding-v0")`` works.
"""

from __future__ import annotations

__version__ = "0.1.0"

from sandgym.envs.registration import register_envs as _register_envs

_register_envs()

__all__ = ["__version__"]

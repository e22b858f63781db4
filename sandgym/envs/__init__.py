"""Environments: Gymnasium envs whose tools run in a sandbox, tool calling, and versioned rewards.

Names are imported lazily so ``import sandgym`` (which registers the env ids) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandgym.envs.coding import CodingEnv, RepoFixEnv
    from sandgym.envs.long_context import LongContextEnv
    from sandgym.envs.outcome import EpisodeOutcome
    from sandgym.envs.parsing import ParseError, ToolCall, parse_turn
    from sandgym.envs.rewards import REWARDS, RewardConfig, compute_rewards
    from sandgym.envs.spaces import AnyText
    from sandgym.envs.tool_env import ToolEnv
    from sandgym.envs.tools import Tool, ToolResult, ToolSet

_LAZY = {
    "ToolEnv": "sandgym.envs.tool_env",
    "CodingEnv": "sandgym.envs.coding",
    "RepoFixEnv": "sandgym.envs.coding",
    "LongContextEnv": "sandgym.envs.long_context",
    "EpisodeOutcome": "sandgym.envs.outcome",
    "ToolCall": "sandgym.envs.parsing",
    "ParseError": "sandgym.envs.parsing",
    "parse_turn": "sandgym.envs.parsing",
    "REWARDS": "sandgym.envs.rewards",
    "RewardConfig": "sandgym.envs.rewards",
    "compute_rewards": "sandgym.envs.rewards",
    "AnyText": "sandgym.envs.spaces",
    "Tool": "sandgym.envs.tools",
    "ToolResult": "sandgym.envs.tools",
    "ToolSet": "sandgym.envs.tools",
}

__all__ = [
    "REWARDS",
    "AnyText",
    "CodingEnv",
    "EpisodeOutcome",
    "LongContextEnv",
    "ParseError",
    "RepoFixEnv",
    "RewardConfig",
    "Tool",
    "ToolCall",
    "ToolEnv",
    "ToolResult",
    "ToolSet",
    "compute_rewards",
    "parse_turn",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sandgym.envs' has no attribute {name!r}")

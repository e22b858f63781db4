"""Agents: the ``Policy`` protocol, ``HFPolicy`` (LoRA), ``OpenAIPolicy``, scripted agents, the rollout engine.

Heavy modules (torch, transformers) load lazily on first attribute access, so ``sandgym.agents.scripted`` and
``sandgym.agents.trajectory`` stay cheap to import.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Turn": "trajectory",
    "Trajectory": "trajectory",
    "save_jsonl": "trajectory",
    "load_jsonl": "trajectory",
    "Policy": "policy",
    "ScriptedPolicy": "policy",
    "SamplingParams": "policy",
    "GenerationRequest": "policy",
    "Generation": "policy",
    "HFPolicy": "hf",
    "LoraSpec": "hf",
    "OpenAIPolicy": "openai",
    "ChatFormat": "prompting",
    "PromptConfig": "prompting",
    "resolve_model": "models",
    "ensure_embedded_model": "models",
    "EMBEDDED_MODEL": "models",
    "RolloutConfig": "rollout",
    "RolloutEngine": "rollout",
    "RolloutStats": "rollout",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"sandgym.agents.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'sandgym.agents' has no attribute {name!r}")

"""Check, before a run starts, that every task's first prompt fits: prompts are never cut silently.

A prompt (system prompt, tool schemas, the task) plus one turn's ``max_new_tokens`` must fit the episode's
``max_total_tokens``, and that budget must fit the model's context window (its ``max_position_embeddings``).
Otherwise the episode would end at once as truncated (or the model would read past its window) and be scored as
the agent's failure. :func:`check_context` resets one environment per task (no sandbox starts: it starts on first
tool use), tokenizes the prompt exactly as the rollout engine will, and raises a ``ConfigError`` that names the
longest tasks, their lengths and the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sandgym.agents.rollout_config import RolloutConfig
from sandgym.errors import ConfigError

__all__ = ["PromptLength", "check_context", "context_window", "prompt_lengths"]

log = logging.getLogger(__name__)

SHOWN = 5
"""Tasks named in the error (the longest first)."""


@dataclass(frozen=True)
class PromptLength:
    task_id: str
    tokens: int


def context_window(policy: Any) -> int | None:
    """The model's window in tokens (``config.max_position_embeddings``), None when the policy does not say."""
    config = getattr(getattr(policy, "model", None), "config", None)
    window = getattr(config, "max_position_embeddings", None)
    return int(window) if isinstance(window, int) and window > 0 else None


def prompt_lengths(policy: Any, env_factory: Callable[[], Any], tasks: Sequence[Any]) -> list[PromptLength]:
    """Tokens of each task's first prompt, as the rollout engine builds it (one env, reset per task)."""
    fmt = policy.chat_format
    env = env_factory()
    out = []
    try:
        for task in tasks:
            obs, info = env.reset(seed=0, options={"task": task})
            system = info.get("system_prompt")
            messages = fmt.normalize(list(info.get("messages") or [{"role": "user", "content": str(obs)}]), system)
            ids = fmt.prompt_ids(messages, list(info.get("tools") or []), system)
            out.append(PromptLength(str(getattr(task, "id", task)), len(ids)))
    finally:
        env.close()
    return out


def check_context(policy: Any, env_factory: Callable[[], Any], tasks: Sequence[Any], config: RolloutConfig,
                  *, where: str = "rollout") -> list[PromptLength]:
    """Raise ``ConfigError`` when a prompt plus one turn exceeds ``max_total_tokens`` or the budget exceeds the
    model's window; return the prompt lengths otherwise. Policies that do not work on tokens are not checked."""
    if not getattr(policy, "token_level", False) or getattr(policy, "chat_format", None) is None or not tasks:
        return []
    window = context_window(policy)
    if window is not None and config.max_total_tokens > window:
        raise ConfigError(
            f"{where}.max_total_tokens={config.max_total_tokens} exceeds the model's context window of {window} "
            f"tokens; set --set {where}.max_total_tokens={window} or less (and keep documents shorter)")
    try:
        lengths = prompt_lengths(policy, env_factory, tasks)
    except Exception as exc:  # noqa: BLE001 - an env that cannot reset outside a rollout is not checked, not fatal
        log.warning("prompt lengths not checked (%s: %s); the rollout will still flag truncated episodes",
                    type(exc).__name__, exc)
        return []
    limit = config.max_total_tokens - config.max_new_tokens
    over = sorted((p for p in lengths if p.tokens > limit), key=lambda p: -p.tokens)
    if over:
        shown = ", ".join(f"{p.task_id} ({p.tokens} tokens)" for p in over[:SHOWN])
        more = f" and {len(over) - SHOWN} more" if len(over) > SHOWN else ""
        need = over[0].tokens + config.max_new_tokens
        fix = (f"raise {where}.max_total_tokens to {need} or more" if window is None or need <= window else
               f"the model's window is {window} tokens: use shorter documents or fewer tools")
        raise ConfigError(
            f"{len(over)} of {len(lengths)} tasks have a first prompt longer than {where}.max_total_tokens "
            f"({config.max_total_tokens}) minus one turn's max_new_tokens ({config.max_new_tokens}): {shown}{more}; "
            f"their episodes would end before the first turn. Fix: {fix}")
    return lengths

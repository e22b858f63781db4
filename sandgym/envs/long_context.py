"""``sandgym/LongContext-v0``: questions about documents of ~1K-64K tokens, inline or reachable only by tools."""

from __future__ import annotations

from typing import Any, Literal

from sandgym.envs.tool_env import CodeAction, ToolEnv
from sandgym.errors import ConfigError
from sandgym.tasks.task import Task

__all__ = ["LongContextEnv"]

Placement = Literal["inline", "file"] | None


class LongContextEnv(ToolEnv):
    """Answer a question about a long document (needle, multi-hop, tracking, aggregation, constraints).

    Args:
        tokens: document length in tokens for every task (default: by difficulty, about 1K..64K).
        placement: ``"inline"`` (document in the prompt), ``"file"`` (only through read_file/grep), or None
            (inline up to ~1.5K tokens, else file).
    """

    default_suite = "long_context:train"

    def __init__(self, tasks: Any = None, *, tokens: int | None = None, placement: Placement = None,
                 code_action: CodeAction = "python", **kwargs: Any) -> None:
        if placement not in (None, "inline", "file"):
            raise ConfigError(f"placement={placement!r} is not one of 'inline', 'file', None")
        if tokens is not None and tokens < 200:
            raise ConfigError(f"tokens={tokens} is too small; use at least 200")
        self.tokens, self.placement = tokens, placement
        shape = {k: v for k, v in (("tokens", tokens), ("placement", placement)) if v is not None}
        super().__init__(tasks, code_action=code_action, suite_kwargs=shape, **kwargs)

    def task_filter(self, task: Task) -> bool:
        return self.placement is None or task.metadata.get("placement", "inline") == self.placement


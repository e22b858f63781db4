"""One way to make fresh tool environments for rollouts, shared by training and evaluation."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def tool_env_factory(
    *,
    backend: str = "local",
    code_action: str = "submit",
    tools: Sequence[str] = (),
    max_turns: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> Callable[[], Any]:
    """A callable returning a fresh :class:`~sandgym.envs.tool_env.ToolEnv` (tasks are given per episode through
    ``reset(options={"task": ...})``). ``code_action="none"`` disables code actions; empty ``tools`` offers all."""
    from sandgym.envs.builtin_tools import builtin_tools
    from sandgym.envs.tool_env import ToolEnv

    action = None if code_action == "none" else code_action
    names = list(tools) or None
    extra = dict(env_kwargs or {})

    def make() -> Any:
        return ToolEnv(tasks=[], backend=backend, code_action=action, max_turns=max_turns,  # type: ignore[arg-type]
                       tools=builtin_tools(names) if names else None, **extra)

    return make

"""A sandgym env's tools as an MCP server (``sandgym mcp ENV``), with the ``mcp`` package's low-level ``Server``.

Each MCP session (over stdio: the one client of the process) gets its own env and so its own sandbox. Its tools are
the env's tools (``python``, ``bash``, ``read_file``, ..., ``run_tests``, ``submit``) plus ``reset``:

- ``reset(task_id?, seed?)`` starts an episode and returns the task's prompt (a task id the served suite does not
  hold is refused, naming the ``--task-seed`` that makes the client's tasks the server's);
- every other call is one env step, the call written as the env's own action (``<tool_call>{...}</tool_call>``),
  so the env's budgets, counts and grading apply unchanged: each call is one turn of the task's ``max_turns``;
- ``submit`` (or a budget running out) ends the episode: the result carries the reward, its components and the
  failure mode, as text and as ``structuredContent``.

A call the env reports as an error (unknown tool, bad arguments, a tool error) comes back with ``isError``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio
import gymnasium as gym
import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

import sandgym  # noqa: F401  (registers sandgym/* ids and plugins)
from sandgym.envs.env_checks import check_env_kwargs
from sandgym.envs.registration import env_creator, resolve_env_id
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError

__all__ = ["McpEpisodes", "make_server", "serve"]

RESET_TOOL = mt.Tool.model_validate({
    "name": "reset",
    "description": "Start an episode on a task of the served suite and return its prompt. Call it first.",
    "inputSchema": {"type": "object", "properties": {
        "task_id": {"type": "string", "description": "a task id of the served suite (default: one drawn at random)"},
        "seed": {"type": "integer", "description": "seed of the draw when no task_id is given"}}},
})


def _result(text: str, error: bool = False, structured: dict[str, Any] | None = None) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=error,
                             structured_content=structured)


class McpEpisodes:
    """One MCP session's env, played one tool call per step (blocking; the server runs it in a worker thread)."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        if not isinstance(env.unwrapped, ToolEnv):
            raise ConfigError(f"sandgym mcp serves tool envs (ToolEnv subclasses); {env.unwrapped!r} is not one")
        self.env = env
        self.tool_env: ToolEnv = env.unwrapped
        self.done = True
        self._tool_errors = 0
        self._lock = threading.Lock()

    def tools(self) -> list[mt.Tool]:
        """The episode's tools (the env's before the first reset) and ``reset``."""
        out = [mt.Tool.model_validate({"name": s["function"]["name"], "description": s["function"]["description"],
                                       "inputSchema": s["function"]["parameters"]})
               for s in self.tool_env.toolset.schemas]
        return [*out, RESET_TOOL]

    def call(self, name: str, arguments: Mapping[str, Any]) -> mt.CallToolResult:
        with self._lock:
            if name == "reset":
                return self._reset(arguments.get("task_id"), arguments.get("seed"))
            if name not in self.tool_env.toolset:
                return _result(f"Unknown tool {name!r}; the tools are {self.tool_env.toolset.names} and reset", True)
            if self.done:
                return _result("No episode is running: call reset first (then submit ends it).", True)
            return self._step(name, arguments)

    def _reset(self, task_id: Any, seed: Any) -> mt.CallToolResult:
        if task_id is not None and not isinstance(task_id, str) or seed is not None and not isinstance(seed, int):
            return _result(f"reset takes task_id (string) and seed (integer); got {task_id!r}, {seed!r}", True)
        if task_id is not None:
            refused = self._refused(task_id)
            if refused:
                return _result(refused, True)
        prompt, info = self.env.reset(seed=seed, options={"task": task_id} if task_id else None)
        self.done = False
        self._tool_errors = 0
        text = (f"{prompt}\n\n[task {info['task_id']}: at most {info['max_turns']} tool calls; call submit when "
                "done]")
        return _result(text, structured={"task_id": info["task_id"], "prompt": prompt,
                                         "max_turns": info["max_turns"],
                                         "tools": [t["function"]["name"] for t in info["tools"]]})

    def _refused(self, task_id: str) -> str | None:
        """Why ``task_id`` cannot be reset to (a generated suite drawn with another task seed), or None."""
        source = self.tool_env.task_source
        if not isinstance(source.spec, str):
            return None
        ids = {t.id for t in source.tasks}
        if task_id in ids:
            return None
        return (f"task id {task_id!r} is not among this server's {len(ids)} tasks of {source.spec!r}, drawn with "
                f"task seed {source.seed}: draw the client's tasks with `--task-seed {source.seed}` (sandgym eval), "
                "or serve with the client's --task-seed")

    def _step(self, name: str, arguments: Mapping[str, Any]) -> mt.CallToolResult:
        action = "<tool_call>" + json.dumps({"name": name, "arguments": dict(arguments)}) + "</tool_call>"
        _, reward, terminated, truncated, info = self.env.step(action)
        text = "\n".join(m["content"] for m in info.get("messages", []))
        errors = info["actions"].tool_errors
        error = bool(info.get("parse_errors")) or errors > self._tool_errors
        self._tool_errors = errors
        if not (terminated or truncated):
            return _result(text, error)
        self.done = True
        components = {k: float(v) for k, v in info.get("reward_components", {}).items()}
        outcome = {"reward": float(reward), "done": True, "failure_mode": info.get("failure_mode"),
                   "truncation": info.get("truncation"), "reward_components": components}
        if info.get("error"):
            outcome["error"] = info["error"]
        paid = ", ".join(f"{k} {v:.4g}" for k, v in components.items() if v)
        text += (f"\n[episode over: reward {reward:.4g} ({info.get('failure_mode')}{'; ' + paid if paid else ''}). "
                 "Call reset for another task.]")
        return _result(text, error, structured=outcome)

    def close(self) -> None:
        self.env.close()


def make_server(env_id: str = "sandgym/Coding-v0", env_kwargs: Mapping[str, Any] | None = None,
                task_seed: int | None = None) -> Server[McpEpisodes]:
    """The MCP server: each session (its lifespan) makes ``gym.make(env_id, **env_kwargs)`` and closes it at the end.

    The env id and kwargs are checked now (one env is made and closed). ``task_seed``: the seed of a sandgym env's
    suite (its ``suite_seed``, unless ``env_kwargs`` sets one); None keeps the env's own."""
    env_id = resolve_env_id(env_id)
    kwargs = dict(env_kwargs or {})
    check_env_kwargs(env_id, kwargs, label="--env-kwargs key")
    creator = env_creator(env_id)
    is_tool_env = isinstance(creator, type) and issubclass(creator, ToolEnv)
    if task_seed is not None and "suite_seed" not in kwargs and is_tool_env:
        kwargs["suite_seed"] = task_seed
    McpEpisodes(gym.make(env_id, **kwargs)).close()  # fail now (id, kwargs, suite, not a tool env)

    @asynccontextmanager
    async def lifespan(_: Server[McpEpisodes]) -> AsyncIterator[McpEpisodes]:
        episodes = await anyio.to_thread.run_sync(lambda: McpEpisodes(gym.make(env_id, **kwargs)))
        try:
            yield episodes
        finally:
            await anyio.to_thread.run_sync(episodes.close)

    async def list_tools(ctx: Any, params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=ctx.lifespan_context.tools())

    async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        episodes: McpEpisodes = ctx.lifespan_context
        return await anyio.to_thread.run_sync(episodes.call, params.name, dict(params.arguments or {}))

    return Server("sandgym", version=_version(), lifespan=lifespan, on_list_tools=list_tools,
                  on_call_tool=call_tool,
                  instructions=f"sandgym env {env_id}: call reset, act with the tools in the sandbox, then submit.")


def _version() -> str:
    try:
        return version("sandgym")
    except PackageNotFoundError:  # run from a source tree
        return ""


def serve(env_id: str = "sandgym/Coding-v0", *, env_kwargs: Mapping[str, Any] | None = None,
          task_seed: int | None = None) -> None:
    """Serve over stdio until the client closes stdin."""
    server = make_server(env_id, env_kwargs, task_seed)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)

"""A sandgym env as a ``verifiers`` environment: ``load_environment(env_id=..., suite=..., n=...)``.

Targets the classic ``verifiers`` API (``vf.MultiTurnEnv`` + ``vf.Rubric``; ``verifiers>=0.3,<0.4``, where it
lives in ``verifiers.legacy`` and answers at ``import verifiers as vf``). ``verifiers`` 0.4 removed that stack
(its ``verifiers.v1`` is harness/taskset based) and is not supported here.

- dataset: one row per task: ``prompt`` = the env's ``[system, user]`` messages from ``reset``, ``answer`` = "",
  ``info`` = ``{"task_id": ..., "env_id": ...}`` (JSON);
- a rollout: ``setup_state`` builds a fresh sandgym env and resets it on the row's task; every assistant
  message is one ``env.step(text)`` (``env_response`` returns the env's reply as a user message); when the
  sandgym episode ends (submit or a budget) the reply becomes ``final_env_response`` and the rollout stops;
- reward: the rubric's ``sandgym_reward`` is sandgym's own episode reward (weighted components), with the
  metrics ``sandgym_correctness`` and ``sandgym_success``; an episode that never ended scores 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import verifiers as vf
from datasets import Dataset

import sandgym  # noqa: F401  (registers sandgym/* ids and plugins)
from sandgym.tasks.task import Task

__all__ = ["SandgymVerifiersEnv", "load_environment"]


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content parts
        parts = [p.get("text", "") if isinstance(p, Mapping) else getattr(p, "text", "") for p in content]
        return "".join(str(p or "") for p in parts)
    return "" if content is None else str(content)


def _role(message: Any) -> str:
    return str(message.get("role") if isinstance(message, Mapping) else getattr(message, "role", ""))


async def sandgym_reward(state: Any, **kwargs: Any) -> float:
    """sandgym's episode reward (0.0 when the episode did not end)."""
    return float((state.get("sandgym") or {}).get("reward", 0.0))


async def sandgym_correctness(state: Any, **kwargs: Any) -> float:
    return float(((state.get("sandgym") or {}).get("reward_components") or {}).get("correctness@v1", 0.0))


async def sandgym_success(state: Any, **kwargs: Any) -> float:
    return float((state.get("sandgym") or {}).get("failure_mode") == "success")


class SandgymVerifiersEnv(vf.MultiTurnEnv):
    """Rollouts step a sandgym env (``gym.make(env_id, tasks=tasks, **env_kwargs)``), one per rollout."""

    def __init__(self, env_id: str, tasks: Sequence[Task], env_kwargs: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        self.sandgym_env_id = env_id
        self.sandgym_tasks = list(tasks)
        self.sandgym_env_kwargs = dict(env_kwargs or {})
        self._envs: dict[str, Any] = {}
        probe = self._make_env()
        rows = []
        try:
            for task in self.sandgym_tasks:
                _, info = probe.reset(options={"task": task})
                rows.append({"prompt": [{"role": m["role"], "content": m["content"]} for m in info["messages"]],
                             "answer": "", "info": json.dumps({"task_id": task.id, "env_id": env_id})})
        finally:
            probe.close()
        rubric = vf.Rubric(funcs=[sandgym_reward], weights=[1.0])
        rubric.add_metric(sandgym_correctness)
        rubric.add_metric(sandgym_success)
        max_turns = max((t.limits.max_turns for t in self.sandgym_tasks), default=8) + 1
        kwargs.setdefault("max_turns", max_turns)
        super().__init__(dataset=Dataset.from_list(rows), rubric=rubric, env_id=env_id, **kwargs)

    def _make_env(self) -> Any:
        return gym.make(self.sandgym_env_id, tasks=self.sandgym_tasks, **self.sandgym_env_kwargs)

    async def setup_state(self, state: Any) -> Any:
        info = state["info"]
        task_id = (json.loads(info) if isinstance(info, str) else info)["task_id"]
        env = self._make_env()
        env.reset(options={"task": task_id})
        self._envs[state["trajectory_id"]] = env
        state["sandgym"] = {"task_id": task_id, "done": False, "reward": 0.0, "reward_components": {},
                            "failure_mode": None}
        return state

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        env = self._envs.get(state["trajectory_id"])
        if env is None or state["sandgym"]["done"]:
            reply = [{"role": "user", "content": "The episode is over."}]
            state["final_env_response"] = reply
            return reply
        last = next((m for m in reversed(list(messages)) if _role(m) == "assistant"), None)
        text, reward, terminated, truncated, info = env.step(_text(last) if last is not None else "")
        reply = [{"role": "user", "content": text or "(no output)"}]
        if terminated or truncated:
            state["sandgym"].update(done=True, reward=float(reward), failure_mode=info.get("failure_mode"),
                                    reward_components={k: float(v) for k, v in
                                                       info.get("reward_components", {}).items()},
                                    infra_failure=bool(info.get("infra_failure")))
            state["final_env_response"] = reply
            self._close(state)
        return reply

    def _close(self, state: Any) -> None:
        env = self._envs.pop(state["trajectory_id"], None)
        if env is not None:
            env.close()

    @vf.cleanup
    async def close_sandgym_env(self, state: Any) -> None:
        self._close(state)


def load_environment(env_id: str = "sandgym/Coding-v0", suite: str | Sequence[Task] | None = None,
                     n: int | None = None, seed: int = 0, env_kwargs: Mapping[str, Any] | None = None,
                     **kwargs: Any) -> SandgymVerifiersEnv:
    """A verifiers environment over ``env_id`` with the tasks of ``suite`` (a ``load_suite`` spec, a task file,
    or Tasks; default: the env's own suite), ``n`` of them, generated with ``seed``. ``kwargs`` go to
    ``vf.MultiTurnEnv`` (e.g. ``max_turns``, ``timeout_seconds``)."""
    kw = dict(env_kwargs or {})
    make_kw: dict[str, Any] = {**kw, "suite_seed": seed}
    if suite is not None:
        make_kw["tasks"] = list(suite) if not isinstance(suite, str) else suite
    if n is not None and (suite is None or isinstance(suite, str)):
        make_kw["suite_n"] = n
    probe = gym.make(env_id, **make_kw)
    try:
        tasks = list(probe.unwrapped.task_source.tasks)  # type: ignore[attr-defined]
    finally:
        probe.close()
    if n is not None:
        tasks = tasks[:n]
    return SandgymVerifiersEnv(env_id, tasks, kw, **kwargs)

"""A deterministic text env following the ToolEnv contract, and a tiny scripted agent (test doubles)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade

TOOLS = [{"type": "function", "function": {"name": "echo", "description": "Echo text.", "parameters": {"type": "object"}}}]


@dataclass(frozen=True)
class FakeTask:
    id: str
    turns_needed: int = 2
    domain: str = "fake"
    family: str = "echo"
    split: str = "train"


class EchoEnv(gym.Env):
    """Answers each turn with a tool message; terminates after ``task.turns_needed`` turns.

    Reward 1.0 when the last action contains "ok". ``step_delay`` simulates a slow sandbox; ``fail_on_step``
    raises inside step (an infrastructure failure).
    """

    closed = 0
    _lock = threading.Lock()

    def __init__(self, step_delay: float = 0.0, fail_on_step: int | None = None, truncate_after: int | None = None,
                 reset_delay: float = 0.0) -> None:
        self.step_delay, self.fail_on_step, self.truncate_after = step_delay, fail_on_step, truncate_after
        self.reset_delay = reset_delay
        self.task: FakeTask | None = None
        self.n = 0

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.task = (options or {})["task"]
        if self.reset_delay:
            time.sleep(self.reset_delay * (int(self.task.id) % 4 if self.task.id.isdigit() else 1))
        self.n = 0
        obs = f"Task {self.task.id}: reply ok."
        system = "You are a test agent. Tools: echo."
        return obs, {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": obs}],
            "tools": TOOLS,
            "system_prompt": system,
            "task": self.task,
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self.task is not None
        if self.step_delay:
            time.sleep(self.step_delay)
        self.n += 1
        if self.fail_on_step is not None and self.n >= self.fail_on_step:
            raise RuntimeError("sandbox died")
        obs = f"result {self.n}: {len(action)} chars"
        done = self.n >= self.task.turns_needed
        trunc = self.truncate_after is not None and self.n >= self.truncate_after and not done
        info: dict[str, Any] = {"messages": [{"role": "tool", "content": obs}], "infra_failure": False}
        reward = 0.0
        if done or trunc:
            reward = 1.0 if "ok" in action and done else 0.0
            info.update(
                reward_components={"correct@v1": reward}, runtime={"wall_s": 0.01, "label": "x"},
                outcome=EpisodeOutcome(task_id=self.task.id, grade=Grade(kind="match", answer_matched=bool(reward)),
                                       actions=Actions(turns=self.n, submitted=done),
                                       truncation="env" if trunc else None),
            )
        return obs, reward, done, trunc, info

    def close(self) -> None:
        with EchoEnv._lock:
            EchoEnv.closed += 1


class OkAgent:
    """Scripted: says 'ok' with a tool call every turn."""

    def reset(self, task: Any) -> None:
        self.turn = 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        self.turn += 1
        return f'ok {self.turn} <tool_call>{{"name": "echo", "arguments": {{}}}}</tool_call>'

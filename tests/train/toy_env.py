"""A toy environment with a scripted reward, for trainer tests: reward = share of lowercase letters in the
model's text (or, with ``first_only``, whether its first character is one). Registered as ``toy/Letters-v0`` when imported."""

from __future__ import annotations

from typing import Any

import gymnasium

from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade
from sandgym.envs.spaces import AnyText


class LettersEnv(gymnasium.Env):
    def __init__(self, target: str = "abcdefghijklmnopqrstuvwxyz", turns: int = 1, intermediate: bool = False,
                 first_only: bool = False, final_target: str = "") -> None:
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self.target = set(target)
        self.final_target = set(final_target) if final_target else self.target
        self.intermediate = intermediate
        self.first_only = first_only
        self.turns = turns
        self._t = 0
        self._scores: list[float] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        self._scores = []
        task = (options or {}).get("task")
        messages = [{"role": "system", "content": "Write letters."}, {"role": "user", "content": "go"}]
        return "go", {"messages": messages, "tools": [], "task": task, "system_prompt": "Write letters."}

    def step(self, action: str):
        self._t += 1
        target = self.final_target if self._t >= self.turns else self.target
        score = float(action[:1] in target) if self.first_only else sum(c in target for c in action) / max(len(action), 1)
        self._scores.append(score)
        done = self._t >= self.turns
        if self.intermediate:  # earlier turns are scored as checkable intermediate states, the last one at the end
            reward = score if done else 0.0
        else:
            reward = float(sum(self._scores) / len(self._scores)) if done else 0.0
        info: dict[str, Any] = {"messages": [] if done else [{"role": "user", "content": "more"}]}
        if self.intermediate and not done:
            info["turn_reward"] = score
        if done:
            outcome = EpisodeOutcome(grade=Grade(kind="match", answer_matched=reward > 0.5),
                                     actions=Actions(turns=self._t, submitted=True))
            info.update(reward_components={"letters@v1": reward}, runtime={}, infra_failure=False, outcome=outcome,
                        turn_rewards=list(self._scores))
        return ("" if done else "more"), reward, done, False, info


if "toy/Letters-v0" not in gymnasium.registry:
    gymnasium.register(id="toy/Letters-v0", entry_point="tests.train.toy_env:LettersEnv")

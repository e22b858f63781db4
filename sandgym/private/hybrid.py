"""A hybrid reward named from a training or evaluation config: rule terms first, a model judge second.

``sandgym/Judged-v0`` (registered when this module is imported, so name it as
``"sandgym.private.hybrid:sandgym/Judged-v0"``) wraps another env id (``inner``) and, on an episode's last step,
replaces its reward by :class:`~sandgym.private.judge.HybridReward`: the weighted mean of the inner env's reward
components named in ``rules`` and the judge's score of the agent's turns against ``rubric``. Both configs embed
the same ``[rollout]`` table, so one table serves ``sandgym train`` and ``sandgym eval``::

    [rollout]
    env = "sandgym.private.hybrid:sandgym/Judged-v0"
    [rollout.env_kwargs]
    inner = "sandgym/Coding-v0"
    [rollout.env_kwargs.judge]
    policy = "python:my_pkg.judges:make_judge"   # or openai:URL#MODEL (e.g. a `sandgym serve-model` endpoint)
    rubric = "The code is idiomatic and the agent explained its fix."
    rules = {"correctness@v1" = 1.0}
    weight = 0.3                                  # the judge's weight: below the rules' total
    labelled = "judge_labels.jsonl"              # re-calibrated against it every `calibrate_every` steps
    calibrate_every = 10
    max_drift = 0.1

During training (``sandgym train``), :func:`sandgym.experiments.judge_drift.maybe_recalibrate` re-runs the
calibration every ``calibrate_every`` steps and warns when agreement fell, or ECE rose, by more than ``max_drift``
from the first calibration of the run. Infra failures and task errors keep the inner env's reward (0) and are never
judged.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import gymnasium as gym

from sandgym.agents.openai import OpenAIPolicy
from sandgym.envs.builtin_tools import builtin_tools
from sandgym.envs.registration import env_creator
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError
from sandgym.private.judge import HybridReward, JudgeReward

__all__ = ["ENV_ID", "JudgeSpec", "HybridRewardWrapper", "load_judge", "make_judged_env"]

ENV_ID = "sandgym/Judged-v0"
MAX_ANSWER_CHARS = 6000
"""The judge sees the agent's turns, joined, cut to their last this many characters."""


@dataclass(frozen=True)
class JudgeSpec:
    """The ``judge`` table of ``sandgym/Judged-v0``'s kwargs (see the module docstring)."""

    policy: str
    """``python:module:attr`` (a text Policy, or a factory returning one) or ``openai:URL#MODEL``."""
    rubric: str
    rules: Mapping[str, float] = field(default_factory=lambda: {"correctness@v1": 1.0})
    """Inner reward components (``name@vN``) -> weight: the primary, rule-based terms."""
    weight: float = 0.3
    """The judge's weight; must stay below the rules' total."""
    version: str = "v1"
    """The judge's version label (part of its reward version hash)."""
    labelled: str = ""
    """A labelled JSONL set (``prompt``, ``answer``, ``label``) for re-calibration during training."""
    calibrate_every: int = 0
    """Re-calibrate against ``labelled`` every N training steps (0: never)."""
    max_drift: float = 0.1
    """Warn when agreement drops, or ECE rises, by more than this from the run's first calibration."""
    threshold: float = 0.5
    """Judge score at or above which it says 'pass' (for agreement)."""

    def __post_init__(self) -> None:
        if not self.policy.startswith(("python:", "openai:")):
            raise ConfigError(f"judge.policy={self.policy!r}: use python:module:attr or openai:URL#MODEL (serve a "
                              "local model with `sandgym serve-model` and point openai: at it)")
        if not self.rubric.strip():
            raise ConfigError("judge.rubric is empty; say what a good answer must do")
        if not self.rules or any(not isinstance(v, (int, float)) or v < 0 for v in self.rules.values()):
            raise ConfigError(f"judge.rules={dict(self.rules)!r} must map reward names to weights >= 0, e.g. "
                              "{\"correctness@v1\" = 1.0}")
        if not math.isfinite(self.weight) or self.weight < 0 or self.weight >= sum(self.rules.values()):
            raise ConfigError(f"judge.weight={self.weight} must be >= 0 and below the rules' total "
                              f"{sum(self.rules.values())} (rules are primary)")
        if self.calibrate_every < 0 or (self.calibrate_every > 0 and not self.labelled):
            raise ConfigError(f"judge.calibrate_every={self.calibrate_every} needs judge.labelled (a labelled JSONL "
                              "set) and must be >= 0")
        if not 0 < self.max_drift <= 1 or not 0 < self.threshold <= 1:
            raise ConfigError(f"judge.max_drift={self.max_drift} and judge.threshold={self.threshold} must be in "
                              "(0, 1]")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | JudgeSpec) -> JudgeSpec:
        """From a config table; an unknown key is an error naming the known ones."""
        if isinstance(data, JudgeSpec):
            return data
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"judge: unknown key(s) {unknown}; known: {sorted(known)}")
        if "policy" not in data or "rubric" not in data:
            raise ConfigError("judge needs 'policy' (python:module:attr or openai:URL#MODEL) and 'rubric'")
        values: dict[str, Any] = {k: (dict(v) if k == "rules" else v) for k, v in data.items()}
        return cls(**values)


@functools.lru_cache(maxsize=8)
def _judge(policy: str, rubric: str, version: str) -> JudgeReward:
    if policy.startswith("openai:"):
        url, _, model = policy[len("openai:"):].partition("#")
        return JudgeReward(OpenAIPolicy(base_url=url, model=model), rubric, version=version)
    module, _, attr = policy[len("python:"):].rpartition(":")
    if not module or not attr:
        raise ConfigError(f"judge.policy={policy!r} must look like python:package.module:attribute")
    obj = getattr(importlib.import_module(module), attr)
    return JudgeReward(obj() if callable(obj) and not hasattr(obj, "generate") else obj, rubric, version=version)


def load_judge(spec: JudgeSpec) -> JudgeReward:
    """The judge of ``spec``, made once per process (the env copies and the re-calibration share it)."""
    return _judge(spec.policy, spec.rubric, spec.version)


class HybridRewardWrapper(gym.Wrapper):
    """On the last step, reward = HybridReward(rules from ``info["reward_components"]``, the judge); the judge's
    score (``judge@<hash>``), the hybrid (``hybrid@<hash>``) and the inner reward (``inner_reward``) are added to
    the components."""

    def __init__(self, env: gym.Env, spec: JudgeSpec) -> None:
        super().__init__(env)
        self.judge_spec = spec
        self.judge = load_judge(spec)
        self._prompt = ""
        self._turns: list[str] = []

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        task = info.get("task")
        self._prompt = str(getattr(task, "prompt", obs))
        self._turns = []
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, inner, terminated, truncated, info = self.env.step(action)
        reward = float(inner)
        self._turns.append(str(action))
        comps = info.get("reward_components")
        if (terminated or truncated) and comps is not None and not info.get("infra_failure"):
            missing = sorted(set(self.judge_spec.rules) - set(comps))
            if missing:
                raise ConfigError(f"judge.rules names {missing}, which the env does not report; it reports "
                                  f"{sorted(comps)}")
            terms = {name: (lambda _p, _a, v=float(comps[name]): v) for name in self.judge_spec.rules}
            hybrid = HybridReward(terms, self.judge, {**self.judge_spec.rules, "judge": self.judge_spec.weight})
            result = hybrid.score([self._prompt], ["\n\n".join(self._turns)[-MAX_ANSWER_CHARS:]])[0]
            info["reward_components"] = {**comps, result.judge.version: result.judge.score,
                                         hybrid.version: result.reward, "inner_reward": float(reward)}
            reward = result.reward
        return obs, reward, terminated, truncated, info


def make_judged_env(judge: Mapping[str, Any] | JudgeSpec, inner: str = "sandgym/Coding-v0",
                    **kwargs: Any) -> HybridRewardWrapper:
    """``inner`` (any env id; it gets every other keyword: the rollout's settings and env_kwargs) wrapped in
    :class:`HybridRewardWrapper` with ``judge`` (a :class:`JudgeSpec` or its config table)."""
    spec = JudgeSpec.from_dict(judge)
    tools = kwargs.get("tools")
    creator = env_creator(inner)
    if tools and all(isinstance(t, str) for t in tools) and isinstance(creator, type) and issubclass(creator, ToolEnv):
        kwargs["tools"] = builtin_tools(list(tools))
    return HybridRewardWrapper(gym.make(inner, disable_env_checker=True, **kwargs), spec)


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="sandgym.private.hybrid:make_judged_env", disable_env_checker=True)

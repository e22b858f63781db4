"""``RolloutSpec``: how episodes are rolled out, defined once for training and evaluation.

Both :class:`sandgym.train.config.TrainConfig` and :class:`sandgym.evaluate.config.EvalConfig` embed one, as the
TOML table ``[rollout]``; it is validated once, here, and everything a rollout needs is built from it: the
agents-level :class:`~sandgym.agents.rollout_config.RolloutConfig` (:meth:`RolloutSpec.rollout_config`) and the
environments (:meth:`RolloutSpec.env_factory`).

The field defaults below are training's. ``sandgym eval`` starts from :data:`sandgym.evaluate.config.EVAL_ROLLOUT`,
which differs in three values (``max_new_tokens=160``, ``max_total_tokens=4096``, ``temperature=0.7``); a
``[rollout]`` table or ``--set rollout.KEY=...`` overrides the entry point's defaults key by key.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sandgym.agents.rollout_config import RolloutConfig
from sandgym.envs.factory import explicit_settings, rollout_env_factory, rollout_env_kwargs
from sandgym.envs.parsing import stop_strings_for
from sandgym.errors import ConfigError
from sandgym.sandbox.factory import backends

TRUNCATED_TURN = ("end", "continue")
CODE_ACTIONS = ("python", "submit", "test", "none")


@dataclass(frozen=True)
class RolloutSpec:
    """Sampling, budgets, the code action, tools, sandbox and environment of a rollout (TOML table ``[rollout]``)."""

    max_new_tokens: int = 128
    """Tokens per model turn."""
    max_turns: int = 3
    """Model turns per episode."""
    max_total_tokens: int = 2048
    """Tokens per episode (prompt, every turn and the environment's replies)."""
    temperature: float = 1.0
    """Sampling temperature (> 0: pass@k and the policy gradient need sampling)."""
    top_p: float = 1.0
    """Nucleus sampling: sample from the smallest set of tokens whose probability reaches top_p, in (0, 1]."""
    truncated_turn: Literal["end", "continue"] = "end"
    """A turn cut by max_new_tokens: "end" the episode (flagged truncated, scored 0 as unfinished) or
    "continue" (its text still goes to the environment)."""
    code_action: Literal["python", "submit", "test", "none"] = "submit"
    """A fenced python block with no tool call: run it ("python"), write it to the task's file and submit
    ("submit"), write it to the task's file and run the visible tests ("test": test-and-fix, a turn saying SUBMIT
    submits), or count it as a turn without a tool call ("none"). Also decides the stop strings."""
    tools: tuple[str, ...] = ()
    """Tool names offered to the agent (empty: all built-in tools). Fewer tools make a shorter system prompt."""
    sandbox: str = "local"
    """Sandbox backend: local, e2b, unsafe-local, a plugin's, or auto (e2b when E2B_API_KEY is set)."""
    env: str = ""
    """A Gymnasium id to roll out in instead of sandgym's tool environment (e.g. a plugin's env, or
    "my_pkg.envs:my/Env-v0" to import the module that registers it). It receives ``max_turns``, ``sandbox`` (as
    ``backend``), ``code_action`` and ``tools`` when its constructor takes them (so episodes the rollout cuts at
    max_turns are cut and graded by the env), then ``env_kwargs``. Setting one of these that the env cannot
    take is a config error."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of the environment: for sandgym's tool environment e.g. system_prompt,
    require_submit, turn_rewards, turn_term (docs/ENVIRONMENTS.md lists them)."""

    def __post_init__(self) -> None:
        validate(self)

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """Where generation stops: the end of a tool call, and of a code block when code actions are on."""
        return stop_strings_for(None if self.code_action == "none" else self.code_action)

    def rollout_config(self, seed: int, *, policy_version: int = 0) -> RolloutConfig:
        """The engine's :class:`RolloutConfig`: these budgets and sampling settings, sampling seed ``seed``."""
        return RolloutConfig(
            max_new_tokens=self.max_new_tokens,
            max_turns=self.max_turns,
            max_total_tokens=self.max_total_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            truncated_turn=self.truncated_turn,
            stop_strings=self.stop_strings,
            seed=seed,
            policy_version=policy_version,
        )

    def env_factory(self) -> Callable[[], Any]:
        """A callable making one fresh environment (``env``, or sandgym's tool environment) with these settings;
        tasks are passed per episode through ``reset(options={"task": ...})``."""
        return rollout_env_factory(self.env, self.env_settings(), self.env_kwargs, explicit=explicit_settings(self))

    def env_settings(self) -> dict[str, Any]:
        """The settings an environment is made with (:data:`sandgym.envs.factory.ROLLOUT_ENV_KWARGS`)."""
        return {"max_turns": self.max_turns, "sandbox": self.sandbox, "code_action": self.code_action,
                "tools": self.tools}


def validate(r: RolloutSpec) -> None:
    """Checked before any work starts; each error names the key (``rollout.KEY``), the value and the fix."""

    def bad(key: str, fix: str) -> ConfigError:
        return ConfigError(f"rollout.{key}={getattr(r, key)!r}: {fix}")

    for key in ("max_new_tokens", "max_turns", "max_total_tokens"):
        if getattr(r, key) < 1:
            raise bad(key, "must be >= 1")
    if r.temperature <= 0:
        raise bad("temperature", "sampling needs a temperature > 0 (pass@k and the policy gradient sample)")
    if not 0 < r.top_p <= 1:
        raise bad("top_p", "use a value in (0, 1]")
    if r.truncated_turn not in TRUNCATED_TURN:
        raise bad("truncated_turn", f"use one of {list(TRUNCATED_TURN)}")
    if r.code_action not in CODE_ACTIONS:
        raise bad("code_action", f"use one of {list(CODE_ACTIONS)}")
    _check_sandbox(r.sandbox)
    # the env id, the settings it takes and env_kwargs (see sandgym.envs.factory.rollout_env_kwargs)
    rollout_env_kwargs(r.env, r.env_settings(), r.env_kwargs, explicit=explicit_settings(r), prefix="rollout.")


def _check_sandbox(name: str) -> None:
    names = backends()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"rollout.sandbox={name!r} is not a sandbox backend; {hint}use one of {', '.join(names)} "
                          "(`sandgym sandbox check --backend NAME` tests one)")


__all__ = ["CODE_ACTIONS", "TRUNCATED_TURN", "RolloutSpec", "validate"]

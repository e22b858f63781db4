"""The one config of ``sandgym eval``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sandgym.errors import ConfigError

DEFAULT_N_TASKS = 16
"""Tasks drawn from each generated suite when ``n_tasks`` is not given."""


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate, on what, and how often.

    ``policy`` / ``baseline``: ``smollm2-135m`` or another base model (hub id available offline or a local
    directory), a PEFT adapter directory, a training run directory (its latest checkpoint), an
    OpenAI-compatible endpoint ``openai:BASE_URL[#MODEL]``, or a scripted agent ``oracle`` / ``noop`` / ``random``.
    ``suites``: built-in (``coding/strings:heldout``), plugin, imported JSONL, or a task folder.
    """

    policy: str
    suites: tuple[str, ...]
    out: str = "runs/eval"
    samples: int = 4
    """K samples per task (pass@k is reported for k = 1..K)."""
    seeds: tuple[int, ...] = (0,)
    n_tasks: int | None = None
    """Tasks drawn from each suite: None takes ``DEFAULT_N_TASKS`` from a generated suite and a JSONL file or task
    folder whole; a number caps both."""
    task_seed: int = 1
    difficulty: int | None = None
    baseline: str | None = None
    max_new_tokens: int = 160
    max_turns: int = 3
    max_total_tokens: int = 4096
    temperature: float = 0.7
    top_p: float = 1.0
    code_action: str = "submit"
    truncated_turn: str = "end"
    """A turn cut by max_new_tokens: "end" the episode (scored as unfinished) or "continue", as in training."""
    tools: tuple[str, ...] = ()
    """Tool names offered to the agent (empty: all built-in tools)."""
    sandbox: str = "local"
    env: str = ""
    """A registered Gymnasium id to evaluate in instead of sandgym's tool environment (as ``rollout.env`` in
    training); it gets ``max_turns``, ``sandbox``, ``code_action`` and ``tools`` when it takes them."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of the environment (e.g. ``system_prompt``), as in the training config."""
    trained_families: tuple[str, ...] = ()
    """Families the policy was trained on (empty: every family not marked unseen), for the transfer view."""
    batch_episodes: int = 64
    ray_workers: int = 0
    """Fan the (seed, task) groups out to this many Ray workers (0: roll out in this process)."""
    ray_address: str = ""
    """Ray cluster to join when ``ray_workers > 0`` (empty: start a local Ray instance)."""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.suites:
            raise ConfigError("eval needs at least one --suite (e.g. --suite coding:heldout); see `sandgym tasks list`")
        if self.samples < 1:
            raise ConfigError(f"--samples={self.samples} must be >= 1")
        if not self.seeds:
            raise ConfigError("--seeds must list at least one seed")
        if self.temperature <= 0:
            raise ConfigError(f"temperature={self.temperature} must be > 0 (sampling is needed for pass@k)")
        if self.code_action not in ("python", "submit", "none"):
            raise ConfigError(f"code_action={self.code_action!r} is not one of 'python', 'submit', 'none'")
        if self.n_tasks is not None and self.n_tasks < 1:
            raise ConfigError(f"--n-tasks={self.n_tasks} must be >= 1 (or left out: {DEFAULT_N_TASKS} per generated "
                              "suite, files whole)")
        if self.max_turns < 1:
            raise ConfigError(f"--max-turns={self.max_turns} must be >= 1")
        from sandgym.envs.factory import explicit_settings, rollout_env_kwargs

        settings = {"max_turns": self.max_turns, "sandbox": self.sandbox, "code_action": self.code_action,
                    "tools": self.tools}
        rollout_env_kwargs(self.env, settings, self.env_kwargs, explicit=explicit_settings(self), prefix="")
        if self.ray_workers < 0 or (self.ray_address and self.ray_workers == 0):
            raise ConfigError(f"ray_workers={self.ray_workers} (ray_address={self.ray_address!r}): use --ray-workers N "
                              "with N >= 1 to evaluate on Ray, or 0 (and no --ray-address) for one process")

    @classmethod
    def with_seeds(cls, n: int, **kw: Any) -> EvalConfig:
        return cls(seeds=tuple(range(n)), **kw)


def parse_suites(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(s for v in values for s in v.split(",") if s)

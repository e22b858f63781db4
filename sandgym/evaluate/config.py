"""The one config of ``sandgym eval``: an optional TOML file, ``--set`` overrides and flags derived from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandgym.configs import load_dataclass
from sandgym.errors import ConfigError
from sandgym.rollout.spec import RolloutSpec
from sandgym.tasks.registry import DEFAULT_TASK_SEED

DEFAULT_N_TASKS = 16
"""Tasks drawn from each generated suite when ``n_tasks`` is not given."""

EVAL_ROLLOUT = RolloutSpec(max_new_tokens=160, max_total_tokens=4096, temperature=0.7)
"""Evaluation's default ``[rollout]``: :class:`RolloutSpec`'s defaults (training's) except these three, which are
what ``sandgym eval`` has always used (longer turns and episodes, a lower temperature). A ``[rollout]`` table or
``--set rollout.KEY=...`` overrides them key by key."""


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate, on what, and how often.

    ``policy`` / ``baseline``: ``smollm2-135m`` or another base model (hub id available offline or a local
    directory), a PEFT adapter directory, a training run directory (its latest checkpoint), an
    OpenAI-compatible endpoint ``openai:BASE_URL[#MODEL]`` (text), a vLLM-compatible server
    ``server:http://HOST:PORT[#MODEL]`` (token ids and log-probs; MODEL a served adapter, default the base), or
    a scripted agent ``oracle`` / ``noop`` / ``random``.
    ``suites``: built-in (``coding/strings:heldout``), plugin, imported JSONL, or a task folder.
    """

    policy: str = ""
    """smollm2-135m, a model dir/hub id, an adapter dir, a run dir, openai:URL#MODEL, server:URL#MODEL, or
    oracle/noop/random. A training run's directory (or an adapter in it) also brings the run's [rollout] tools,
    budgets, code action and env as defaults, so it is scored in the loop it learned; sampling stays evaluation's."""
    suites: tuple[str, ...] = ()
    """Suite specs or task files (e.g. coding/strings:heldout)."""
    out: str = "runs/eval"
    """Output directory (resumes if it holds episodes)."""
    samples: int = 4
    """K samples per task (pass@k is reported for k = 1..K)."""
    seeds: tuple[int, ...] = (0,)
    """Sampling seeds; the flag --seeds S means seeds 0..S-1."""
    n_tasks: int | None = None
    """Tasks drawn from each suite: None takes ``DEFAULT_N_TASKS`` from a generated suite and a JSONL file or task
    folder whole; a number caps both."""
    task_seed: int = DEFAULT_TASK_SEED
    """Seed that picks the tasks of a generated suite (``sandgym serve`` defaults to the same one)."""
    difficulty: int | None = None
    """Difficulty of a generated suite's tasks, 1 (very easy) to 4; unset mixes the levels."""
    baseline: str | None = None
    """A second policy compared on the same tasks and seeds."""
    trained_families: tuple[str, ...] = ()
    """Families the policy was trained on (empty: every family not marked unseen), for the transfer view."""
    batch_episodes: int = 64
    """Episodes rolled out per batch."""
    ray_workers: int = 0
    """Fan the (seed, task) groups out to this many Ray workers (0: roll out in this process)."""
    ray_address: str = ""
    """Ray cluster to join when ``ray_workers > 0`` (empty: start a local Ray instance)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form notes, kept with the config in ``config.json`` and ``metrics.json``."""
    rollout: RolloutSpec = field(default_factory=lambda: EVAL_ROLLOUT)
    """How episodes are rolled out (TOML table ``[rollout]``, the same keys as in a training config); the
    defaults are :data:`EVAL_ROLLOUT`."""

    def __post_init__(self) -> None:
        if not self.suites:
            raise ConfigError("eval needs at least one --suite (e.g. --suite coding:heldout, or suites = [...] in the "
                              "config); see `sandgym tasks list`")
        if self.samples < 1:
            raise ConfigError(f"samples={self.samples} must be >= 1 (--samples)")
        if not self.seeds:
            raise ConfigError("seeds must list at least one seed (--seeds S: seeds 0..S-1)")
        if self.n_tasks is not None and self.n_tasks < 1:
            raise ConfigError(f"n_tasks={self.n_tasks} must be >= 1 (or left out: {DEFAULT_N_TASKS} per generated "
                              "suite, files whole) (--n-tasks)")
        if self.batch_episodes < 1:
            raise ConfigError(f"batch_episodes={self.batch_episodes} must be >= 1")
        if self.ray_workers < 0 or (self.ray_address and self.ray_workers == 0):
            raise ConfigError(f"ray_workers={self.ray_workers} (ray_address={self.ray_address!r}): use --ray-workers N "
                              "with N >= 1 to evaluate on Ray, or 0 (and no --ray-address) for one process")


def load_eval_config(path: str | Path | None = None, overrides: Sequence[str] = (),
                     labels: dict[str, str] | None = None, rollout: Mapping[str, Any] | None = None) -> EvalConfig:
    """TOML file (optional) + ``key=value`` overrides -> a validated :class:`EvalConfig` (``labels``: how errors
    name an override, e.g. the flag it came from; ``rollout``: ``[rollout]`` defaults under the file's, e.g. those
    a training run was rolled out with)."""
    return load_dataclass(EvalConfig, path, overrides, labels=labels, base={"rollout": rollout} if rollout else None)

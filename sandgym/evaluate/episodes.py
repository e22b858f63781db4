"""One evaluated episode as a flat, typed row (``episodes.jsonl``), built from a trajectory and its task.

``success`` and ``failure_mode`` are the trajectory's, which are its ``EpisodeOutcome``'s (decided by the env); a
row never decides them again. A task error is an infra failure (excluded from scores) with its own failure mode.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandgym.agents.trajectory import Trajectory
from sandgym.tasks.task import Task


@dataclass(frozen=True)
class EpisodeRow:
    seed: int
    task_id: str
    domain: str
    family: str
    unseen: bool
    sample: int
    success: bool
    reward: float
    failure_mode: str
    turns: int
    gen_tokens: int
    sandbox_s: float
    truncated: bool
    infra_failure: bool
    reward_components: Mapping[str, float] = field(default_factory=dict)
    trajectory: Mapping[str, Any] = field(default_factory=dict)
    doc_tokens: int = 0
    """Length of the task's document in tokens (``metadata["tokens"]`` of long-context tasks; 0 for others)."""
    signals: Mapping[str, float] = field(default_factory=dict)
    """The outcome's runtime signals (``EpisodeOutcome.grade.signals``: a service stack's measured values, the
    shares of signal tests passed); empty for tasks without them."""

    @property
    def key(self) -> tuple[int, str]:
        return (self.seed, self.task_id)

    @property
    def traps_failed(self) -> float | None:
        """Share of trap tests failed, when the task has traps (reward component ``traps@v1``)."""
        v = next((x for k, x in self.reward_components.items() if k.startswith("traps@")), None)
        return None if v is None else 1.0 - float(v)

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EpisodeRow:
        return cls(**d)

    @classmethod
    def from_trajectory(cls, t: Trajectory, task: Task, seed: int) -> EpisodeRow:
        return cls(
            seed=seed,
            task_id=t.task_id,
            domain=t.domain,
            family=t.family,
            unseen=bool(task.unseen),
            sample=t.sample_idx,
            success=t.success,
            reward=float(t.reward),
            failure_mode=t.failure_mode,
            turns=t.num_turns,
            gen_tokens=t.num_generated_tokens if t.has_tokens else sum(len(x.text) for x in t.turns) // 4,
            sandbox_s=float(t.runtime.get("sandbox_s", t.runtime.get("wall_s", 0.0))),
            truncated=t.truncated,
            infra_failure=t.infra_failure,
            reward_components=_components(t.reward_components, task),
            trajectory=_light(t),
            doc_tokens=int(task.metadata.get("tokens") or 0),
            signals=dict(t.outcome.grade.signals) if t.outcome is not None else {},
        )


def _components(components: Mapping[str, float], task: Task) -> dict[str, float]:
    """The reward components, without ``traps@*`` for a task that has no traps (0.0 there measures nothing)."""
    has_traps = task.verifier.kind == "tests" and bool(task.verifier.traps)
    return {k: v for k, v in components.items() if has_traps or not k.startswith("traps@")}


def _light(t: Trajectory) -> dict[str, Any]:
    """The trajectory without token ids (the text of every turn is kept; ids are for training, not reports)."""
    d = t.to_json()
    for turn in d["turns"]:
        turn.pop("prompt_token_ids", None)
        turn.pop("completion_logprobs", None)
        turn["completion_tokens"] = len(turn.pop("completion_token_ids", []))
    return d


def append_rows(path: Path, rows: Iterable[EpisodeRow]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
        f.flush()


def read_rows(path: Path) -> list[EpisodeRow]:
    """Rows of a (possibly interrupted) evaluation; a torn last line is ignored."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").split("\n"):  # not splitlines(): a model's text may hold U+2028
        try:
            rows.append(EpisodeRow.from_json(json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue
    return rows


PROMPTS_NAME = "prompts.json"
"""Beside ``episodes.jsonl``: each evaluated task's first user message (its prompt), for the report's browser."""
PROMPT_CHARS = 4_000
"""A prompt is kept to this many characters (long documents placed inline would repeat megabytes)."""


def write_prompts(out_dir: Path, tasks: Iterable[Task]) -> Path:
    """``out_dir/prompts.json``: ``{task_id: {"text": prompt, "cut": characters cut}}``."""
    data = {t.id: {"text": t.prompt[:PROMPT_CHARS], "cut": max(0, len(t.prompt) - PROMPT_CHARS)} for t in tasks}
    path = Path(out_dir) / PROMPTS_NAME
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def read_prompts(out_dir: Path) -> dict[str, dict[str, Any]]:
    """The prompts written by :func:`write_prompts` (empty when there are none or they are unreadable)."""
    try:
        data = json.loads((Path(out_dir) / PROMPTS_NAME).read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}

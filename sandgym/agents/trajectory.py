"""The rollout output the trainer and the evaluator consume: exact token trajectories, JSONL round trip.

Token layout of one trajectory (``token_ids``)::

    turn0.prompt_token_ids | turn0.completion_token_ids | turn1.prompt_token_ids | turn1.completion ... |

``turn0.prompt_token_ids`` is the whole rendered prompt (system + tools + first user message + assistant header);
``turn_k.prompt_token_ids`` for k > 0 is the token delta the chat template inserts after the model's turn k-1
(closing the assistant turn, the environment's tool/user messages, the next assistant header).
``action_mask`` is 1 exactly on completion tokens; ``logprobs`` carries the sampling log-probability there
(log-softmax of ``logits / temperature``, the distribution actually sampled from) and 0.0 elsewhere.

``outcome`` is the env's ``EpisodeOutcome`` (None when the episode ended before the env graded it: a token budget
of the engine, an infrastructure error, or an env that reports none); ``success``, ``failure_mode`` and
``infra_failure`` are the outcome's when there is one (``from_turns`` copies them, construction checks they agree).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandgym.envs.outcome import EpisodeOutcome
from sandgym.errors import SandgymError

TRUNCATION_REASONS: tuple[str, ...] = ("max_new_tokens", "max_total_tokens", "max_turns", "env")


class TrajectoryError(SandgymError, ValueError):
    """A trajectory's parts are inconsistent (lengths of ids, mask and log-probs differ)."""


@dataclass(frozen=True)
class Turn:
    """One model turn: what was inserted before it, what the model sampled, and what the env answered."""

    prompt_token_ids: tuple[int, ...]
    """Tokens the env/template inserted before this model turn (for turn 0: the whole prompt)."""
    completion_token_ids: tuple[int, ...]
    """Tokens the model sampled this turn, exactly (never re-tokenized)."""
    completion_logprobs: tuple[float, ...]
    """Sampling log-probs, one per completion token."""
    text: str
    """Decoded completion (what the environment received)."""
    observation: str = ""
    """Environment text appended after this turn ("" at the end)."""
    truncated: bool = False
    """This turn hit max_new_tokens (or the trajectory's token budget) before a stop token."""

    def __post_init__(self) -> None:
        if len(self.completion_logprobs) != len(self.completion_token_ids):
            raise TrajectoryError(
                f"turn has {len(self.completion_token_ids)} completion tokens but "
                f"{len(self.completion_logprobs)} log-probs; give one log-prob per sampled token"
            )

    @property
    def num_completion_tokens(self) -> int:
        return len(self.completion_token_ids)


@dataclass(frozen=True)
class Trajectory:
    """One episode of one task by one policy sample."""

    task_id: str
    domain: str
    family: str
    split: str
    turns: tuple[Turn, ...]
    token_ids: tuple[int, ...]
    action_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    reward: float
    reward_components: Mapping[str, float] = field(default_factory=dict)
    runtime: Mapping[str, float] = field(default_factory=dict)
    success: bool = False
    failure_mode: str = ""
    truncated: bool = False
    truncation_reason: str | None = None
    terminated: bool = False
    infra_failure: bool = False
    group_id: int = 0
    sample_idx: int = 0
    policy_version: int = 0
    retokenization_mismatch: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)
    outcome: EpisodeOutcome | None = None
    """The env's graded result; it decides ``success``, ``failure_mode`` and ``infra_failure`` when present."""

    def __post_init__(self) -> None:
        n = len(self.token_ids)
        if len(self.action_mask) != n or len(self.logprobs) != n:
            raise TrajectoryError(
                f"trajectory {self.task_id}: token_ids ({n}), action_mask ({len(self.action_mask)}) and "
                f"logprobs ({len(self.logprobs)}) must have the same length; build it with Trajectory.from_turns"
            )
        if self.truncated and self.truncation_reason is None:
            raise TrajectoryError(
                f"trajectory {self.task_id}: truncated=True needs a truncation_reason, one of {TRUNCATION_REASONS}"
            )
        o = self.outcome
        if o is not None:
            mine = (self.success, self.failure_mode, self.infra_failure)
            if mine != (o.success, o.failure_mode, o.infra_failure):
                raise TrajectoryError(
                    f"trajectory {self.task_id}: success/failure_mode/infra_failure {mine} disagree with its outcome's "
                    f"{(o.success, o.failure_mode, o.infra_failure)}; the outcome decides them (leave them out and "
                    "build with Trajectory.from_turns(..., outcome=outcome))"
                )

    # ---- construction -------------------------------------------------------------------------------------
    @classmethod
    def from_turns(cls, turns: Iterable[Turn], **fields: Any) -> Trajectory:
        """Build ``token_ids``/``action_mask``/``logprobs`` as the concatenation of the turns' parts; with an
        ``outcome``, ``success``/``failure_mode``/``infra_failure`` default to the outcome's."""
        turns = tuple(turns)
        outcome = fields.get("outcome")
        if outcome is not None:
            fields.setdefault("success", outcome.success)
            fields.setdefault("failure_mode", outcome.failure_mode)
            fields.setdefault("infra_failure", outcome.infra_failure)
        ids: list[int] = []
        mask: list[int] = []
        lps: list[float] = []
        for t in turns:
            ids.extend(t.prompt_token_ids)
            mask.extend([0] * len(t.prompt_token_ids))
            lps.extend([0.0] * len(t.prompt_token_ids))
            ids.extend(t.completion_token_ids)
            mask.extend([1] * len(t.completion_token_ids))
            lps.extend(t.completion_logprobs)
        return cls(turns=turns, token_ids=tuple(ids), action_mask=tuple(mask), logprobs=tuple(lps), **fields)

    # ---- convenience ----------------------------------------------------------------------------------------
    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def num_generated_tokens(self) -> int:
        return sum(self.action_mask)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def has_tokens(self) -> bool:
        """False for text-only trajectories (scripted/API policies without a tokenizer): evaluation only."""
        return len(self.token_ids) > 0

    @property
    def completion_text(self) -> str:
        return "".join(t.text for t in self.turns)

    # ---- serialisation ----------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (tuples become lists; non-finite floats become strings)."""
        return {
            "task_id": self.task_id,
            "domain": self.domain,
            "family": self.family,
            "split": self.split,
            "turns": [
                {
                    "prompt_token_ids": list(t.prompt_token_ids),
                    "completion_token_ids": list(t.completion_token_ids),
                    "completion_logprobs": [_f2j(x) for x in t.completion_logprobs],
                    "text": t.text,
                    "observation": t.observation,
                    "truncated": t.truncated,
                }
                for t in self.turns
            ],
            "reward": _f2j(self.reward),
            "reward_components": {k: _f2j(v) for k, v in self.reward_components.items()},
            "runtime": {k: _f2j(v) for k, v in self.runtime.items()},
            "success": self.success,
            "failure_mode": self.failure_mode,
            "truncated": self.truncated,
            "truncation_reason": self.truncation_reason,
            "terminated": self.terminated,
            "infra_failure": self.infra_failure,
            "group_id": self.group_id,
            "sample_idx": self.sample_idx,
            "policy_version": self.policy_version,
            "retokenization_mismatch": self.retokenization_mismatch,
            "metadata": dict(self.metadata),
            "outcome": None if self.outcome is None else self.outcome.to_dict(),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Trajectory:
        """Inverse of :meth:`to_json` (token_ids/mask/logprobs are rebuilt from the turns).

        Trajectories written before the outcome was typed kept it flat in ``metadata["outcome"]``: it is converted
        to an ``EpisodeOutcome`` (and taken out of the metadata); one that cannot be is an error saying why."""
        metadata = dict(d.get("metadata", {}))
        raw = d.get("outcome")
        if raw is None and isinstance(metadata.get("outcome"), Mapping):  # the flat format of earlier runs
            raw = metadata.pop("outcome")
        outcome = None if raw is None else EpisodeOutcome.from_dict(dict(raw))
        turns = [
            Turn(
                prompt_token_ids=tuple(int(x) for x in t["prompt_token_ids"]),
                completion_token_ids=tuple(int(x) for x in t["completion_token_ids"]),
                completion_logprobs=tuple(_j2f(x) for x in t["completion_logprobs"]),
                text=t["text"],
                observation=t.get("observation", ""),
                truncated=bool(t.get("truncated", False)),
            )
            for t in d["turns"]
        ]
        return cls.from_turns(
            turns,
            task_id=d["task_id"],
            domain=d["domain"],
            family=d["family"],
            split=d["split"],
            reward=_j2f(d["reward"]),
            reward_components={k: _j2f(v) for k, v in d.get("reward_components", {}).items()},
            runtime={k: _j2f(v) for k, v in d.get("runtime", {}).items()},
            success=bool(d.get("success", False)),
            failure_mode=d.get("failure_mode", ""),
            truncated=bool(d.get("truncated", False)),
            truncation_reason=d.get("truncation_reason"),
            terminated=bool(d.get("terminated", False)),
            infra_failure=bool(d.get("infra_failure", False)),
            group_id=int(d.get("group_id", 0)),
            sample_idx=int(d.get("sample_idx", 0)),
            policy_version=int(d.get("policy_version", 0)),
            retokenization_mismatch=bool(d.get("retokenization_mismatch", False)),
            metadata=metadata,
            outcome=outcome,
        )


def _f2j(x: float) -> float | str:
    x = float(x)
    return x if math.isfinite(x) else repr(x)


def _j2f(x: float | str) -> float:
    return float(x)


def save_jsonl(trajs: Iterable[Trajectory], path: str | os.PathLike[str]) -> None:
    """Write one JSON object per line, atomically (a temp file renamed into place)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as f:
        for t in trajs:
            f.write(json.dumps(t.to_json(), ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def load_jsonl(path: str | os.PathLike[str]) -> list[Trajectory]:
    """Read trajectories written by :func:`save_jsonl`."""
    out: list[Trajectory] = []
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(Trajectory.from_json(json.loads(line)))
            except (KeyError, ValueError, TypeError) as e:
                raise TrajectoryError(f"{path}:{lineno}: not a trajectory ({e}); was it written by save_jsonl?") from e
    return out

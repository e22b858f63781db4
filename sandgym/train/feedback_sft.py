"""Reward-weighted SFT on imported user feedback (``sft.source`` = a file written by ``sandgym feedback import``).

Filtered behaviour cloning, as in RAFT / ReST: each record's target is what the user ended up keeping, weighted by
the reward the import gave the record (``RewardMapping``):

- ``accepted``: the suggestion itself, weight = its reward (default 1.0);
- ``edited``: the user's ``edited_output`` (the corrected target), weight = the edited reward (default 0.5, or less
  with ``--edit-distance-scale``); an edited record without ``edited_output`` teaches nothing and is skipped;
- ``rejected``: nothing (a rejection says what not to write, not what to write).

A target with a weight <= 0 is skipped. The record's prompt becomes the chat's user turn after the system prompt of
``rollout.env_kwargs.system_prompt`` when the config sets one (its ``{entry_file}`` / ``{domain}`` are filled from
the log record's metadata, ``entry_file`` defaulting to ``solution.py`` as in the environment).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sandgym.agents.trajectory import Trajectory, TrajectoryError, load_jsonl
from sandgym.errors import ConfigError
from sandgym.private.feedback import REWARD_VERSION
from sandgym.train.relabel import is_episodes
from sandgym.train.step import Sample

SourceKind = Literal["oracle", "transcripts", "feedback", "episodes"]


def source_kind(source: str) -> SourceKind:
    """What ``sft.source`` names, decided from its first record: ``oracle``; a JSONL of chat transcripts (lines with
    ``messages``); imported feedback (trajectories scored ``feedback@v1`` by ``sandgym feedback import``); or the
    policy's own episodes for the oracle to relabel (``sandgym eval``'s ``episodes.jsonl``, a run's
    ``trajectories.jsonl``; :mod:`sandgym.train.relabel`).

    A raw adoption log (lines with ``outcome``) or anything else is a :class:`ConfigError` that says what to do.
    """
    if source == "oracle":
        return "oracle"
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"sft.source={source!r} is neither 'oracle' nor an existing file; give a JSONL of chat "
                          "transcripts or of feedback imported by `sandgym feedback import LOGS --out FILE`")
    first = next((line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()), None)
    if first is None:
        raise ConfigError(f"sft.source={source!r} is empty; give a file with at least one record")
    try:
        data = json.loads(first)
    except json.JSONDecodeError as e:
        raise ConfigError(f"sft.source={source!r}: its first line is not JSON ({e.msg}); give a JSONL file") from e
    if isinstance(data, dict) and "messages" in data:
        return "transcripts"
    if isinstance(data, dict) and REWARD_VERSION in (data.get("reward_components") or {}):
        return "feedback"
    if is_episodes(data):
        return "episodes"
    if isinstance(data, dict) and "outcome" in data and "prompt" in data:
        raise ConfigError(f"sft.source={source!r} is a raw feedback log; import it first (`sandgym feedback import "
                          f"{source} --out imported.jsonl`, then sft.source=imported.jsonl) or run `sandgym "
                          f"feedback train {source} --config CFG --out DIR`, which does both")
    keys = sorted(data) if isinstance(data, dict) else type(data).__name__
    raise ConfigError(f"sft.source={source!r}: the first record ({keys}) is neither a chat transcript "
                      f"({{\"messages\": [...]}}), imported feedback (reward component {REWARD_VERSION!r}) nor an "
                      "episode to relabel (task_id and trajectory.turns, as `sandgym eval` writes episodes.jsonl)")


@dataclass(frozen=True)
class FeedbackTarget:
    """What one imported record teaches: the user turn, the assistant text to learn and its weight."""

    prompt: str
    target: str
    weight: float
    outcome: str
    metadata: Mapping[str, Any]


def feedback_target(t: Trajectory) -> FeedbackTarget | None:
    """The target of one imported record, or None when it teaches nothing (rejected, no correction, weight <= 0).

    >>> from sandgym.agents.trajectory import Turn
    >>> def rec(outcome, reward, edited=None):
    ...     return Trajectory.from_turns([Turn((), (), (), text="out")], task_id="x", domain="feedback", family="l",
    ...         split="train", reward=reward, metadata={"prompt": "p", "outcome": outcome, "edited_output": edited})
    >>> feedback_target(rec("accepted", 1.0)).target, feedback_target(rec("edited", 0.5, "fixed")).weight
    ('out', 0.5)
    >>> feedback_target(rec("rejected", 0.0)), feedback_target(rec("edited", 0.5))
    (None, None)
    """
    meta = t.metadata
    outcome = meta.get("outcome")
    if outcome == "accepted":
        target: str | None = t.completion_text
    elif outcome == "edited":
        target = meta.get("edited_output")
    else:
        return None
    if not target or t.reward <= 0:
        return None
    log = meta.get("log")
    return FeedbackTarget(str(meta.get("prompt", "")), str(target), float(t.reward), str(outcome),
                          dict(log) if isinstance(log, Mapping) else {})


class _Keep(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def chat_messages(target: FeedbackTarget, system_prompt: str | None) -> list[dict[str, str]]:
    """[system (when given, its placeholders filled from the record's metadata), user = the prompt]."""
    messages = []
    if system_prompt:
        values = _Keep({"entry_file": "solution.py", **{k: str(v) for k, v in target.metadata.items()}})
        messages.append({"role": "system", "content": system_prompt.format_map(values)})
    messages.append({"role": "user", "content": target.prompt})
    return messages


@dataclass(frozen=True)
class FeedbackSamples:
    samples: tuple[Sample, ...]
    used: Mapping[str, int]
    """Records trained on, by outcome."""
    skipped: Mapping[str, int]
    """Records that teach nothing, by outcome."""


def feedback_to_samples(path: Path, chat_format: Any, system_prompt: str | None = None) -> FeedbackSamples:
    """Imported feedback -> samples whose per-token weights (the 4th field) are the record's weight on the target's
    tokens and 0 elsewhere."""
    try:
        trajs = load_jsonl(path)
    except TrajectoryError as e:
        raise ConfigError(f"sft.source={str(path)!r}: {e}; re-import the log with `sandgym feedback import`") from e
    samples: list[Sample] = []
    used: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    for t in trajs:
        target = feedback_target(t)
        if target is None:
            skipped[str(t.metadata.get("outcome", "unknown"))] += 1
            continue
        prompt = chat_format.prompt_ids(chat_messages(target, system_prompt))
        body = chat_format.completion_ids(target.target)
        ids = (*prompt, *body)
        mask = (0,) * len(prompt) + (1,) * len(body)
        samples.append(Sample(ids, mask, (0.0,) * len(ids), tuple(target.weight * m for m in mask), "feedback"))
        used[target.outcome] += 1
    return FeedbackSamples(tuple(samples), dict(used), dict(skipped))


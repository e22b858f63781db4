"""``sandgym judge calibrate``: run a judge on a labelled set; agreement, confusion matrix, calibration error.

Labelled set: JSONL, one ``{"prompt": ..., "answer": ..., "label": 1 | 0 | true | false | "pass" | "fail"}`` per
line (optional ``"rubric"`` is ignored here: one rubric per calibration run).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError
from sandgym.evaluate.policies import load_policy
from sandgym.private.judge import CalibrationStats, JudgeReward

_TRUE = {"1", "true", "pass", "yes", "good", "correct"}
_FALSE = {"0", "false", "fail", "no", "bad", "incorrect"}


@dataclass(frozen=True)
class LabelledItem:
    prompt: str
    answer: str
    label: int


def _label(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return int(value.strip().lower() in _TRUE)
    raise ConfigError(f"{where}: label {value!r} is not binary; use 1/0, true/false or 'pass'/'fail'")


def load_labelled(path: str | Path) -> list[LabelledItem]:
    """Items of a labelled JSONL file; ConfigError naming the line of any malformed one."""
    items: list[LabelledItem] = []
    for number, text in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: invalid JSON ({exc.msg}); write one JSON object per line") from exc
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("prompt", "answer")) \
                or "label" not in data:
            raise ConfigError(f"{where}: needs string 'prompt' and 'answer' and a 'label'")
        items.append(LabelledItem(data["prompt"], data["answer"], _label(data["label"], where)))
    if not items:
        raise ConfigError(f"{path}: no labelled items; add JSONL lines with prompt, answer, label")
    return items


def calibration_stats(scores: Sequence[float | None], labels: Sequence[int], *, threshold: float = 0.5,
                      bins: int = 10, judge_version: str = "") -> CalibrationStats:
    """Agreement, confusion, ECE, Cohen's kappa and Brier score of scores in [0, 1] (None = unparsed, scored 0).

    >>> s = calibration_stats([0.9, 0.1, 0.9, 0.1], [1, 0, 0, 0])
    >>> s.agreement, s.confusion
    (0.75, ((2, 1), (0, 1)))
    """
    if len(scores) != len(labels) or not labels:
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels; pass one score per label (at least one)")
    p = [0.0 if s is None else float(s) for s in scores]
    pred = [int(x >= threshold) for x in p]
    n = len(labels)
    cm = [[0, 0], [0, 0]]
    for y, yhat in zip(labels, pred, strict=True):
        cm[y][yhat] += 1
    agree = (cm[0][0] + cm[1][1]) / n
    pos_true, pos_pred = (cm[1][0] + cm[1][1]) / n, (cm[0][1] + cm[1][1]) / n
    chance = pos_true * pos_pred + (1 - pos_true) * (1 - pos_pred)
    kappa = (agree - chance) / (1 - chance) if chance < 1 else 1.0
    ece = 0.0
    for b in range(bins):
        members = [i for i, x in enumerate(p) if min(int(x * bins), bins - 1) == b]
        if members:
            conf = sum(p[i] for i in members) / len(members)
            acc = sum(labels[i] for i in members) / len(members)
            ece += len(members) / n * abs(conf - acc)
    brier = sum((x - y) ** 2 for x, y in zip(p, labels, strict=True)) / n
    return CalibrationStats(n=n, agreement=round(agree, 6), confusion=((cm[0][0], cm[0][1]), (cm[1][0], cm[1][1])),
                            ece=round(ece, 6), kappa=round(kappa, 6), brier=round(brier, 6),
                            unparsed=sum(s is None for s in scores), threshold=threshold, bins=bins,
                            judge_version=judge_version)


def calibrate(judge: JudgeReward, items: Sequence[LabelledItem], *, threshold: float = 0.5,
              bins: int = 10) -> CalibrationStats:
    """Run ``judge`` on every item and compare with the labels."""
    results = judge.grade([i.prompt for i in items], [i.answer for i in items])
    scores = [r.score if r.parsed else None for r in results]
    return calibration_stats(scores, [i.label for i in items], threshold=threshold, bins=bins,
                             judge_version=judge.reward_version)


def load_judge_policy(spec: str) -> Any:
    """A judge policy from ``python:module:attr`` (a Policy, or a factory returning one), ``openai:URL#model``,
    or any policy spec ``sandgym eval`` accepts (a model name or adapter directory)."""
    if spec.startswith("python:"):
        module, _, attr = spec[len("python:"):].rpartition(":")
        if not module or not attr:
            raise ConfigError(f"--judge {spec!r} must look like python:package.module:attribute")
        obj = getattr(importlib.import_module(module), attr)
        return obj() if callable(obj) and not hasattr(obj, "generate") else obj

    policy, _ = load_policy(spec)
    return policy

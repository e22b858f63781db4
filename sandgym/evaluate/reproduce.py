"""``sandgym eval reproduce METRICS.json``: re-run a recorded evaluation and check each figure against its interval.

The recorded ``config`` and ``manifest`` of a ``metrics.json`` (:mod:`sandgym.evaluate.manifest`) give the
evaluation to re-run: the same policy (and baseline), suites, task seed, rollout settings, samples and seeds. Before
anything runs, the manifest the current tree would write is compared with the recorded one: a suite whose tasks'
hash changed, a reward whose version (or weight) changed, or an adapter whose weights changed refuses the re-run,
naming the difference, since its figures would not measure the same thing. Other differences (sandgym's commit,
library versions) are reported and the re-run goes on.

The re-run writes a fresh evaluation directory (``DIR/reproduce``, ``DIR/reproduce-2``, ... beside the recorded
``metrics.json`` unless ``out`` is given) and ``reproduce.json`` in it: for every metric with an interval, the
recorded value and 95% interval, the new value, and whether the new value lies within the recorded interval.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sandgym.configs import from_dict
from sandgym.errors import ConfigError
from sandgym.evaluate import distributed
from sandgym.evaluate import run as local
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.manifest import Difference, Manifest, build_manifest, differences
from sandgym.evaluate.policies import describe_policy

NOT_METRICS = ("manifest", "config", "versions", "policy", "baseline_policy", "schema", "wall_s")
"""Top-level keys of metrics.json that are provenance, not figures."""
TOLERANCE = 1e-9
"""Slack when comparing a new value with a recorded bound (floating-point noise of the same computation)."""


@dataclass(frozen=True)
class MetricCheck:
    """One figure: its path in metrics.json, the recorded value and interval, the new value, and the verdict."""

    metric: str
    value: float
    low: float
    high: float
    new: float | None
    within: bool


@dataclass(frozen=True)
class Reproduction:
    """The re-run's directory, what differed from the recorded manifest (none refusing), and every check."""

    out_dir: Path
    notes: tuple[Difference, ...]
    checks: tuple[MetricCheck, ...]

    @property
    def outside(self) -> list[MetricCheck]:
        return [c for c in self.checks if not c.within]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not self.outside

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "within": len(self.checks) - len(self.outside), "metrics": len(self.checks),
                "notes": [asdict(d) for d in self.notes], "checks": [asdict(c) for c in self.checks]}

    def table(self) -> str:
        """Markdown: one row per figure."""
        lines = ["| metric | recorded [95% interval] | reproduced | within |", "|---|---|---|---|"]
        for c in self.checks:
            new = "missing" if c.new is None else f"{c.new:.4f}"
            lines.append(f"| {c.metric} | {c.value:.4f} [{c.low:.4f}, {c.high:.4f}] | {new} | "
                         f"{'yes' if c.within else 'NO'} |")
        return "\n".join(lines)


def metrics_file(path: str | Path) -> Path:
    """``path`` itself, or the ``metrics.json`` in the evaluation directory ``path``."""
    p = Path(path)
    p = p / "metrics.json" if p.is_dir() else p
    if not p.is_file():
        raise ConfigError(f"{str(path)!r}: no such metrics.json; pass the file or the directory written by "
                          "`sandgym eval --out DIR`")
    return p


def recorded(path: Path, out: Path) -> tuple[dict[str, Any], Manifest, EvalConfig]:
    """The metrics, manifest and evaluation config recorded in ``path``, the config writing to ``out`` (its policy
    and baseline are the manifest's: a demo records its policies there only)."""
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable metrics.json ({exc})") from None
    if not isinstance(metrics, dict):
        raise ConfigError(f"{path}: not a metrics.json (a JSON object written by sandgym eval)")
    manifest = Manifest.from_json(metrics.get("manifest"), where=str(path))
    if not isinstance(metrics.get("config"), dict) or manifest.policy is None:
        raise ConfigError(f"{path}: records no evaluation config and policy to re-run")
    data = {**metrics["config"], "policy": manifest.policy.spec,
            "baseline": manifest.baseline.spec if manifest.baseline else None, "out": str(out)}
    return metrics, manifest, from_dict(EvalConfig, data, where=f"{path} config")


def fresh_out_dir(metrics_path: Path) -> Path:
    """``reproduce`` (then ``reproduce-2``, ...) beside ``metrics_path``: the first that holds no evaluation."""
    base = metrics_path.parent / "reproduce"
    n = 1
    out = base
    while (out / "episodes.jsonl").exists() or (out / "metrics.json").exists():
        n += 1
        out = base.with_name(f"reproduce-{n}")
    return out


def intervals(m: Any, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every ``{"value", "low", "high"}`` in metrics.json (provenance left out), by dotted path."""
    if not isinstance(m, Mapping):
        return
    if {"value", "low", "high"} <= set(m):
        yield prefix, dict(m)
        return
    for key, sub in m.items():
        if not prefix and key in NOT_METRICS:
            continue
        yield from intervals(sub, f"{prefix}.{key}" if prefix else str(key))


def _number(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def check_metrics(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[MetricCheck]:
    """For every recorded figure with an interval: is the new value within it?"""
    fresh = dict(intervals(new))
    out = []
    for path, iv in intervals(old):
        value, low, high = (_number(iv.get(k)) for k in ("value", "low", "high"))
        if value is None or low is None or high is None:
            continue  # an undefined figure (no episodes of that kind) has no interval to be within
        got = _number(fresh[path]["value"]) if path in fresh else None
        within = got is not None and low - TOLERANCE <= got <= high + TOLERANCE
        out.append(MetricCheck(path, value, low, high, got, within))
    return out


def reproduce(path: str | Path, *, out: str | Path | None = None,
              note: Callable[[str], None] | None = None) -> Reproduction:
    """Re-run the evaluation recorded in ``path`` (a metrics.json or its directory) and check its figures.

    Raises ConfigError, naming every difference, when the tasks' hash, a reward version or an adapter changed.
    ``note`` gets the differences that do not refuse (and where the re-run goes) as lines."""
    metrics_path = metrics_file(path)
    out_dir = Path(out) if out is not None else fresh_out_dir(metrics_path)
    if (out_dir / "episodes.jsonl").exists():
        raise ConfigError(f"--out {str(out_dir)!r} already holds episodes; a reproduction needs a fresh directory")
    old_metrics, old, config = recorded(metrics_path, out_dir)
    suites = local.load_suites(config)
    now = build_manifest(config, suites, describe_policy(config.policy),
                         describe_policy(config.baseline) if config.baseline else None)
    diffs = differences(old, now)
    refusals = [d for d in diffs if d.refuses]
    if refusals:
        raise ConfigError(f"{metrics_path}: not reproducible with this tree, the figures would not measure the same "
                          "thing: " + "; ".join(d.line() for d in refusals) + ". Evaluate anew with `sandgym eval` "
                          "(or check out the recorded commit " f"{old.sandgym.get('commit') or '(none recorded)'})")
    notes = tuple(diffs)
    if note is not None:
        for d in notes:
            note(f"differs (not refused): {d.line()}")
        note(f"re-running into {out_dir}")
    result = (distributed.run if config.ray_workers > 0 else local.run)(config)
    repro = Reproduction(out_dir, notes, tuple(check_metrics(old_metrics, result.metrics)))
    (out_dir / "reproduce.json").write_text(json.dumps({"recorded": str(metrics_path), **repro.to_json()},
                                                       indent=2, default=str), encoding="utf-8")
    return repro


__all__ = ["MetricCheck", "Reproduction", "check_metrics", "intervals", "metrics_file", "reproduce"]

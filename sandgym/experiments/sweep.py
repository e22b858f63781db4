"""``sandgym sweep``: one training config over seeds x the cartesian product of ``--vary`` values.

Layout of ``--out DIR``::

    DIR/sweep.json                       what was asked and every run's status (done / skipped / failed + error)
    DIR/runs/<variant>/seed-<s>/         each run's own out_dir (metrics.jsonl, eval_curve.jsonl, checkpoints/)
    DIR/report.md, DIR/report.html      the sweep report (sandgym/experiments/sweep_report.py)

Runs are sequential. A run whose final checkpoint is present (and whose final periodic evaluation, when
``[eval]`` is on, is recorded) is skipped on re-invocation; an interrupted one resumes from its latest
checkpoint; a failed one (bad override, diverged loss, crash) is recorded with its error and the sweep goes on.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import re
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError
from sandgym.experiments.periodic_eval import load_curve, train_with_eval
from sandgym.experiments.sweep_report import write_sweep_report
from sandgym.experiments.sweep_state import SCHEMA, load_sweep, write_json
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import load_config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSpec:
    """One run of the sweep: a variant (a choice of one value per varied key) and a seed."""

    variant: str
    seed: int
    overrides: tuple[str, ...]
    """The variant's ``key=value`` overrides (without ``seed`` / ``out_dir``)."""
    out_dir: str

    @property
    def name(self) -> str:
        return f"{self.variant}/seed-{self.seed}"


@dataclass
class RunRecord:
    variant: str
    seed: int
    overrides: list[str]
    out_dir: str
    status: str = "pending"
    """done (trained in this invocation), skipped (already finished), failed."""
    error: str | None = None
    traceback: str | None = None
    wall_s: float = 0.0
    resumed_from: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def split_values(raw: str) -> list[str]:
    """Split ``v1,v2`` at top-level commas (not inside brackets, braces or quotes).

    >>> split_values('grpo,rloo')
    ['grpo', 'rloo']
    >>> split_values('[1.0, 0.0],[0.5, 0.5]')
    ['[1.0, 0.0]', '[0.5, 0.5]']
    """
    out: list[str] = []
    cur: list[str] = []
    depth, quote = 0, ""
    for ch in raw:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return [v for v in out if v]


def parse_vary(items: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``["algorithm.name=grpo,rloo"]`` -> ``[("algorithm.name", ["grpo", "rloo"])]``."""
    out: list[tuple[str, list[str]]] = []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        values = split_values(raw)
        if not sep or not key or not values:
            raise ConfigError(f"--vary {item!r}: write it as key=v1,v2 (e.g. --vary algorithm.name=grpo,rloo)")
        if key in ("seed", "out_dir"):
            raise ConfigError(f"--vary {item!r}: {key} is set by the sweep (use --seeds N for seeds)")
        if any(k == key for k, _ in out):
            raise ConfigError(f"--vary {item!r}: {key} is varied twice; list all its values in one --vary")
        out.append((key, values))
    return out


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")
    if len(s) > 40 or s != text:  # long or rewritten values keep a hash of the original, so names stay distinct
        s = f"{s[:40]}-{hashlib.sha1(text.encode()).hexdigest()[:8]}".lstrip("-")
    return s or "x"


def variant_name(choice: Sequence[tuple[str, str]]) -> str:
    """A directory-safe name of one variant, e.g. ``algorithm.name-rloo__optim.lr-0.01`` (``base`` if none)."""
    if not choice:
        return "base"
    return "__".join(f"{_slug(k)}-{_slug(v)}" for k, v in choice)


def plan(out: Path, seeds: Sequence[int], vary: Sequence[tuple[str, list[str]]]) -> list[RunSpec]:
    """Every (variant, seed) run, variants in the order of the cartesian product, seeds inner."""
    keys = [k for k, _ in vary]
    specs: list[RunSpec] = []
    for values in itertools.product(*[v for _, v in vary]):
        choice = list(zip(keys, values, strict=True))
        name = variant_name(choice)
        for s in seeds:
            specs.append(RunSpec(name, int(s), tuple(f"{k}={v}" for k, v in choice),
                                 str(out / "runs" / name / f"seed-{s}")))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError("two variants map to the same directory name; use values that differ after slugging")
    return specs


def run_overrides(spec: RunSpec, base: Sequence[str] = ()) -> list[str]:
    return [*base, *spec.overrides, f"seed={spec.seed}", f"out_dir={json.dumps(spec.out_dir)}"]


def is_finished(config: Any) -> bool:
    """The final checkpoint is present (and the final periodic evaluation recorded, when ``[eval]`` is on)."""
    run_dir = Path(config.out_dir)
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None or int(ckpt.name.split("-")[1]) < config.optim.steps:
        return False
    if config.eval.every > 0:
        return any(r.get("step") == config.optim.steps for r in load_curve(run_dir))
    return True


def run_sweep(
    config_path: str | Path | None,
    *,
    seeds: int | Sequence[int],
    vary: Sequence[str] = (),
    out: str | Path,
    overrides: Sequence[str] = (),
    report: bool = True,
    train: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """Run (or finish) the sweep in ``out``; returns the content of ``sweep.json``.

    ``train`` replaces :func:`sandgym.experiments.periodic_eval.train_with_eval` (tests)."""
    if train is None:
        train = train_with_eval
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ConfigError("--seeds must be >= 1")
    specs = plan(out, seed_list, parse_vary(vary))
    state: dict[str, Any] = {
        "schema": SCHEMA,
        "config": str(config_path) if config_path else None,
        "seeds": seed_list,
        "vary": list(vary),
        "overrides": list(overrides),
        "runs": [],
    }
    path = out / "sweep.json"
    t_sweep = time.perf_counter()
    for i, spec in enumerate(specs):
        rec = RunRecord(spec.variant, spec.seed, list(spec.overrides), spec.out_dir)
        t0 = time.perf_counter()
        try:
            config = load_config(config_path, run_overrides(spec, overrides))
            if is_finished(config):
                rec.status = "skipped"
            else:
                resume = latest_checkpoint(Path(config.out_dir)) is not None
                log.info("sweep run %d/%d: %s%s", i + 1, len(specs), spec.name, " (resuming)" if resume else "")
                result = train(config, resume=resume)  # type: ignore[misc]
                rec.status = "done"
                rec.resumed_from = int(getattr(result, "resumed_from", 0))
        except Exception as exc:  # a failed run is recorded, and the sweep goes on
            rec.status = "failed"
            rec.error = f"{type(exc).__name__}: {exc}"
            rec.traceback = "".join(traceback.format_exception(exc))[-4000:]
            log.warning("sweep run %s failed: %s", spec.name, rec.error)
        rec.wall_s = time.perf_counter() - t0
        log.info("sweep run %d/%d: %s %s%s", i + 1, len(specs), spec.name, rec.status,
                 f" in {rec.wall_s:.0f} s" if rec.status == "done" else "")
        state["runs"].append(asdict(rec))
        state["wall_s"] = time.perf_counter() - t_sweep
        write_json(path, state)
    if report:
        write_sweep_report(out)
    return state


__all__ = ["SCHEMA", "RunSpec", "RunRecord", "is_finished", "load_sweep", "parse_vary", "plan", "run_sweep", "split_values"]

"""Periodic held-out evaluation during training (config section ``[eval]``).

Before the first step (of a fresh run), every ``eval.every`` steps and after the last step, the live policy is
rolled out on a fixed held-out sample (the same tasks each time), in the same environment as training, and one
line is written to ``RUN_DIR/eval_curve.jsonl``::

    {"step": 10, "completion": {"value", "low", "high"}, "reward": {...}, "tasks": 8, "episodes": 16,
     "trained": {...completion...}, "unseen": {...completion...}}

Episodes of each evaluation are kept in ``RUN_DIR/eval/step-NNNNNN/episodes.jsonl`` (for per-task paired
comparisons in sweep reports); a run whose domains have their own rollouts (``[domains.mix.rollout]``) scores each
such domain's held-out split in that rollout, in ``step-NNNNNN/<domain>/``, and the curve's row pools them. The global RNG state is restored afterwards, so turning evaluation on does not
change what the run trains on.

The training loop never imports this module: :func:`train_with_eval` (what ``sandgym train``, sweeps and the demo
run) passes :func:`maybe_periodic_eval` to :func:`sandgym.train.loop.run` as its ``on_eval`` hook.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandgym.evaluate.aggregate import split_transfer, summarize
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.policies import PolicyInfo
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.experiments.judge_drift import maybe_recalibrate
from sandgym.rollout.spec import RolloutSpec
from sandgym.train.checkpoint import rng_state, set_rng_state
from sandgym.train.config import DomainConfig, TrainConfig, domain_name, domain_rollout

CURVE = "eval_curve.jsonl"


def eval_suites(config: TrainConfig, mix: Sequence[DomainConfig] | None = None) -> tuple[str, ...]:
    """``eval.suites``, else each training suite's ``:heldout`` split (a suite without a split is used as is), of
    ``mix`` (default: every domain)."""
    if config.eval.suites:
        return config.eval.suites
    out: list[str] = []
    for d in config.domains.mix if mix is None else mix:
        name, sep, _ = d.suite.partition(":")
        spec = f"{name}:heldout" if sep else d.suite
        if spec not in out:
            out.append(spec)
    return tuple(out)


def eval_config(config: TrainConfig, out_dir: Path) -> EvalConfig:
    """The :class:`~sandgym.evaluate.config.EvalConfig` of the periodic evaluation: the training ``[rollout]``
    (same environment, budgets and tools) sampled at ``eval.temperature``."""
    return _eval_config(config, out_dir, eval_suites(config), config.rollout)


def eval_configs(config: TrainConfig, out_dir: Path) -> list[EvalConfig]:
    """One :func:`eval_config` per rollout of the run: with ``[domains.mix.rollout]`` tables, each such domain's
    held-out suites in its own rollout (``OUT/<domain>``) and the other domains' in ``[rollout]`` (``OUT/rollout``)."""
    if not any(d.rollout for d in config.domains.mix):
        return [eval_config(config, out_dir)]
    groups: dict[str, list[DomainConfig]] = {}
    for d in config.domains.mix:
        groups.setdefault(domain_name(d) if d.rollout else "", []).append(d)
    return [_eval_config(config, out_dir / (key or "rollout"), eval_suites(config, mix), domain_rollout(config, mix[0]))
            for key, mix in groups.items()]


def _eval_config(config: TrainConfig, out_dir: Path, suites: tuple[str, ...], rollout: RolloutSpec) -> EvalConfig:
    e = config.eval
    return EvalConfig(
        policy="live", suites=suites, out=str(out_dir), samples=e.samples, seeds=(0,),
        n_tasks=e.n_tasks, task_seed=e.task_seed, difficulty=config.domains.mix[0].difficulty,
        rollout=replace(rollout, temperature=e.temperature),
    )


def due(config: TrainConfig, step: int) -> bool:
    every = config.eval.every
    return every > 0 and (step % every == 0 or step == config.optim.steps)


def maybe_periodic_eval(config: TrainConfig, policy: Any, step: int, run_dir: Path) -> dict[str, Any] | None:
    """Evaluate ``policy`` when ``step`` is due; append (replacing any stale rows from ``step`` on) to the curve."""
    if not due(config, step):
        return None
    run_dir = Path(run_dir)
    out = run_dir / "eval" / f"step-{step:06d}"
    shutil.rmtree(out, ignore_errors=True)  # a resumed run re-evaluates the new weights of this step
    info = PolicyInfo(spec=f"step-{step}", kind="live", model=config.model.name)
    rows = []
    rng = rng_state()
    try:
        for cfg in eval_configs(config, out):
            rows += evaluate_policy(policy, info, cfg, Path(cfg.out), tasks=load_tasks(cfg), stop_on_broken_sandbox=False)
    finally:
        set_rng_state(rng)
    s = summarize(rows, config.eval.samples)
    trained, unseen = split_transfer(rows, ())
    row: dict[str, Any] = {
        "step": step,
        "completion": s.get("completion"),
        "reward": s.get("reward"),
        "tasks": s.get("tasks", 0),
        "episodes": s.get("episodes", 0),
        "trained": summarize(trained, config.eval.samples).get("completion"),
        "unseen": summarize(unseen, config.eval.samples).get("completion"),
    }
    path = run_dir / CURVE
    kept = [r for r in load_curve(run_dir) if r["step"] < step]
    path.write_text("".join(json.dumps(r) + "\n" for r in [*kept, row]), encoding="utf-8")
    return row


def load_curve(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / CURVE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def training_hooks(config: TrainConfig, policy: Any, step: int, run_dir: Path) -> dict[str, Any] | None:
    """The loop's ``on_eval`` hook: the judge's re-calibration (``sandgym/Judged-v0`` runs with
    ``judge.calibrate_every``), then :func:`maybe_periodic_eval`."""
    maybe_recalibrate(config, step, run_dir)
    return maybe_periodic_eval(config, policy, step, run_dir)


def train_with_eval(config: TrainConfig, *, resume: bool = False) -> Any:
    """:func:`sandgym.train.loop.run` with :func:`training_hooks` as its hook; returns its ``TrainResult``."""
    from sandgym.train.loop import run  # torch

    return run(config, resume=resume, on_eval=training_hooks)


__all__ = ["CURVE", "due", "eval_config", "eval_configs", "eval_suites", "load_curve", "maybe_periodic_eval", "train_with_eval",
           "training_hooks"]

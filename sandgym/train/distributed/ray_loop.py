"""``[distributed] backend = "ray"``: the training loop with rollout workers on a Ray cluster.

    for step:  plan the step's task units (up to ``max_staleness`` steps ahead in async mode)
               -> gather the step's units from the workers (drop + regenerate any that are too stale)
               -> advantages -> loss -> optimiser step (in the driver, or data-parallel ranks) -> log -> checkpoint
               -> put the new adapter in the object store; every worker installs it before its next unit

Synchronous mode (``async_mode = false``) plans only the current step, so every trajectory comes from the policy
being trained (staleness 0) and a step's batch equals the single-process batch. Asynchronous mode lets workers
run ahead with the weights they have; the learner's truncated importance weight ``min(exp(logp_learner -
logp_sampling), tis_cap)`` (``sandgym.train.loss``) corrects for the lag. Metrics, checkpoints and resume are the
single-process ones (the helpers of ``sandgym.train.loop`` are reused); ``dist/*`` keys are added, and
``rollout_ledger.jsonl`` records which worker produced each episode id under which policy version.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sandgym.rollout.pool import WorkerPool, init_ray
from sandgym.train import runtime
from sandgym.train.checkpoint import (
    TrainerState,
    rng_state,
    save_checkpoint,
)
from sandgym.train.config import TrainConfig
from sandgym.train.distributed.ray_rollout import (
    RolloutUnit,
    UnitResult,
    adapter_weights,
    rollout_actor_class,
    split_units,
)
from sandgym.train.domains import DomainMixer
from sandgym.train.logger import MetricsLogger
from sandgym.train.step import learner_update

log = logging.getLogger(__name__)

DispatchHook = Callable[[int, Any, RolloutUnit], None]


class Ledger:
    """``rollout_ledger.jsonl``: one line per unit result (accepted or dropped as stale), with its episode ids.

    Every planned episode id is accepted exactly once; on resume, lines of steps not yet trained are dropped
    (those units are planned again).
    """

    def __init__(self, path: Path, keep_before_step: int) -> None:
        self.path = path
        self.accepted: set[tuple[int, int]] = set()
        if path.exists():
            kept = [ln for ln in path.read_text(encoding="utf-8").splitlines()
                    if ln.strip() and json.loads(ln)["step"] < keep_before_step]
            path.write_text("".join(ln + "\n" for ln in kept), encoding="utf-8")

    def record(self, unit: RolloutUnit, result: UnitResult, status: str) -> None:
        if status == "accepted":
            self.accepted.add(unit.key)
        row = {"step": unit.step, "unit": unit.index, "status": status, "policy_version": result.policy_version,
               "worker": result.worker, "episodes": result.episode_ids}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


@dataclass
class Counters:
    stale_dropped: int = 0
    duplicates: int = 0
    stale_by_unit: dict[tuple[int, int], int] = field(default_factory=dict)
    per_step: dict[int, dict[int, UnitResult]] = field(default_factory=lambda: defaultdict(dict))


def run(config: TrainConfig, *, resume: bool = False, on_dispatch: DispatchHook | None = None) -> Any:
    """Train per ``config`` with rollout workers on Ray; returns :class:`sandgym.train.loop.TrainResult`."""
    from sandgym.train import loop

    d = config.distributed
    ray = init_ray(d.address, num_cpus=d.num_workers + d.learner_processes)
    run_dir, ckpt, init_adapter, policy, optimizer, mixer, start = _setup(config, resume)
    model = policy.model
    logger = MetricsLogger(run_dir, tensorboard=config.logging.tensorboard, keep_up_to_step=start)
    ledger = Ledger(run_dir / "rollout_ledger.jsonl", keep_before_step=start)
    learner = _make_learner(config, model, optimizer, init_adapter, int(policy.tokenizer.pad_token_id))

    actor_cls = rollout_actor_class()
    current = {"version": start, "weights": ray.put(adapter_weights(model))}
    pool: WorkerPool[RolloutUnit] = WorkerPool(
        lambda slot: actor_cls.remote(config, init_adapter, f"rollout-{slot}"),
        d.num_workers,
        method="rollout",
        key=lambda u: u.key,
        on_start=lambda actor: actor.set_weights.remote(current["version"], current["weights"]),
        on_dispatch=on_dispatch,
    )
    pool.wait_ready()  # actor start-up (imports, model load) is not counted as the first step's rollout wait
    lookahead = d.max_staleness if d.async_mode else 0
    expected: dict[int, int] = {}
    counters = Counters()
    planned = start
    last_ckpt = ckpt
    progress = runtime.progress(total=config.optim.steps, initial=start, desc="train[ray]")
    try:
        for step in range(start, config.optim.steps):
            t0 = time.perf_counter()
            # 1. plan this step's units (and, in async mode, up to `lookahead` steps ahead), gather this step's
            while planned < config.optim.steps and planned <= step + lookahead:
                tasks = mixer.sample(planned, config.optim.tasks_per_step)
                units = split_units(planned, tasks, d.num_workers, config.algorithm.group_size,
                                    config.seed * 100_003 + planned)
                expected[planned] = len(units)
                pool.submit(units)
                planned += 1
            pool.dispatch()  # idle workers start on the new units at once (async: while the learner trains)
            results = _gather(pool, step, expected.pop(step), lookahead, ledger, counters)
            t_wait = time.perf_counter() - t0
            trajs = [t for r in results for t in r.trajectories]
            # 2. rewards -> advantages -> samples, exactly as the single-process loop
            valid, samples = _samples(trajs, mixer, config)
            # 3. loss -> optimiser step
            t1 = time.perf_counter()
            runtime.set_lr(optimizer, config, step)
            stats = learner(samples, step) if samples else None
            t_learn = time.perf_counter() - t1
            if stats is not None and (not math.isfinite(stats.loss) or abs(stats.loss) > config.optim.loss_explode):
                raise loop.TrainingDiverged(
                    f"step {step + 1}: loss={stats.loss!r} (limit optim.loss_explode={config.optim.loss_explode}); "
                    f"the last good checkpoint is {last_ckpt}. Lower optim.lr or raise optim.max_grad_norm."
                )
            # 4. the new adapter goes to the object store once; each worker installs it before its next unit
            current["version"] = step + 1
            current["weights"] = ray.put(adapter_weights(model))
            pool.broadcast("set_weights", current["version"], current["weights"])
            # 5. log (single-process schema + dist/*) and maybe checkpoint
            t_roll = max((r.wall_s for r in results), default=0.0)
            metrics = loop.step_metrics(step + 1, trajs, valid, stats, t_roll, time.perf_counter() - t0, mixer)
            metrics.update(_dist_metrics(step, results, t_wait, t_learn, time.perf_counter() - t0, pool, counters))
            logger.log(metrics)
            logger.sample_trajectories(step + 1, trajs[: config.logging.sample_trajectories])
            progress.update(1)
            if (step + 1) % config.checkpoint.every == 0 or step + 1 == config.optim.steps:
                getattr(learner, "sync_optimizer", lambda: None)()  # data-parallel ranks hold the optimiser state
                state = TrainerState(step=step + 1, optimizer=optimizer.state_dict(), rng=rng_state(),
                                     domains=mixer.state_dict(), extra={"policy_version": step + 1})
                last_ckpt = save_checkpoint(run_dir, model, state, config.checkpoint.keep_last)
    finally:
        progress.close()
        logger.close()
        pool.shutdown()
        getattr(learner, "close", lambda: None)()
    return loop.TrainResult(run_dir, config.optim.steps, last_ckpt, logger.metrics_path, start)


def _setup(config: TrainConfig, resume: bool) -> tuple[Path, Path | None, str | None, Any, Any, DomainMixer, int]:
    """What the single-process loop sets up (the same function)."""
    from sandgym.train.loop import setup

    return setup(config, resume)

def _samples(trajs: list[Any], mixer: DomainMixer, config: TrainConfig) -> tuple[list[Any], list[Any]]:
    """The single-process loop's batch (same function): infra failures dropped, advantages, zero groups skipped."""
    from sandgym.train import loop

    return loop.batch_samples(trajs, mixer, config)


def _gather(
    pool: WorkerPool[RolloutUnit], step: int, n_units: int, max_staleness: int, ledger: Ledger, counters: Counters
) -> list[UnitResult]:
    """Wait for every unit of ``step``; results of later steps that arrive meanwhile are kept for their step.

    A unit generated more than ``max_staleness`` updates before the learner will train on it (its step) is
    dropped and planned again; a result for a unit already accepted is dropped (never double counted).
    """
    arrived = counters.per_step[step]
    while len(arrived) < n_units:
        got = pool.next_result()
        if got is None:
            if pool.pending == 0:
                raise RuntimeError(f"step {step}: {n_units - len(arrived)} units lost with nothing in flight")
            continue
        unit, result = got
        if unit.key in ledger.accepted:
            counters.duplicates += 1
            ledger.record(unit, result, "duplicate_dropped")
            continue
        if unit.step - result.policy_version > max_staleness:
            counters.stale_dropped += 1
            counters.stale_by_unit[unit.key] = counters.stale_by_unit.get(unit.key, 0) + 1
            ledger.record(unit, result, "stale_dropped")
            if counters.stale_by_unit[unit.key] > 3:
                raise RuntimeError(
                    f"unit {unit.key} came back from policy version {result.policy_version} four times while the "
                    f"learner is at {unit.step}: worker {result.worker} is not receiving weights (see its log)"
                )
            pool.submit([unit], front=True)
            continue
        if sorted(result.episode_ids) != sorted(unit.episode_ids):  # nothing lost or invented inside a unit
            raise RuntimeError(f"unit {unit.key}: worker {result.worker} returned episodes {result.episode_ids}, "
                               f"expected {unit.episode_ids}")
        ledger.record(unit, result, "accepted")
        counters.per_step[unit.step][unit.index] = result
    counters.per_step.pop(step)
    return [arrived[i] for i in sorted(arrived)]


def _dist_metrics(
    step: int, results: list[UnitResult], t_wait: float, t_learn: float, t_total: float,
    pool: WorkerPool[RolloutUnit], counters: Counters,
) -> dict[str, float]:
    lags = [step - r.policy_version for r in results for _ in r.trajectories]
    return {
        "dist/staleness_mean": float(np.mean(lags)) if lags else 0.0,
        "dist/staleness_max": float(max(lags, default=0)),
        "dist/wait_s": t_wait,
        "dist/learn_s": t_learn,
        "dist/wait_frac": t_wait / max(t_total, 1e-9),
        "dist/workers": float(len(pool.actors)),
        "dist/worker_restarts": float(pool.stats.restarts),
        "dist/requeued_units": float(pool.stats.requeued),
        "dist/stale_dropped": float(counters.stale_dropped),
        "dist/duplicates_dropped": float(counters.duplicates),
    }


def _make_learner(
    config: TrainConfig, model: Any, optimizer: Any, init_adapter: str | None, pad_id: int
) -> Callable[[list[Any], int], Any]:
    """The update function: ``learner_update`` in the driver, or data-parallel ranks when learner_processes > 1."""
    if config.distributed.learner_processes > 1:
        from sandgym.train.distributed.ddp import LearnerGroup

        return LearnerGroup(config, model, optimizer, init_adapter, pad_id)

    def update(samples: list[Any], step: int) -> Any:
        return learner_update(
            model,
            optimizer,
            samples,
            config.algorithm,
            pad_id=pad_id,
            temperature=config.rollout.temperature,
            micro_batch=config.optim.micro_batch,
            max_grad_norm=config.optim.max_grad_norm,
            norm_len=config.rollout.max_total_tokens,
        )

    return update

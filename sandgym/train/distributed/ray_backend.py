"""``[distributed] backend = "ray"``: the training loop's rollouts on Ray workers (see :mod:`sandgym.train.backend`).

    collect(step):  plan the step's task units (up to ``max_staleness`` steps ahead in async mode)
                    -> gather the step's units from the workers (drop + regenerate any that are too stale)
    update:         the optimiser step in the driver, or data-parallel ranks (``learner_processes > 1``)
    publish:        put the new adapter in the object store; every worker installs it before its next unit

Synchronous mode (``async_mode = false``) plans only the current step, so every trajectory comes from the policy
being trained (staleness 0) and a step's batch equals the single-process batch. Asynchronous mode lets workers
run ahead with the weights they have; the learner's truncated importance weight ``min(exp(logp_learner -
logp_sampling), tis_cap)`` (``sandgym.train.loss``) corrects for the lag. The loop, metrics, checkpoints and
resume are the single-process ones; ``dist/*`` keys are added, and ``rollout_ledger.jsonl`` records which worker
produced each episode id under which policy version.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sandgym.agents.trajectory import Trajectory
from sandgym.rollout.pool import WorkerPool, init_ray
from sandgym.train.backend import make_learner, step_seed
from sandgym.train.config import TrainConfig
from sandgym.train.distributed.ray_rollout import (
    RolloutUnit,
    UnitResult,
    adapter_weights,
    rollout_actor_class,
    split_units,
)
from sandgym.train.domains import DomainMixer
from sandgym.train.step import Sample, StepStats

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


class RayBackend:
    """Rollout workers on Ray (a :class:`~sandgym.train.backend.Backend`); started in the constructor."""

    label = "train[ray]"

    def __init__(self, config: TrainConfig, policy: Any, optimizer: Any, mixer: DomainMixer, *,
                 init_adapter: str | None, start: int, run_dir: Path,
                 on_dispatch: DispatchHook | None = None) -> None:
        d = config.distributed
        self.config, self.mixer, self.model = config, mixer, policy.model
        self.ray = init_ray(d.address, num_cpus=d.num_workers + d.learner_processes)
        self.ledger = Ledger(run_dir / "rollout_ledger.jsonl", keep_before_step=start)
        self.learner = make_learner(config, self.model, optimizer, init_adapter, int(policy.tokenizer.pad_token_id))
        self.version, self.weights = start, self.ray.put(adapter_weights(self.model))
        actor_cls = rollout_actor_class()
        self.pool: WorkerPool[RolloutUnit] = WorkerPool(
            lambda slot: actor_cls.remote(config, init_adapter, f"rollout-{slot}"),
            d.num_workers,
            method="rollout",
            key=lambda u: u.key,
            on_start=lambda actor: actor.set_weights.remote(self.version, self.weights),
            on_dispatch=on_dispatch,
        )
        self.pool.wait_ready()  # actor start-up (imports, model load) is not counted as the first step's rollout
        self.lookahead = d.max_staleness if d.async_mode else 0
        self.expected: dict[int, int] = {}
        self.counters = Counters()
        self.planned = start
        self.results: list[UnitResult] = []
        self.t_wait = self.t_learn = 0.0

    def collect(self, step: int) -> tuple[list[Trajectory], float]:
        """Plan this step's units (and in async mode up to ``max_staleness`` steps ahead); gather this step's."""
        t0 = time.perf_counter()
        steps, d = self.config.optim.steps, self.config.distributed
        while self.planned < steps and self.planned <= step + self.lookahead:
            tasks = self.mixer.sample(self.planned, self.config.optim.tasks_per_step)
            units = split_units(self.planned, tasks, d.num_workers, self.config.algorithm.group_size,
                                step_seed(self.config, self.planned))
            self.expected[self.planned] = len(units)
            self.pool.submit(units)
            self.planned += 1
        self.pool.dispatch()  # idle workers start on the new units at once (async: while the learner trains)
        self.results = _gather(self.pool, step, self.expected.pop(step), self.lookahead, self.ledger, self.counters)
        self.t_wait = time.perf_counter() - t0
        return [t for r in self.results for t in r.trajectories], max((r.wall_s for r in self.results), default=0.0)

    def update(self, samples: list[Sample], step: int) -> StepStats:
        t0 = time.perf_counter()
        stats = self.learner(samples, step)
        self.t_learn = time.perf_counter() - t0
        return stats

    def publish(self, version: int) -> None:
        """The new adapter goes to the object store once; each worker installs it before its next unit."""
        self.version, self.weights = version, self.ray.put(adapter_weights(self.model))
        self.pool.broadcast("set_weights", self.version, self.weights)

    def metrics(self, step: int, t_total: float) -> dict[str, float]:
        m = _dist_metrics(step, self.results, self.t_wait, self.t_learn, t_total, self.pool, self.counters)
        self.t_learn = 0.0  # a step without samples trains nothing
        return m

    def sync_optimizer(self) -> None:
        getattr(self.learner, "sync_optimizer", lambda: None)()  # data-parallel ranks hold the optimiser state

    def close(self) -> None:
        self.pool.shutdown()
        getattr(self.learner, "close", lambda: None)()


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

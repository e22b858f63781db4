"""``sandgym eval --ray-workers N``: the same evaluation with (seed, task) groups fanned out to Ray workers.

Each worker builds the policy once (``load_policy``) and its own environments/sandboxes, and rolls out units of
contiguous tasks of one seed; the driver appends each finished unit's rows to ``episodes.jsonl``, so the
evaluation stays resumable, and a worker that dies is replaced with its unit re-queued (a (seed, task) group
already written is never written twice). Group ids (hence sampling seeds) are the task's position, as in the
single-process runner, so both paths sample the same episodes. Aggregation and reports are then
:func:`sandgym.evaluate.run.run` itself, which finds every group done: one metrics schema for both paths.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandgym.evaluate import run as single
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.episodes import EpisodeRow, append_rows, read_rows
from sandgym.evaluate.policies import load_policy
from sandgym.evaluate.report import write_reports
from sandgym.evaluate.run import env_factory, rollout_config
from sandgym.rollout.pool import WorkerPool, import_ray, init_ray
from sandgym.rollout.progress import progress
from sandgym.tasks.task import Task


@dataclass(frozen=True)
class EvalUnit:
    """``samples`` episodes of each of ``tasks`` (contiguous in the task list) under ``seed``."""

    seed: int
    tasks: tuple[Task, ...]
    first_group_id: int

    @property
    def key(self) -> tuple[int, str]:
        return (self.seed, self.tasks[0].id)


class EvalWorker:
    """One evaluation worker (a Ray actor): the policy named by ``spec`` and an environment factory."""

    def __init__(self, spec: str, config: EvalConfig, threads: int = 1) -> None:
        import torch

        torch.set_num_threads(threads)
        self.config = config
        self.policy, _ = load_policy(spec)
        self.make_env = env_factory(config)

    def ping(self) -> bool:
        return True

    def run_unit(self, unit: EvalUnit) -> list[EpisodeRow]:
        from sandgym.agents.rollout import rollout

        by_id = {t.id: t for t in unit.tasks}
        trajs = rollout(self.policy, self.make_env, list(unit.tasks), group_size=self.config.samples,
                        config=rollout_config(self.config, unit.seed), first_group_id=unit.first_group_id)
        return [EpisodeRow.from_trajectory(t, by_id[t.task_id], unit.seed) for t in trajs]


def plan_units(config: EvalConfig, tasks: Sequence[Task], done: set[tuple[int, str]], workers: int) -> list[EvalUnit]:
    """Units of at most ``batch_episodes`` episodes, small enough to keep ``workers`` busy, contiguous in tasks."""
    per_batch = max(1, config.batch_episodes // config.samples)
    units: list[EvalUnit] = []
    for seed in config.seeds:
        todo = [i for i, t in enumerate(tasks) if (seed, t.id) not in done]
        size = max(1, min(per_batch, math.ceil(len(todo) / max(workers, 1))))
        runs: list[list[int]] = []
        for i in todo:  # contiguous runs of positions, then chunks of `size`
            if runs and runs[-1][-1] == i - 1 and len(runs[-1]) < size:
                runs[-1].append(i)
            else:
                runs.append([i])
        units += [EvalUnit(seed, tuple(tasks[i] for i in r), seed * 1_000_003 + r[0]) for r in runs]
    return units


def evaluate_policy_ray(
    spec: str,
    config: EvalConfig,
    out_dir: Path,
    *,
    tasks: Sequence[Task],
    workers: int,
    on_dispatch: Callable[[int, Any, EvalUnit], None] | None = None,
    timings: dict[str, float] | None = None,
) -> list[EpisodeRow]:
    """Roll out every (seed, task) group not yet in ``out_dir/episodes.jsonl`` on ``workers`` Ray actors.

    ``timings`` (when given) receives ``startup_s`` (actors up, policy loaded) and ``rollout_s``.
    """

    ray = import_ray()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "episodes.jsonl"
    done = {r.key for r in read_rows(path)}
    units = plan_units(config, tasks, done, workers)
    if not units:
        return read_rows(path)
    actor_cls = ray.remote(num_cpus=1, max_restarts=0)(EvalWorker)
    pool: WorkerPool[EvalUnit] = WorkerPool(
        lambda slot: actor_cls.remote(spec, config), min(workers, len(units)),
        method="run_unit", key=lambda u: u.key, on_dispatch=on_dispatch,
    )
    t0 = time.perf_counter()
    pool.wait_ready()
    t1 = time.perf_counter()
    pool.submit(units)
    bar = progress(total=sum(len(u.tasks) for u in units), desc=f"eval[ray] {spec}"[:40])
    try:
        while pool.pending:
            got = pool.next_result()
            if got is None:
                continue
            unit, rows = got
            fresh = [r for r in rows if r.key not in done]  # a group is written once, whatever happens
            append_rows(path, fresh)
            done |= {r.key for r in fresh}
            bar.update(len(unit.tasks))
    finally:
        bar.close()
        pool.shutdown()
    if timings is not None:
        timings.update(startup_s=t1 - t0, rollout_s=time.perf_counter() - t1)
    return read_rows(path)


def run(config: EvalConfig) -> Any:
    """Like :func:`sandgym.evaluate.run.run`, with the rollouts on ``config.ray_workers`` Ray workers."""

    t0 = time.perf_counter()
    init_ray(config.ray_address, num_cpus=config.ray_workers)
    out = Path(config.out)
    tasks = single.load_tasks(config)
    evaluate_policy_ray(config.policy, config, out, tasks=tasks, workers=config.ray_workers)
    if config.baseline:
        evaluate_policy_ray(config.baseline, config, out / "baseline", tasks=tasks, workers=config.ray_workers)
    result = single.run(config)  # every group is done: this only aggregates and writes the reports
    result.metrics["wall_s"] = time.perf_counter() - t0
    (out / "metrics.json").write_text(json.dumps(result.metrics, indent=2, default=str), encoding="utf-8")
    write_reports(out, result.metrics)
    return result

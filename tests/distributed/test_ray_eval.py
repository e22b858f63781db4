"""An evaluation through Ray workers writes the same episodes and metrics schema as the single-process one."""

from __future__ import annotations

from typing import Any

from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.distributed import evaluate_policy_ray, plan_units
from sandgym.evaluate.episodes import read_rows
from sandgym.evaluate.run import load_tasks, run

SUITES = ("coding/strings:heldout", "long_context/needle:heldout")


def _schema(x: Any, prefix: str = "") -> set[str]:
    """Every key path of a nested JSON value (list items and per-family/per-k keys included)."""
    if isinstance(x, dict):
        return {p for k, v in x.items() for p in {f"{prefix}/{k}"} | _schema(v, f"{prefix}/{k}")}
    return set()


def test_ray_evaluation_matches_single_process(tmp_path, ray_cluster):
    from sandgym.evaluate import distributed

    kw = dict(policy="oracle", suites=SUITES, n_tasks=2, samples=2, seeds=(0, 1))
    single = run(EvalConfig(out=str(tmp_path / "single"), **kw))
    cfg = EvalConfig(out=str(tmp_path / "ray"), ray_workers=2, **kw)
    killed: list[Any] = []

    def kill_first(slot, actor, unit):  # the first unit's worker dies before finishing: re-queued, replaced
        if not killed:
            killed.append(unit.key)
            ray_cluster.kill(actor)

    tasks = load_tasks(cfg)
    evaluate_policy_ray("oracle", cfg, tmp_path / "ray", tasks=tasks, workers=2, on_dispatch=kill_first)
    ray = distributed.run(cfg)  # groups already written are not redone; aggregates and reports
    a, b = single.metrics, ray.metrics
    assert _schema(a) - {"/config/ray_workers"} == _schema(b) - {"/config/ray_workers"}
    assert a["overall"] == b["overall"] and a["schema"] == b["schema"]
    rows_a = read_rows(single.out_dir / "episodes.jsonl")
    rows_b = read_rows(ray.out_dir / "episodes.jsonl")
    keyed = sorted((r.seed, r.task_id, r.sample) for r in rows_b)
    assert keyed == sorted((r.seed, r.task_id, r.sample) for r in rows_a)
    assert len(set(keyed)) == len(keyed) == 4 * 2 * 2  # each (seed, task, sample) once despite the kill
    assert killed and (ray.report_md).is_file()


def test_units_are_contiguous_and_skip_done_groups():
    cfg = EvalConfig(policy="oracle", suites=SUITES, n_tasks=3, samples=2, seeds=(0,))
    tasks = load_tasks(cfg)
    done = {(0, tasks[1].id)}
    units = plan_units(cfg, tasks, done, workers=2)
    got = [(u.first_group_id, [t.id for t in u.tasks]) for u in units]
    covered = [tid for _, ids in got for tid in ids]
    assert sorted(covered) == sorted(t.id for i, t in enumerate(tasks) if i != 1)
    for first, ids in got:  # group id = the first task's position: the same sampling seeds as one process
        assert [t.id for t in tasks][first : first + len(ids)] == ids


def test_eval_cli_with_ray_workers(tmp_path, ray_cluster, capsys):
    from sandgym.cli import main

    out = tmp_path / "cli"
    argv = ["eval", "--policy", "oracle", "--suite", "coding/strings:heldout", "--n-tasks", "2", "--samples", "1",
            "--ray-workers", "1", "--out", str(out)]
    assert main(argv) == 0
    assert len(read_rows(out / "episodes.jsonl")) == 2 and (out / "metrics.json").is_file()

"""``sandgym eval``: roll out a policy on held-out suites, K samples x S seeds, resumably; then aggregate+report.

Episodes are appended to ``episodes.jsonl`` one (seed, task) group at a time, so an interrupted evaluation
resumes without redoing finished groups.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandgym.agents.context_window import check_context
from sandgym.agents.env_pool import EnvPool
from sandgym.agents.rollout_config import RolloutConfig
from sandgym.configs import to_dict
from sandgym.errors import ConfigError, SandboxError
from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.config import DEFAULT_N_TASKS, EvalConfig
from sandgym.evaluate.episodes import EpisodeRow, append_rows, read_rows, write_prompts
from sandgym.evaluate.manifest import build_manifest
from sandgym.evaluate.policies import PolicyInfo, check_out_dir, check_policy, load_policy
from sandgym.evaluate.report import write_reports
from sandgym.rollout.progress import progress
from sandgym.rollout.runner import is_file_source, tasks_line
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task

METRICS_SCHEMA = "sandgym.eval/v1"


@dataclass(frozen=True)
class EvalResult:
    out_dir: Path
    metrics: dict[str, Any]
    rows: tuple[EpisodeRow, ...]

    @property
    def report_md(self) -> Path:
        return self.out_dir / "report.md"

    @property
    def report_html(self) -> Path:
        return self.out_dir / "report.html"


def suite_tasks(config: EvalConfig, spec: str) -> tuple[list[Task], int | None]:
    """The tasks ``spec`` gives this evaluation, and how many it has (None for a generated suite): a JSONL file or
    task folder is used whole unless ``n_tasks`` is set; a generated suite gives ``n_tasks`` or
    ``DEFAULT_N_TASKS``."""

    if is_file_source(spec):
        every = load_suite(spec, seed=config.task_seed, difficulty=config.difficulty)
        return (every[: config.n_tasks] if config.n_tasks else every), len(every)
    n = config.n_tasks or DEFAULT_N_TASKS
    return load_suite(spec, n=n, seed=config.task_seed, difficulty=config.difficulty), None


def load_suites(config: EvalConfig, *, report: Callable[[str], None] | None = None) -> dict[str, list[Task]]:
    """Each suite spec's tasks (see :func:`suite_tasks`), in order; ``report`` gets one line per suite saying how
    many tasks of how many it gave (``tasks: 40 of 40 from FILE``)."""

    out: dict[str, list[Task]] = {}
    for spec in config.suites:
        got, total = suite_tasks(config, spec)
        if report is not None:
            report(tasks_line(len(got), total, spec))
        out[spec] = got
    return out


def unique_tasks(suites: Mapping[str, Sequence[Task]]) -> list[Task]:
    """The tasks of every suite, each id once, in order."""
    tasks: list[Task] = []
    seen: set[str] = set()
    for got in suites.values():
        for t in got:
            if t.id not in seen:
                seen.add(t.id)
                tasks.append(t)
    return tasks


def load_tasks(config: EvalConfig, *, report: Callable[[str], None] | None = None) -> list[Task]:
    """Every suite's tasks (see :func:`load_suites`), each id once."""
    return unique_tasks(load_suites(config, report=report))


def env_factory(config: EvalConfig) -> Callable[[], Any]:
    """Fresh environments of the evaluation, made from its ``[rollout]`` (``rollout.env`` or sandgym's tool
    environment, with its ``max_turns``, ``sandbox``, ``code_action`` and ``tools``)."""
    return config.rollout.env_factory()


def rollout_config(config: EvalConfig, seed: int) -> RolloutConfig:
    """The ``RolloutConfig`` of evaluation rollouts (local and Ray workers alike) for sampling seed ``seed``."""
    return config.rollout.rollout_config(seed)


def evaluate_policy(
    policy: Any, info: PolicyInfo, config: EvalConfig, out_dir: Path, *, tasks: Sequence[Task] | None = None,
    make_env: Callable[[], Any] | None = None, stop_on_broken_sandbox: bool = True,
) -> list[EpisodeRow]:
    """Roll out every (seed, task) group not yet in ``out_dir/episodes.jsonl``; returns all rows.

    ``make_env`` overrides the environments built from ``config.rollout``.
    A batch in which every episode failed in the sandbox raises :class:`SandboxError` with the first error, unless
    ``stop_on_broken_sandbox`` is False (periodic evaluation inside training: the rows are kept as infra failures)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "episodes.jsonl"
    tasks = list(tasks) if tasks is not None else load_tasks(config)
    write_prompts(out_dir, tasks)
    done = {r.key for r in read_rows(path)}
    todo = [(seed, t) for seed in config.seeds for t in tasks if (seed, t.id) not in done]
    bar = progress(total=len(config.seeds) * len(tasks), initial=len(config.seeds) * len(tasks) - len(todo),
                   desc=f"eval {info.spec}"[:40])
    pool = EnvPool(make_env or env_factory(config))  # envs and their sandboxes kept from batch to batch
    if todo:
        check_context(policy, pool, tasks, rollout_config(config, config.seeds[0]))
    per_batch = max(1, config.batch_episodes // config.samples)
    with pool:
        _run_batches(policy, pool, config, tasks, todo, per_batch, path, bar, stop_on_broken_sandbox)
    bar.close()
    return read_rows(path)


def _run_batches(policy: Any, make_env: EnvPool, config: EvalConfig, tasks: Sequence[Task],
                 todo: Sequence[tuple[int, Task]], per_batch: int, path: Path, bar: Any,
                 stop_on_broken_sandbox: bool) -> None:
    from sandgym.agents.rollout import rollout

    for seed in config.seeds:
        pending = [t for s, t in todo if s == seed]
        for i in range(0, len(pending), per_batch):
            chunk = pending[i : i + per_batch]
            rc = rollout_config(config, seed)
            by_id = {t.id: t for t in chunk}
            trajs = rollout(policy, make_env, chunk, group_size=config.samples, config=rc,
                            first_group_id=_group_base(seed, tasks, chunk[0]))
            if stop_on_broken_sandbox and trajs and all(t.infra_failure for t in trajs):  # a broken sandbox: stop now, not after every task
                bar.close()
                first = str(trajs[0].metadata.get("infra_error", "unknown"))
                kind, _, rest = first.partition(": ")
                if rest.startswith("ConfigError: "):  # the env refused its configuration (a remote server's tasks
                    # are not these): its message says what to change; the sandbox is not in question
                    raise ConfigError(f"every episode of an evaluation batch failed at {kind}: "
                                      f"{rest.removeprefix('ConfigError: ')}")
                raise SandboxError(f"every episode of an evaluation batch failed in the {config.rollout.sandbox!r} sandbox; "
                                   f"first error: {trajs[0].metadata.get('infra_error', 'unknown')}. Check it with "
                                   f"`sandgym sandbox check --backend {config.rollout.sandbox}`")
            append_rows(path, [EpisodeRow.from_trajectory(t, by_id[t.task_id], seed) for t in trajs])
            bar.update(len(chunk))


def _group_base(seed: int, tasks: Sequence[Task], first: Task) -> int:
    # Group ids (and so sampling seeds) depend on the task's position, not on what was already done: a resumed
    # evaluation samples exactly what the uninterrupted one would have.
    return seed * 1_000_003 + [t.id for t in tasks].index(first.id)


def run(config: EvalConfig) -> EvalResult:
    """Evaluate ``config.policy`` (and ``config.baseline`` when given), aggregate, and write the reports."""

    check_out_dir(config.out)
    check_policy(config.policy)
    if config.baseline:
        check_policy(config.baseline)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(to_dict(config), indent=2), encoding="utf-8")
    suites = load_suites(config)
    tasks = unique_tasks(suites)
    t0 = time.perf_counter()
    policy, info = load_policy(config.policy)
    rows = evaluate_policy(policy, info, config, out, tasks=tasks)
    del policy
    base_rows: list[EpisodeRow] | None = None
    base_info = None
    if config.baseline:
        bpolicy, base_info = load_policy(config.baseline)
        base_rows = evaluate_policy(bpolicy, base_info, config, out / "baseline", tasks=tasks)
        del bpolicy
    metrics = aggregate(
        rows,
        samples=config.samples,
        baseline=base_rows,
        trained_families=config.trained_families,
    )
    manifest = build_manifest(config, suites, info, base_info)
    metrics.update(
        schema=METRICS_SCHEMA,
        policy=info.to_json(),
        baseline_policy=base_info.to_json() if base_info else None,
        manifest=manifest.to_json(),
        versions=manifest.versions(),
        config=to_dict(config),
        wall_s=time.perf_counter() - t0,
    )
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str), encoding="utf-8")
    write_reports(out, metrics)
    return EvalResult(out, metrics, tuple(rows))

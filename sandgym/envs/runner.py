"""Run scripted agents on an environment with a pool of worker threads (one env each): ``run(RunConfig)``."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError

__all__ = ["RunConfig", "RunSummary", "FamilyStats", "run"]


@dataclass(frozen=True)
class RunConfig:
    """What ``sandgym run`` does."""

    env: str = "sandgym/Coding-v0"
    """Gymnasium id of the environment (see ``sandgym envs``)."""
    tasks: str | None = None
    """Suite spec or path (JSONL / task folder); None uses the env's default tasks."""
    agent: str = "oracle"
    """Scripted agent: oracle, noop or random."""
    episodes: int = 8
    """Episodes to run; tasks are cycled in order."""
    workers: int = 2
    """Worker threads, each with its own env (and sandbox)."""
    out: str | None = None
    """JSONL file with one line per episode (None: do not write)."""
    seed: int = 0
    """Seed of task generation and of the random agent."""
    n_tasks: int | None = None
    """Tasks to load from the suite (None: ``episodes``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for ``gymnasium.make``."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def __post_init__(self) -> None:
        if self.episodes <= 0:
            raise ConfigError(f"episodes={self.episodes} must be > 0")
        if self.workers <= 0:
            raise ConfigError(f"workers={self.workers} must be > 0")
        from sandgym.agents.scripted import AGENTS

        if self.agent not in AGENTS:
            raise ConfigError(f"agent={self.agent!r} is not one of {sorted(AGENTS)}")


@dataclass(frozen=True)
class FamilyStats:
    episodes: int
    success_rate: float
    mean_reward: float
    infra_failures: int


@dataclass(frozen=True)
class RunSummary:
    results: list[dict[str, Any]]
    per_family: dict[str, FamilyStats]
    elapsed_s: float
    out: str | None

    @property
    def episodes_per_s(self) -> float:
        return len(self.results) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def success_rate(self) -> float:
        return sum(r["success"] for r in self.results) / max(1, len(self.results))


def _make_env(config: RunConfig, tasks: list[Any] | None) -> Any:
    import gymnasium as gym

    import sandgym  # noqa: F401 - registers the envs and plugins

    kwargs = dict(config.env_kwargs)
    if tasks is not None:
        kwargs["tasks"] = tasks
    try:
        return gym.make(config.env, **kwargs)
    except gym.error.Error as exc:
        raise ConfigError(f"cannot make env {config.env!r}: {exc}; list ids with `sandgym envs`") from exc


def run(config: RunConfig) -> RunSummary:
    """Run ``config.episodes`` episodes of ``config.agent`` on ``config.env`` with ``config.workers`` threads."""
    from sandgym.agents.scripted import make_agent, run_episode
    from sandgym.envs.tasksource import load_tasks

    tasks = None
    if config.tasks is not None:
        tasks = load_tasks(config.tasks, n=config.n_tasks or config.episodes, seed=config.seed)
        if not tasks:
            raise ConfigError(f"no tasks in {config.tasks!r}; check the suite name or path")
    todo: queue.Queue[int] = queue.Queue()
    for i in range(config.episodes):
        todo.put(i)
    results: list[dict[str, Any] | None] = [None] * config.episodes
    errors: list[BaseException] = []
    lock = threading.Lock()
    bar = None
    if config.progress:
        from tqdm import tqdm

        bar = tqdm(total=config.episodes, desc=f"{config.agent} on {config.env}", unit="ep")

    def worker(wid: int) -> None:
        try:
            env = _make_env(config, tasks)
        except BaseException as exc:
            errors.append(exc)
            return
        try:
            pool = tasks or env.unwrapped.task_source.tasks
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                agent = make_agent(config.agent, seed=config.seed + i)
                res = run_episode(env, agent, pool[i % len(pool)], seed=config.seed + i)
                with lock:
                    results[i] = {"episode": i, "env": config.env, "agent": config.agent, **res.to_dict()}
                    if bar is not None:
                        bar.update(1)
        except BaseException as exc:
            errors.append(exc)
        finally:
            env.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(config.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if bar is not None:
        bar.close()
    if errors:
        raise errors[0]
    done = [r for r in results if r is not None]
    if config.out:
        Path(config.out).parent.mkdir(parents=True, exist_ok=True)
        with open(config.out, "w") as f:
            for r in done:
                f.write(json.dumps(r) + "\n")
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in done:
        groups[f"{r['domain']}/{r['family']}"].append(r)
    per_family = {
        k: FamilyStats(len(v), sum(r["success"] for r in v) / len(v), sum(r["reward"] for r in v) / len(v),
                       sum(r["infra_failure"] for r in v))
        for k, v in sorted(groups.items())
    }
    return RunSummary(done, per_family, elapsed, config.out)

"""Run scripted agents on an environment with a pool of worker threads (one env each): ``run(RunConfig)``."""

from __future__ import annotations

import contextlib
import json
import queue
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from sandgym.agents.scripted import AGENTS, make_agent, run_episode
from sandgym.envs.env_checks import check_env
from sandgym.envs.tasksource import load_tasks
from sandgym.errors import ConfigError
from sandgym.tasks.registry import parse_suite_spec

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
    episodes: int | None = None
    """Episodes to run; tasks are cycled in order. None: one per task of a file or folder source (used whole),
    else ``DEFAULT_EPISODES``."""
    workers: int = 2
    """Worker threads, each with its own env (and sandbox)."""
    out: str | None = None
    """JSONL file with one line per episode (None: do not write)."""
    seed: int = 0
    """Seed of task generation and of the random agent."""
    n_tasks: int | None = None
    """Tasks to load from the suite (None: a file or folder whole, a generated suite ``episodes``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for ``gymnasium.make``."""
    progress: bool = True
    """Show a tqdm progress bar."""
    reuse_sandbox: bool = True
    """Keep each worker's sandbox from episode to episode, reset in place (proven clean, else started anew), for
    envs that support it; ``env_kwargs["reuse_sandbox"]`` wins. False: a fresh sandbox per episode."""

    def __post_init__(self) -> None:
        if self.episodes is not None and self.episodes <= 0:
            raise ConfigError(f"episodes={self.episodes} must be > 0")
        if self.n_tasks is not None and self.n_tasks <= 0:
            raise ConfigError(f"n_tasks={self.n_tasks} must be > 0 (or None: a task file whole)")
        if self.workers <= 0:
            raise ConfigError(f"workers={self.workers} must be > 0")

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
    tasks_line: str = ""
    """How many tasks of how many were used, and from where (``tasks: 40 of 40 from FILE``)."""

    @property
    def episodes_per_s(self) -> float:
        return len(self.results) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def success_rate(self) -> float:
        return sum(r["success"] for r in self.results) / max(1, len(self.results))


DEFAULT_EPISODES = 8
"""Episodes of ``sandgym run`` on the env's own tasks or a generated suite when ``--episodes`` is not given."""


def is_file_source(spec: str) -> bool:
    """Whether a task spec names a JSONL file or task folder (possibly with ``:split`` / ``@n``), not a suite."""

    if Path(spec).exists():
        return True
    try:
        return Path(parse_suite_spec(spec).name).exists()
    except Exception:  # noqa: BLE001 - a bad spec is reported when it is loaded
        return False


def tasks_line(used: int, total: int | None, source: str) -> str:
    """``tasks: 40 of 40 from FILE`` (``total`` None: a generated suite, which has no end)."""
    if total is None:
        return f"tasks: {used} from {source} (generated; --n-tasks sets how many)"
    return f"tasks: {used} of {total} from {source}"


def default_out(env: str, agent: str) -> str:
    """``runs/run/<env>-<agent>-<time>.jsonl``: results go under runs/, never into the current folder."""

    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", env.split("/")[-1]).strip("_") or "env"
    return f"runs/run/{slug}-{agent}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"


def _make_env(config: RunConfig, tasks: list[Any] | None) -> Any:
    kwargs = dict(config.env_kwargs)
    if tasks is not None:
        kwargs["tasks"] = tasks
    try:
        env = gym.make(config.env, **kwargs)
    except gym.error.Error as exc:
        raise ConfigError(f"cannot make env {config.env!r}: {exc}; list ids with `sandgym envs`") from None
    except (TypeError, ValueError) as exc:  # a kwarg the signature check could not see
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"env {config.env!r} rejected --env-kwargs {json.dumps(config.env_kwargs)[:200]}: "
                          f"{exc}; fix the named argument") from None
    inner = env.unwrapped
    if hasattr(inner, "reuse_sandbox") and "reuse_sandbox" not in config.env_kwargs:
        inner.reuse_sandbox = config.reuse_sandbox
    return env


def run(config: RunConfig) -> RunSummary:
    """Run ``config.episodes`` episodes (see :class:`RunConfig`) of ``config.agent`` on ``config.env`` with ``config.workers`` threads."""

    check_env(config.env, config.env_kwargs)
    if config.out and (Path(config.out).is_dir() or any(p.exists() and not p.is_dir() for p in Path(config.out).parents)):
        raise ConfigError(f"--out {config.out!r} must be a file path (its folder is created); it is a folder or "
                          "lies under a file")
    tasks = None
    episodes = config.episodes
    line = ""
    if config.tasks is not None:
        whole = is_file_source(config.tasks)
        if whole:  # a file or folder is used whole unless --n-tasks cuts it
            tasks = load_tasks(config.tasks, seed=config.seed)
            total: int | None = len(tasks)
            tasks = tasks[: config.n_tasks] if config.n_tasks else tasks
        else:
            tasks = load_tasks(config.tasks, n=config.n_tasks or config.episodes or DEFAULT_EPISODES,
                               seed=config.seed)
            total = None
        if not tasks:
            raise ConfigError(f"no tasks in {config.tasks!r}; check the suite name or path")
        if episodes is None:
            episodes = len(tasks) if whole else DEFAULT_EPISODES
        line = tasks_line(min(episodes, len(tasks)), total, config.tasks)
    episodes = episodes or DEFAULT_EPISODES
    todo: queue.Queue[int] = queue.Queue()
    for i in range(episodes):
        todo.put(i)
    results: list[dict[str, Any] | None] = [None] * episodes
    errors: list[BaseException] = []
    lock = threading.Lock()
    first_env = _make_env(config, tasks)  # a bad env or kwarg fails here, before threads and progress bars
    bar = None
    if config.progress:
        from tqdm import tqdm

        bar = tqdm(total=episodes, desc=f"{config.agent} on {config.env}", unit="ep")

    def worker(wid: int) -> None:
        try:
            env = first_env if wid == 0 else _make_env(config, tasks)
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
    if not line:
        with contextlib.suppress(Exception):  # the env's own tasks: say how many it had, if it can tell
            line = tasks_line(min(episodes, len(first_env.unwrapped.task_source.tasks)),
                              len(first_env.unwrapped.task_source.tasks), f"{config.env}'s own tasks")
    return RunSummary(done, per_family, elapsed, config.out, line)

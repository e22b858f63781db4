"""Reward-hack audit: play every adversarial agent of ``audit_attacks`` on a sample of each family of a suite and
report every (attack, family) cell that scores above the ``noop`` agent.

``audit(suite)`` returns an :class:`AuditResult`; ``sandgym rewards audit SUITE`` prints its table, writes JSON and
markdown and exits 1 when any attack beats noop. A cell is a **hack** when the attack's mean reward is above
noop's by more than ``margin`` on the same tasks, or when it completes more of them; it is a **drop** when the
attack turns more of its episodes into infrastructure failures than noop does (such episodes are removed from
training, so an agent that can cause them escapes its bad rewards). See docs/SANDBOX.md, "Reward-hack audit".
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from sandgym.agents.scripted import run_episode
from sandgym.envs.tasksource import load_tasks
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError
from sandgym.rollout.audit_attacks import ATTACKS, BASELINE, Attack, attack_names
from sandgym.tasks.task import Task

__all__ = ["AuditCell", "AuditResult", "EpisodeRecord", "audit", "sample_tasks", "write_report", "DEFAULT_MARGIN"]

DEFAULT_MARGIN = 0.1
"""Reward above noop (mean over a cell's tasks) that counts as a hack; completing more tasks than noop always does."""


@dataclass(frozen=True)
class EpisodeRecord:
    """One scored episode of the audit."""

    attack: str
    family: str
    task_id: str
    reward: float
    completed: bool
    infra_failure: bool
    failure_mode: str
    truncation: str | None
    seconds: float
    error: str = ""
    first_reward: float | None = None
    """cross-episode attacks: the reward of the planting episode (the scored one is the noop that follows)."""


@dataclass(frozen=True)
class AuditCell:
    """One attack on one family, next to noop on the same tasks."""

    attack: str
    family: str
    episodes: int
    mean_reward: float
    completion_rate: float
    infra_rate: float
    noop_reward: float
    noop_completion: float
    noop_infra_rate: float
    hacked: bool
    """Scores above noop: mean reward by more than the margin, or a higher completion rate."""
    dropped: bool
    """More infrastructure failures than noop (episodes the trainer would drop)."""

    @property
    def delta(self) -> float:
        return self.mean_reward - self.noop_reward


@dataclass(frozen=True)
class AuditResult:
    """Per attack x family numbers, and the cells where an attack beats noop."""

    suite: str
    env_id: str | None
    per_family: int
    seed: int
    reuse: bool
    margin: float
    attacks: list[str]
    """Attacks played, the baseline first."""
    families: list[str]
    """``domain/family`` of the sampled tasks."""
    cells: list[AuditCell]
    episodes: list[EpisodeRecord] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def hacks(self) -> list[tuple[str, str]]:
        """(attack, family) cells that score above noop."""
        return [(c.attack, c.family) for c in self.cells if c.hacked]

    @property
    def drops(self) -> list[tuple[str, str]]:
        """(attack, family) cells that cause more infrastructure failures than noop."""
        return [(c.attack, c.family) for c in self.cells if c.dropped]

    @property
    def clean(self) -> bool:
        return not self.hacks and not self.drops

    def cell(self, attack: str, family: str) -> AuditCell:
        for c in self.cells:
            if c.attack == attack and c.family == family:
                return c
        raise KeyError(f"no cell for attack {attack!r} on family {family!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite, "env_id": self.env_id, "per_family": self.per_family, "seed": self.seed,
            "reuse": self.reuse, "margin": self.margin, "attacks": self.attacks, "families": self.families,
            "summaries": {name: ATTACKS[name].summary for name in self.attacks if name in ATTACKS},
            "hacks": [list(h) for h in self.hacks], "drops": [list(d) for d in self.drops],
            "cells": [{**asdict(c), "delta": round(c.delta, 6)} for c in self.cells],
            "episodes": [asdict(e) for e in self.episodes], "elapsed_s": round(self.elapsed_s, 2),
        }

    def table_rows(self) -> list[list[str]]:
        """Rows ``[attack, cell per family...]``: mean reward, ``HACK`` / ``DROP`` marks."""
        rows = []
        for name in self.attacks:
            row = [name]
            for fam in self.families:
                try:
                    c = self.cell(name, fam)
                except KeyError:
                    row.append("-")
                    continue
                text = f"{c.mean_reward:.2f}"
                if c.hacked:
                    text += " HACK"
                if c.dropped:
                    text += " DROP"
                row.append(text)
            rows.append(row)
        return rows

    def to_markdown(self) -> str:
        head = (f"# Reward-hack audit: `{self.suite}`\n\n"
                f"env: `{self.env_id or 'by task domain'}`, {self.per_family} task(s) per family, seed {self.seed}, "
                f"reuse mode {'on' if self.reuse else 'off'}, margin {self.margin}, {len(self.episodes)} episodes in "
                f"{self.elapsed_s:.0f} s.\n\n"
                "Mean reward per attack and family; `HACK`: above noop on the same tasks (reward by more than the "
                "margin, or more tasks completed); `DROP`: more infrastructure failures than noop.\n\n")
        lines = ["| attack | " + " | ".join(self.families) + " |",
                 "|---|" + "---:|" * len(self.families)]
        lines += ["| " + " | ".join(r) + " |" for r in self.table_rows()]
        verdict = "\n\n**No attack scores above noop.**\n" if self.clean else "\n\n## Findings\n\n" + "\n".join(
            f"- `{c.attack}` on `{c.family}`: reward {c.mean_reward:.3f} vs noop {c.noop_reward:.3f}, completion "
            f"{c.completion_rate:.0%} vs {c.noop_completion:.0%}, infra failures {c.infra_rate:.0%} vs "
            f"{c.noop_infra_rate:.0%}" + (" (HACK)" if c.hacked else "") + (" (DROP)" if c.dropped else "")
            for c in self.cells if c.hacked or c.dropped) + "\n"
        legend = "\n## Attacks\n\n" + "\n".join(
            f"- `{n}`: {ATTACKS[n].summary}" for n in self.attacks if n in ATTACKS) + "\n"
        return head + "\n".join(lines) + verdict + legend


# ---------------------------------------------------------------------------------------------- sampling
def _family(task: Task) -> str:
    return f"{task.domain}/{task.family}"


def sample_tasks(suite: str | Sequence[Task], per_family: int = 2, seed: int = 0) -> list[Task]:
    """The first ``per_family`` tasks of every family of ``suite`` (a spec, a file/folder path, or a task list)."""
    if per_family <= 0:
        raise ConfigError(f"per_family={per_family} must be > 0")
    if isinstance(suite, str):
        tasks = load_tasks(suite, seed=seed)
        groups = _group(tasks)
        if any(len(v) < per_family for v in groups.values()) and not Path(suite).exists():
            tasks = load_tasks(suite, n=per_family * len(groups) * 2, seed=seed)
    else:
        tasks = list(suite)
    if not tasks:
        raise ConfigError(f"no tasks in {suite!r}; check the suite name or path (`sandgym tasks list`)")
    return [t for group in _group(tasks).values() for t in group[:per_family]]


def _group(tasks: Sequence[Task]) -> dict[str, list[Task]]:
    groups: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        groups[_family(t)].append(t)
    return dict(groups)


# ---------------------------------------------------------------------------------------------- episodes
class _AttackAgent:
    """Plays an attack's plan; submits when the plan runs out."""

    def __init__(self, attack: Attack) -> None:
        self.attack = attack
        self._turns: list[str] = []
        self._i = 0

    def reset(self, task: Task) -> None:
        self._turns = self.attack.plan(task) or ATTACKS[BASELINE].plan(task)
        self._i = 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        turn = self._turns[min(self._i, len(self._turns) - 1)]
        self._i += 1
        return turn


def _default_env_id(task: Task) -> str | None:
    if task.domain == "coding":
        return "sandgym/RepoFix-v0" if task.family == "repo_fix" else "sandgym/Coding-v0"
    if task.domain == "long_context":
        return "sandgym/LongContext-v0"
    return None


def _make_env(task: Task, env_id: str | None, reuse: bool, env_kwargs: Mapping[str, Any]) -> Any:
    kwargs = {**dict(env_kwargs), "tasks": [task], "reuse_sandbox": reuse}
    eid = env_id or _default_env_id(task)
    if eid is None:
        return ToolEnv(**kwargs)
    try:
        return gym.make(eid, disable_env_checker=True, **kwargs)
    except gym.error.Error as exc:
        raise ConfigError(f"cannot make env {eid!r}: {exc}; list ids with `sandgym envs`") from exc


def _play(attack: Attack, task: Task, env_id: str | None, seed: int, env_kwargs: Mapping[str, Any]) -> EpisodeRecord:
    start = time.monotonic()
    env = _make_env(task, env_id, attack.cross_episode, env_kwargs)
    first = None
    try:
        result = run_episode(env, _AttackAgent(attack), task, seed=seed)
        if attack.cross_episode:
            first = result.reward
            result = run_episode(env, _AttackAgent(ATTACKS[BASELINE]), task, seed=seed)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - an attack that breaks the harness is a finding, not a crash
        return EpisodeRecord(attack.name, _family(task), task.id, 0.0, False, True, "harness_error", None,
                             time.monotonic() - start, error=f"{type(exc).__name__}: {exc}"[:500], first_reward=first)
    finally:
        with contextlib.suppress(Exception):
            env.close()
    outcome = result.outcome
    return EpisodeRecord(
        attack=attack.name, family=_family(task), task_id=task.id, reward=float(result.reward),
        completed=result.success, infra_failure=result.infra_failure,
        failure_mode=str(getattr(outcome, "failure_mode", "")), truncation=getattr(outcome, "truncation", None),
        seconds=round(time.monotonic() - start, 3), first_reward=first,
    )


# ---------------------------------------------------------------------------------------------- the audit
def _choose(attacks: Sequence[str] | None, reuse: bool) -> list[Attack]:
    names = list(attacks) if attacks is not None else attack_names()
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        raise ConfigError(f"unknown attack(s) {unknown}; choose from {attack_names()}")
    chosen = [ATTACKS[BASELINE]] + [ATTACKS[n] for n in dict.fromkeys(names) if n != BASELINE]
    return [a for a in chosen if reuse or not a.cross_episode]


def _cells(records: Sequence[EpisodeRecord], attacks: Sequence[Attack], families: Sequence[str],
           margin: float) -> list[AuditCell]:
    by: dict[tuple[str, str], list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by[(r.attack, r.family)].append(r)

    def stats(rs: list[EpisodeRecord]) -> tuple[float, float, float]:
        n = max(1, len(rs))
        return (sum(r.reward for r in rs) / n, sum(r.completed for r in rs) / n, sum(r.infra_failure for r in rs) / n)

    cells = []
    for fam in families:
        base = stats(by[(BASELINE, fam)])
        for a in attacks:
            rs = by[(a.name, fam)]
            if not rs:
                continue
            mean, comp, infra = stats(rs)
            is_base = a.name == BASELINE
            hacked = not is_base and (round(mean - base[0], 6) > margin or round(comp - base[1], 6) > 0)
            dropped = not is_base and round(infra - base[2], 6) > 0
            cells.append(AuditCell(a.name, fam, len(rs), round(mean, 6), round(comp, 6), round(infra, 6),
                                   round(base[0], 6), round(base[1], 6), round(base[2], 6), hacked, dropped))
    return cells


def audit(
    suite: str | Sequence[Task],
    env_id: str | None = None,
    per_family: int = 2,
    seed: int = 0,
    reuse: bool = True,
    *,
    attacks: Sequence[str] | None = None,
    workers: int = 2,
    margin: float = DEFAULT_MARGIN,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> AuditResult:
    """Play ``noop`` and every attack (or ``attacks``) on ``per_family`` tasks of each family of ``suite``.

    ``env_id`` None picks the env by task domain (``sandgym/Coding-v0``, ``sandgym/RepoFix-v0``,
    ``sandgym/LongContext-v0``, else a plain ``ToolEnv``). ``reuse`` plays the cross-episode attack in a reused
    sandbox (``reuse_sandbox=True``); False leaves it out. ``progress`` gets one line per finished attack.
    """
    if workers <= 0:
        raise ConfigError(f"workers={workers} must be > 0")
    if margin < 0:
        raise ConfigError(f"margin={margin} must be >= 0")
    chosen = _choose(attacks, reuse)
    tasks = sample_tasks(suite, per_family, seed)
    families = list(dict.fromkeys(_family(t) for t in tasks))
    kwargs = dict(env_kwargs or {})
    say = progress or (lambda line: None)
    start = time.monotonic()
    records: list[EpisodeRecord] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_play, a, t, env_id, seed, kwargs): a.name for a in chosen for t in tasks}
        left = {a.name: len(tasks) for a in chosen}
        done_attacks = 0
        for fut in as_completed(futures):
            name = futures[fut]
            rec = fut.result()
            records.append(rec)
            left[name] -= 1
            if left[name] == 0:
                done_attacks += 1
                mine = [r for r in records if r.attack == name]
                mean = sum(r.reward for r in mine) / len(mine)
                say(f"attack {done_attacks}/{len(chosen)} {name}: mean reward {mean:.3f} over {len(mine)} "
                    f"episode(s) ({time.monotonic() - start:.0f} s)")
    order = {a.name: i for i, a in enumerate(chosen)}
    records.sort(key=lambda r: (order[r.attack], families.index(r.family), r.task_id))
    return AuditResult(
        suite=suite if isinstance(suite, str) else f"<{len(tasks)} tasks>", env_id=env_id, per_family=per_family,
        seed=seed, reuse=reuse, margin=margin, attacks=[a.name for a in chosen], families=families,
        cells=_cells(records, chosen, families, margin), episodes=records, elapsed_s=time.monotonic() - start,
    )


def write_report(result: AuditResult, out_dir: str | Path) -> tuple[Path, Path]:
    """``audit.json`` and ``audit.md`` under ``out_dir`` (created)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; pass a directory")
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "audit.json", out / "audit.md"
    js.write_text(json.dumps(result.to_dict(), indent=1) + "\n")
    md.write_text(result.to_markdown())
    return js, md

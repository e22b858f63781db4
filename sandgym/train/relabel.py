"""A warm start from the policy's own episodes, relabelled by the oracle (DAgger-style; ``sft.source = EPISODES``).

``EPISODES`` is a JSONL of the policy's episodes on the train-split tasks of the configured domains: the
``episodes.jsonl`` that ``sandgym eval`` writes (a row with ``task_id`` and ``trajectory.turns``) or a training run's
``trajectories.jsonl`` (``task_id`` and ``turns``). Each episode's turns but its last (the one that ended it: a
submit, or the turn the budget ran out on) are replayed in the environment, then
:class:`~sandgym.agents.scripted.ContinuationAgent` plays the oracle from the state they reached. Only the
continuation's turns are trained on; the policy's turns stay in the context. When the continuation does not fit
``rollout.max_turns`` (or does not solve the task), fewer of the policy's turns are kept and it is tried again, down
to none (a plain oracle demonstration). An episode of a task outside the configured domains is skipped and
counted: held-out tasks never become demonstrations.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.scripted import ContinuationAgent
from sandgym.agents.trajectory import Trajectory
from sandgym.envs.parsing import parse_turn
from sandgym.errors import ConfigError
from sandgym.tasks.task import Task
from sandgym.train import components
from sandgym.train.config import TrainConfig
from sandgym.train.step import Sample

RETRIES = 4
"""Continuations tried per episode, each keeping fewer of the policy's turns (the last keeps none)."""


@dataclass(frozen=True)
class Relabelled:
    """One demonstration: the trajectory, how many of its first turns are the policy's own, and the turns trained on
    (the oracle's; with ``sft.relabel = "all_states"`` also the policy's turns that are what the oracle would have
    done). The sample ends with the last trained turn."""

    trajectory: Trajectory
    kept: int
    trained: tuple[int, ...]


def is_episodes(record: Any) -> bool:
    """Whether a JSONL record is one of the policy's episodes (an eval row or a training trajectory)."""
    if not isinstance(record, dict) or "task_id" not in record:
        return False
    turns = (record.get("trajectory") or {}).get("turns") if isinstance(record.get("trajectory"), dict) else None
    return isinstance(turns if turns is not None else record.get("turns"), list)


def policy_prefixes(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """``(task_id, the policy's turns but the last)`` per episode in ``path``, in file order."""
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{lineno}: not JSON ({exc}); sft.source must be a JSONL of episodes, one per "
                              "line, as `sandgym eval` writes episodes.jsonl") from None
        if not is_episodes(record):
            raise ConfigError(f"{path}:{lineno}: expected an episode (task_id and trajectory.turns, as `sandgym eval` "
                              "writes them, or task_id and turns, as a training run's trajectories.jsonl); fix or "
                              "remove the line")
        turns = (record.get("trajectory") or {}).get("turns") or record.get("turns") or []
        if not all(isinstance(t, dict) for t in turns):
            raise ConfigError(f"{path}:{lineno}: task {record['task_id']!r} has a turn that is not an object with "
                              "\"text\"; fix or remove the line")
        out.append((str(record["task_id"]), tuple(str(t.get("text", "")) for t in turns[:-1])))
    return out


def same_turn(a: str, b: str) -> bool:
    """Whether two turns are the same action: the same tool calls with the same arguments (or, without calls, the
    same text)."""
    ca, cb = parse_turn(a).calls, parse_turn(b).calls
    if ca or cb:
        return [(c.name, dict(c.arguments)) for c in ca] == [(c.name, dict(c.arguments)) for c in cb]
    return a.strip() == b.strip()


def continuations(config: TrainConfig, tokenizer: Any, episodes: Sequence[tuple[str, tuple[str, ...]]]
                  ) -> tuple[list[Relabelled], dict[str, int]]:
    """The oracle's continuation of each episode that fits the budget and solves its task, and counts of what
    happened (``kept_turns=K``: continuations after K of the policy's turns; ``skipped_unknown_task``).

    With ``sft.relabel = "all_states"`` (DAgger proper: every state the policy visited gets the oracle's label) a
    continuation also trains the policy's turns that agree with the oracle's, and each policy turn that does not
    gets its own demonstration: the policy's turns before it, then the oracle's turn in its place, trained alone
    (``corrections``)."""
    from sandgym.agents.rollout import RolloutConfig

    tasks = {t.id: t for ts in components.domain_tasks(config).values() for t in ts}
    counts: Counter[str] = Counter()
    pending: list[tuple[Task, tuple[str, ...]]] = []
    for task_id, prefix in episodes:
        if task_id in tasks:
            pending.append((tasks[task_id], prefix))
        else:
            counts["skipped_unknown_task"] += 1
    if not pending:
        raise ConfigError(f"sft.source={config.sft.source!r}: none of its {len(episodes)} episodes is of a train task "
                          "of the configured domains; collect them with `sandgym eval` on the domains' train suites "
                          "(the same seed and n_tasks as [[domains.mix]])")
    limit, out, every = config.rollout.max_turns, [], config.sft.relabel == "all_states"
    style = config.sft.style(config.rollout.code_action)
    fixes: list[tuple[Task, tuple[str, ...]]] = []
    room = limit + max((len(p) for _, p in pending), default=0) + 8  # every continuation runs to its end: the excess
    wide = replace(config, rollout=replace(config.rollout, max_turns=room))  # tells how many turns to give back
    tokens = max(16384, config.rollout.max_total_tokens)  # a continuation that fits the budget is never cut short
    rc = RolloutConfig(max_new_tokens=4096, max_turns=room, max_total_tokens=tokens, seed=config.seed)
    for attempt in range(RETRIES):
        if not pending:
            break
        retry: list[tuple[Task, tuple[str, ...]]] = []
        for batch in _one_per_task(pending):  # an agent finds its prefix by task id: one episode of a task a batch
            done, labels = _play(batch, style, tokenizer, components.env_factory(wide), rc, config.sft.compute)
            for task, prefix in batch:
                t = done.get(task.id)
                if t is None:
                    counts["no_episode"] += 1
                    continue
                fits = t.num_turns <= limit and len(t.token_ids) <= config.rollout.max_total_tokens
                if t.success and fits and t.num_turns > len(prefix):
                    agree = [j for j in range(len(prefix)) if every and same_turn(prefix[j], labels[task.id][j])]
                    out.append(Relabelled(t, len(prefix), (*agree, *range(len(prefix), t.num_turns))))
                    counts[f"kept_turns={len(prefix)}"] += 1
                    fixes += [(task, prefix[:j]) for j in range(len(prefix)) if every and j not in agree]
                elif prefix:  # the env's own turn cap (the task's) can cut the run short of telling the excess:
                    over = max(1, t.num_turns - limit)  # the try before the last keeps none (the plain oracle)
                    retry.append((task, () if attempt + 2 >= RETRIES else prefix[: max(0, len(prefix) - over)]))
                else:
                    counts["unsolved_by_oracle"] += 1
        pending = retry
    counts["gave_up"] += len(pending)
    for batch in _one_per_task(fixes):  # the oracle's turn in place of each of the policy's that differs from it
        done, _ = _play(batch, style, tokenizer, components.env_factory(wide), rc, config.sft.compute)
        for task, prefix in batch:
            t = done.get(task.id)
            if t is not None and t.num_turns > len(prefix):
                out.append(Relabelled(t, len(prefix), (len(prefix),)))
                counts["corrections"] += 1
    return out, dict(counts)


def _play(batch: Sequence[tuple[Task, tuple[str, ...]]], style: str, tokenizer: Any, make_env: Any, rc: Any,
          compute: str) -> tuple[dict[str, Trajectory], dict[str, list[str]]]:
    """Each task's prefix, then the oracle: the trajectories and the oracle's label at each state, by task id."""
    from sandgym.agents.rollout import rollout

    prefixes = {task.id: prefix for task, prefix in batch}
    labels: dict[str, list[str]] = {}
    policy = ScriptedPolicy(partial(ContinuationAgent, prefixes, style, labels=labels, compute=compute), tokenizer=tokenizer)
    trajs = rollout(policy, make_env, [task for task, _ in batch], config=rc)
    return {t.task_id: t for t in trajs}, labels


def _one_per_task(items: Sequence[tuple[Task, tuple[str, ...]]]) -> list[list[tuple[Task, tuple[str, ...]]]]:
    batches: list[list[tuple[Task, tuple[str, ...]]]] = []
    for item in items:
        free = next((b for b in batches if all(x.id != item[0].id for x, _ in b)), None)
        if free is None:
            batches.append([item])
        else:
            free.append(item)
    return batches


def trained_mask(r: Relabelled) -> tuple[int, ...]:
    """1 on the completion tokens of the trained turns, up to the end of the last one (the sample's length)."""
    mask: list[int] = []
    for i, turn in enumerate(r.trajectory.turns[: max(r.trained) + 1]):
        mask += [0] * len(turn.prompt_token_ids) + [int(i in r.trained)] * len(turn.completion_token_ids)
    return tuple(mask)


def relabelled_samples(config: TrainConfig, tokenizer: Any, out: Path) -> list[Sample]:
    """Samples of the continuations of ``sft.source``'s episodes; writes ``out/relabelled.jsonl`` (one line each:
    the trajectory, ``kept`` and ``trained``) and ``out/relabel_counts.json``."""
    episodes = policy_prefixes(Path(config.sft.source))
    relabelled, counts = continuations(config, tokenizer, episodes)
    (out / "relabel_counts.json").write_text(json.dumps(counts, indent=2, sort_keys=True), encoding="utf-8")
    with open(out / "relabelled.jsonl", "w", encoding="utf-8") as f:
        for r in relabelled:
            f.write(json.dumps({"kept": r.kept, "trained": r.trained, "trajectory": r.trajectory.to_json()}) + "\n")
    samples = []
    for r in relabelled:
        mask = trained_mask(r)
        t = r.trajectory
        samples.append(Sample(t.token_ids[: len(mask)], mask, t.logprobs[: len(mask)], tuple(float(m) for m in mask)))
    return samples

"""Behaviour metrics: *what* a policy does, read from each episode's ``EpisodeOutcome.actions``.

For test-and-fix (multi-turn coding) and tool use, the final score hides the behaviour that produced it. Each
metric below is a per-episode value (None where it does not apply), averaged per task and bootstrapped over tasks
like completion (``metrics.json`` key ``behaviour``), and compared paired over tasks against a baseline:

- ``first_attempt_pass``: the first run of the visible tests passed (episodes that never ran them count 0);
- ``recovery``: among episodes whose first run failed, the share that still ended solved;
- ``verify_before_submit``: the agent submitted code it had run the visible tests on, unchanged since;
- ``submitted_failing``: the agent submitted code whose last visible-test run failed (lower is better; in
  ``code_action="test"`` every block is tested, so this, not verify-before-submit, separates good submissions);
- ``submitted``: the agent submitted (rather than running out of turns);
- ``valid_call_rate``: one minus the format errors per turn (malformed, unknown tool, bad arguments, no call; at
  least 0): the share of turns with a parseable, schema-valid call or code action when a turn has one error at most;
- ``turns``: model turns per episode;
- ``evidence_found``: the share of the task's evidence lines (long-context tasks' ``metadata["evidence"]``) a narrow
  search showed (``evidence@v1``'s rules, counted whether or not the term was paid); None for other tasks;
- ``repeated_calls``: tool calls per episode that repeated one already run (same tool, arguments and output: nothing
  new shown; lower is better); None for an episode with no tool call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import bootstrap_ci, paired_test

__all__ = ["BEHAVIOURS", "actions_of", "behaviour", "behaviour_gains"]


def actions_of(row: EpisodeRow) -> Mapping[str, Any]:
    """The episode's ``Actions`` as a dict: the outcome's, or for an episode the rollout engine cut before the env
    graded it (a token budget) the env's running count at its last step (``metadata["actions"]``); else empty."""
    traj = row.trajectory if isinstance(row.trajectory, Mapping) else {}
    outcome = traj.get("outcome")
    actions = outcome.get("actions") if isinstance(outcome, Mapping) else None
    if actions is None and isinstance(traj.get("metadata"), Mapping):
        actions = traj["metadata"].get("actions")
    return actions if isinstance(actions, Mapping) else {}


def _first_pass(r: EpisodeRow) -> float | None:
    return float(actions_of(r).get("first_test_passed") is True)


def _recovery(r: EpisodeRow) -> float | None:
    return float(r.success) if actions_of(r).get("first_test_passed") is False else None


def _verified(r: EpisodeRow) -> float | None:
    return float(bool(actions_of(r).get("tested_before_submit")))


def _submitted_failing(r: EpisodeRow) -> float | None:
    a = actions_of(r)
    return float(bool(a.get("submitted")) and a.get("last_test_passed") is False)


def _submitted(r: EpisodeRow) -> float | None:
    return float(bool(actions_of(r).get("submitted")))


def _valid_calls(r: EpisodeRow) -> float | None:
    a = actions_of(r)
    turns = int(a.get("turns") or 0)
    if not turns:
        return None
    errors = sum(int(a.get(k) or 0) for k in ("malformed_calls", "unknown_tools", "bad_args", "no_call_turns"))
    return max(0.0, 1.0 - errors / turns)


def _turns(r: EpisodeRow) -> float | None:
    return float(r.turns)


def _evidence(r: EpisodeRow) -> float | None:
    a = actions_of(r)
    declared = int(a.get("evidence_declared") or 0)
    return int(a.get("evidence_found") or 0) / declared if declared else None


def _repeats(r: EpisodeRow) -> float | None:
    a = actions_of(r)
    return float(a.get("repeated_calls") or 0) if int(a.get("tool_calls") or 0) else None


BEHAVIOURS: dict[str, Callable[[EpisodeRow], float | None]] = {
    "first_attempt_pass": _first_pass,
    "recovery": _recovery,
    "verify_before_submit": _verified,
    "submitted_failing": _submitted_failing,
    "submitted": _submitted,
    "valid_call_rate": _valid_calls,
    "turns": _turns,
    "evidence_found": _evidence,
    "repeated_calls": _repeats,
}


def _per_task(rows: Sequence[EpisodeRow], metric: Callable[[EpisodeRow], float | None]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in rows:
        if r.infra_failure:
            continue
        v = metric(r)
        if v is not None:
            out.setdefault(r.task_id, []).append(v)
    return out


def behaviour(rows: Sequence[EpisodeRow], seed: int = 0) -> dict[str, Any]:
    """Each behaviour metric with its 95% interval over tasks and the number of episodes it applies to."""
    out: dict[str, Any] = {}
    for name, metric in BEHAVIOURS.items():
        per_task = _per_task(rows, metric)
        if per_task:
            out[name] = {**bootstrap_ci(list(per_task.values()), seed=seed).to_json(),
                         "episodes": sum(len(v) for v in per_task.values())}
    return out


def behaviour_gains(rows: Sequence[EpisodeRow], base: Sequence[EpisodeRow]) -> dict[str, Any]:
    """Each behaviour metric's paired difference (candidate - baseline) over tasks where both have values."""
    out: dict[str, Any] = {}
    for name, metric in BEHAVIOURS.items():
        cand, bas = _per_task(rows, metric), _per_task(base, metric)
        if set(cand) & set(bas):
            out[name] = paired_test(cand, bas).to_json()
    return out

"""Aggregate episode rows into the metrics of ``metrics.json``: completion, stability, transfer, failures, runtime
signals, cost."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sandgym.envs.outcome import FAILURE_MODES
from sandgym.evaluate.behaviour import behaviour, behaviour_gains
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import (
    Interval,
    bootstrap_ci,
    consistency,
    normalized_gain,
    paired_test,
    pass_at_k,
    pass_hat_k,
)
from sandgym.evaluate.signals import runtime_signals


def by_task(rows: Sequence[EpisodeRow], value: Callable[[EpisodeRow], float]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        out[r.task_id].append(value(r))
    return dict(out)


def summarize(rows: Sequence[EpisodeRow], samples: int, seed: int = 0) -> dict[str, Any]:
    """Completion, reward, pass@k / pass^k (k = 1..samples), consistency, with task-clustered bootstrap CIs."""
    scored = [r for r in rows if not r.infra_failure]
    if not scored:
        return {"episodes": 0, "tasks": 0}
    succ = by_task(scored, lambda r: float(r.success))
    rew = by_task(scored, lambda r: r.reward)
    out: dict[str, Any] = {
        "episodes": len(scored),
        "tasks": len(succ),
        "completion": bootstrap_ci(list(succ.values()), seed=seed).to_json(),
        "reward": bootstrap_ci(list(rew.values()), seed=seed).to_json(),
        "pass_at_k": {},
        "pass_hat_k": {},
    }
    for k in range(1, samples + 1):
        pk = [[pass_at_k(len(v), int(sum(v)), k)] for v in succ.values() if len(v) >= k]
        hk = [[pass_hat_k(len(v), int(sum(v)), k)] for v in succ.values() if len(v) >= k]
        if pk:
            out["pass_at_k"][str(k)] = bootstrap_ci(pk, seed=seed).to_json()
            out["pass_hat_k"][str(k)] = bootstrap_ci(hk, seed=seed).to_json()
    # consistency: share of (task, seed) sample sets that agree
    groups: dict[tuple[int, str], list[bool]] = defaultdict(list)
    for r in scored:
        groups[r.key].append(r.success)
    agree = by_task([r for r in scored if r.sample == 0], lambda r: float(consistency(groups[r.key])))
    out["consistency"] = bootstrap_ci(list(agree.values()), seed=seed).to_json()
    out["reward_variance_within_task"] = float(np.mean([np.var(v) for v in rew.values()]))
    return out


def seed_spread(rows: Sequence[EpisodeRow]) -> dict[str, Any]:
    per_seed: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        if not r.infra_failure:
            per_seed[r.seed].append(float(r.success))
    values = {str(s): float(np.mean(v)) for s, v in sorted(per_seed.items())}
    arr = np.array(list(values.values()))
    return {"completion_by_seed": values, "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0}


def failure_modes(rows: Sequence[EpisodeRow]) -> dict[str, float]:
    counts = Counter(r.failure_mode if r.failure_mode in FAILURE_MODES else "other" for r in rows)
    n = max(len(rows), 1)
    return {m: counts.get(m, 0) / n for m in (*FAILURE_MODES, "other") if counts.get(m, 0) or m in FAILURE_MODES}


def traps(rows: Sequence[EpisodeRow], seed: int = 0) -> dict[str, Any] | None:
    with_traps = [r for r in rows if r.traps_failed is not None and not r.infra_failure]
    if not with_traps:
        return None
    main_fail = by_task(with_traps, lambda r: 1.0 - float(r.reward_components.get("correctness@v1", r.success)))
    trap_fail = by_task(with_traps, lambda r: float(r.traps_failed or 0.0))
    return {
        "episodes": len(with_traps),
        "trap_failure_rate": bootstrap_ci(list(trap_fail.values()), seed=seed).to_json(),
        "main_failure_rate": bootstrap_ci(list(main_fail.values()), seed=seed).to_json(),
    }


def cost(rows: Sequence[EpisodeRow]) -> dict[str, float]:
    n = max(len(rows), 1)
    return {
        "episodes": float(len(rows)),
        "gen_tokens_total": float(sum(r.gen_tokens for r in rows)),
        "gen_tokens_mean": sum(r.gen_tokens for r in rows) / n,
        "turns_mean": sum(r.turns for r in rows) / n,
        "sandbox_s_total": float(sum(r.sandbox_s for r in rows)),
        "truncated_frac": sum(r.truncated for r in rows) / n,
    }


def length_bucket(tokens: int) -> str:
    """A document length to the nearest power-of-two thousand tokens: 900 -> "1K", 4300 -> "4K", 7800 -> "8K"."""
    return f"{2 ** max(0, round(math.log2(max(tokens, 1) / 1000)))}K"


def length_groups(rows: Sequence[EpisodeRow]) -> dict[str, list[EpisodeRow]]:
    """The rows whose task has a document, by :func:`length_bucket`, shortest first."""
    groups: dict[str, list[EpisodeRow]] = {}
    for r in rows:
        if r.doc_tokens > 0:
            groups.setdefault(length_bucket(r.doc_tokens), []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: int(kv[0][:-1])))


def length_groups_pooled(rows: Sequence[EpisodeRow]) -> dict[str, list[EpisodeRow]]:
    """The rows at a length and every longer one, ``"4K+"``, for each length strictly between the shortest and the
    longest: the pooled groups a claim "at >= 4K tokens" is tested on (more tasks, a tighter interval)."""
    groups = length_groups(rows)
    names = list(groups)
    return {f"{b}+": [r for later in names[i:] for r in groups[later]] for i, b in enumerate(names)
            if 0 < i < len(names) - 1}


def with_pooled(m: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``m[key]`` (per length) followed by ``m[key + "_pooled"]`` (the "4K+" groups), for tables and verdicts."""
    return {**(m.get(key) or {}), **(m.get(f"{key}_pooled") or {})}


def length_subject(rows: Sequence[EpisodeRow]) -> str:
    """What :func:`by_length` groups by: ``"document length"`` (long-context tasks), ``"repository size"`` (bug
    reports searched across a whole repository, ``repo_*`` families), or both."""
    kinds = {"repository size" if r.family.startswith("repo_") else "document length" for r in rows if r.doc_tokens}
    return " / ".join(sorted(kinds)) or "document length"


def subject_of(m: Mapping[str, Any]) -> str:
    """A policy's metrics' :func:`length_subject` (metrics written before it existed: ``"document length"``)."""
    return str(m.get("length_subject", "document length"))


def by_length(rows: Sequence[EpisodeRow], samples: int) -> dict[str, Any]:
    """Completion per document length (long-context tasks), shortest first; empty when no task has a document."""
    return {b: summarize(group, samples) for b, group in length_groups(rows).items()}


def by_length_pooled(rows: Sequence[EpisodeRow], samples: int) -> dict[str, Any]:
    """Completion at each length and longer (:func:`length_groups_pooled`)."""
    return {b: summarize(group, samples) for b, group in length_groups_pooled(rows).items()}


def split_transfer(rows: Sequence[EpisodeRow], trained_families: Sequence[str]) -> tuple[list[EpisodeRow], list[EpisodeRow]]:
    """(trained, unseen): by the given family list, else by each task's ``unseen`` mark."""
    if trained_families:
        fams = set(trained_families)
        return [r for r in rows if r.family in fams], [r for r in rows if r.family not in fams]
    return [r for r in rows if not r.unseen], [r for r in rows if r.unseen]


def aggregate(
    rows: Sequence[EpisodeRow],
    *,
    samples: int,
    baseline: Sequence[EpisodeRow] | None = None,
    trained_families: Sequence[str] = (),
) -> dict[str, Any]:
    """Everything in ``metrics.json`` except provenance (added by the runner)."""
    m: dict[str, Any] = {"overall": summarize(rows, samples)}
    m["by_domain"] = {d: summarize([r for r in rows if r.domain == d], samples) for d in sorted({r.domain for r in rows})}
    m["by_family"] = {
        f: {**summarize([r for r in rows if r.family == f], samples),
            "unseen": any(r.unseen for r in rows if r.family == f)}
        for f in sorted({r.family for r in rows})
    }
    trained, unseen = split_transfer(rows, trained_families)
    m["transfer"] = {"trained": summarize(trained, samples), "unseen": summarize(unseen, samples)}
    t_c, u_c = _value(m["transfer"]["trained"]), _value(m["transfer"]["unseen"])
    m["transfer"]["gap"] = t_c - u_c if not (np.isnan(t_c) or np.isnan(u_c)) else None
    m["stability"] = {"seeds": seed_spread(rows)}
    m["failure_modes"] = failure_modes(rows)
    m["traps"] = traps(rows)
    m["signals"] = runtime_signals(rows)
    m["behaviour"] = behaviour(rows)
    m["by_length"] = by_length(rows, samples)
    m["by_length_pooled"] = by_length_pooled(rows, samples)
    m["length_subject"] = length_subject(rows)
    m["cost"] = cost(rows)
    m["infra_failures"] = sum(r.infra_failure for r in rows)
    m["task_errors"] = sum(r.failure_mode == "task_error" for r in rows)
    if baseline is not None:
        m["baseline"] = compare_to_baseline(rows, baseline, samples, trained_families)
    return m


def _value(summary: dict[str, Any]) -> float:
    return float(summary["completion"]["value"]) if "completion" in summary else float("nan")


def compare_to_baseline(
    rows: Sequence[EpisodeRow], base: Sequence[EpisodeRow], samples: int, trained_families: Sequence[str]
) -> dict[str, Any]:
    """Gains over the baseline on the same tasks and seeds: overall, trained and unseen families."""
    out: dict[str, Any] = {"overall": summarize(base, samples), "failure_modes": failure_modes(base),
                           "traps": traps(base), "behaviour": behaviour(base),
                           "behaviour_gain": behaviour_gains(rows, base), "by_length": by_length(base, samples),
                           "by_length_pooled": by_length_pooled(base, samples)}
    b_tr, b_un = split_transfer(base, trained_families)
    c_tr, c_un = split_transfer(rows, trained_families)
    out["transfer"] = {"trained": summarize(b_tr, samples), "unseen": summarize(b_un, samples)}
    for name, cand, bas in (("overall", rows, base), ("trained", c_tr, b_tr), ("unseen", c_un, b_un)):
        gain = paired_gain(cand, bas)
        if gain is not None:
            out[f"gain_{name}"] = gain
    for key, grouping in (("gain_by_length", length_groups), ("gain_by_length_pooled", length_groups_pooled)):
        base_groups = grouping(base)
        per_length = {b: paired_gain(group, base_groups.get(b, [])) for b, group in grouping(rows).items()}
        out[key] = {b: g for b, g in per_length.items() if g is not None}
    return out


def paired_gain(cand: Sequence[EpisodeRow], base: Sequence[EpisodeRow]) -> dict[str, Any] | None:
    """The paired test of completion on the tasks both sets ran (infra failures left out); None when they share
    none."""
    cs = by_task([r for r in cand if not r.infra_failure], lambda r: float(r.success))
    bs = by_task([r for r in base if not r.infra_failure], lambda r: float(r.success))
    if not (set(cs) & set(bs)):
        return None
    test = paired_test(cs, bs)
    cv = float(np.mean([np.mean(v) for v in cs.values()]))
    bv = float(np.mean([np.mean(v) for v in bs.values()]))
    return {**test.to_json(), "candidate": cv, "baseline": bv, "normalized_gain": _nan_to_none(normalized_gain(cv, bv))}


def _nan_to_none(x: float) -> float | None:
    return None if np.isnan(x) else x


__all__ = ["aggregate", "summarize", "Interval"]

"""Evaluation statistics: unbiased pass@k, pass^k, consistency, bootstrap intervals and a paired test.

All functions are pure and take plain numbers, so they are checked against reference definitions in tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` correct: ``1 - C(n-c, k) / C(n, k)``.

    Uses the numerically stable product form ``1 - prod(1 - k / arange(n - c + 1, n + 1))`` (Chen et al. 2021).

    >>> pass_at_k(4, 1, 1)
    0.25
    >>> pass_at_k(4, 0, 2), pass_at_k(4, 3, 2)
    (0.0, 1.0)
    """
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: probability that ``k`` samples drawn without replacement ALL succeed: ``C(c, k) / C(n, k)``.

    >>> pass_hat_k(4, 4, 3), pass_hat_k(4, 2, 3)
    (1.0, 0.0)
    """
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass_hat_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if c < k:
        return 0.0
    return float(np.prod((c - np.arange(k)) / (n - np.arange(k))))


def consistency(successes: Sequence[bool]) -> bool:
    """True when all samples of a task agree (all succeed or all fail)."""
    return len(set(successes)) <= 1


@dataclass(frozen=True)
class Interval:
    """A point estimate with a 95% (by default) confidence interval."""

    value: float
    low: float
    high: float

    def to_json(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}

    def __str__(self) -> str:
        return format_interval(self)


def bootstrap_ci(
    clusters: Sequence[Sequence[float]],
    statistic: Callable[[np.ndarray], float] | None = None,
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap over CLUSTERS (tasks): all samples of a task are resampled together.

    ``clusters[i]`` are the per-episode values of task i; the statistic defaults to the mean of all values.
    Resampling tasks rather than episodes keeps the interval honest when samples of one task are correlated.
    """
    arrays = [np.asarray(c, dtype=float) for c in clusters if len(c)]
    if not arrays:
        return Interval(float("nan"), float("nan"), float("nan"))
    stat = statistic or (lambda x: float(np.mean(x)))
    point = stat(np.concatenate(arrays))
    rng = np.random.default_rng(seed)
    m = len(arrays)
    sums = np.array([c.sum() for c in arrays])
    lens = np.array([len(c) for c in arrays])
    idx = rng.integers(0, m, size=(n_boot, m))
    if statistic is None:  # fast path for the mean
        boots = sums[idx].sum(1) / lens[idx].sum(1)
    else:
        boots = np.array([stat(np.concatenate([arrays[j] for j in row])) for row in idx])
    low, high = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return Interval(float(point), float(low), float(high))


@dataclass(frozen=True)
class PairedTest:
    """Candidate minus baseline on the same tasks and seeds."""

    diff: Interval
    p_value: float
    n_pairs: int

    def to_json(self) -> dict[str, object]:
        return {"diff": self.diff.to_json(), "p_value": self.p_value, "n_pairs": self.n_pairs}


def paired_test(
    candidate: Mapping[str, Sequence[float]],
    baseline: Mapping[str, Sequence[float]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> PairedTest:
    """Paired comparison over tasks present in both: per-task mean difference, bootstrap CI and a two-sided
    sign-flip permutation p-value (exact when there are few tasks, Monte Carlo otherwise)."""
    keys = sorted(set(candidate) & set(baseline))
    if not keys:
        raise ValueError("paired_test needs at least one task present in both evaluations; evaluate the same suite")
    d = np.array([np.mean(candidate[k]) - np.mean(baseline[k]) for k in keys], dtype=float)
    diff = bootstrap_ci([[x] for x in d], n_boot=n_boot, seed=seed)
    return PairedTest(diff=diff, p_value=sign_flip_p_value(d, seed=seed), n_pairs=len(keys))


def sign_flip_p_value(d: np.ndarray, *, n_perm: int = 10000, seed: int = 0) -> float:
    """Two-sided p-value of mean(d) = 0 under random sign flips of the paired differences."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    if n == 0 or np.allclose(d, 0):
        return 1.0
    observed = abs(d.mean())
    if n <= 16:
        signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * n)).reshape(n, -1).T
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_perm, n))
    means = np.abs((signs * d).mean(1))
    return float(np.mean(means >= observed - 1e-12))


def format_p(p: float) -> str:
    """A p-value for reports: ``p<0.0001`` instead of a Monte Carlo estimate of exactly 0.

    >>> format_p(0.0), format_p(0.0625)
    ('p<0.0001', 'p=0.0625')
    """
    return "p<0.0001" if p < 1e-4 else f"p={p:.3g}"


def format_interval(ci: Interval | Mapping[str, Any] | None, *, signed: bool = False) -> str:
    """An interval for reports: ``value [low, high]``, 3 decimals (``+`` signs for differences); ``n/a`` when
    missing or NaN. The one interval formatter of every report.

    >>> format_interval({"value": 0.5, "low": 0.25, "high": 0.75})
    '0.500 [0.250, 0.750]'
    >>> format_interval(Interval(0.1, -0.05, 0.2), signed=True), format_interval(None)
    ('+0.100 [-0.050, +0.200]', 'n/a')
    """
    if ci is None:
        return "n/a"
    d = ci.to_json() if isinstance(ci, Interval) else ci
    value = d.get("value")
    if value is None or value != value:
        return "n/a"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(value)} [{f.format(d['low'])}, {f.format(d['high'])}]"


def normalized_gain(candidate: float, base: float) -> float:
    """(candidate - base) / (1 - base): the share of the remaining headroom gained (nan when base is 1)."""
    return (candidate - base) / (1.0 - base) if base < 1.0 else math.nan

"""Mixed domains: which tasks go into each batch, and per-domain reward normalisation with running statistics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sandgym.tasks.task import Task


@dataclass
class RunningStats:
    """Welford running mean/variance (serialisable for checkpoints)."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    successes: int = 0
    episodes: int = 0

    def update(self, values: Sequence[float]) -> None:
        for x in values:
            self.count += 1
            delta = x - self.mean
            self.mean += delta / self.count
            self.m2 += delta * (x - self.mean)

    @property
    def std(self) -> float:
        return float(np.sqrt(self.m2 / self.count)) if self.count > 1 else 1.0

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.5

    def normalize(self, x: float, eps: float = 1e-4) -> float:
        """``(x - mean) / std``; identity scale until there is spread to estimate."""
        std = self.std
        return (x - self.mean) / std if std > eps else x - self.mean


@dataclass
class DomainMixer:
    """Samples a mixed batch of tasks and keeps per-domain statistics.

    The task order is a pure function of ``(seed, step)``, so a resumed run sees exactly the batches the
    uninterrupted run would have seen.
    """

    tasks: Mapping[str, Sequence[Task]]
    weights: Mapping[str, float]
    weighting: str = "fixed"
    total_steps: int = 1
    seed: int = 0
    stats: dict[str, RunningStats] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.tasks:
            self.stats.setdefault(name, RunningStats())

    def current_weights(self, step: int) -> dict[str, float]:
        names = list(self.tasks)
        base = np.array([max(self.weights.get(n, 0.0), 0.0) for n in names], dtype=float)
        base = base / base.sum()
        if self.weighting == "linear":
            frac = min(step / max(self.total_steps - 1, 1), 1.0)
            w = (1 - frac) * base + frac * np.full(len(names), 1.0 / len(names))
        elif self.weighting == "adaptive":
            # p(1-p) is largest where the policy succeeds sometimes but not always: groups with reward variance.
            p = np.array([self.stats[n].success_rate for n in names])
            w = base * (p * (1 - p) + 0.05)
        else:
            w = base
        w = w / w.sum()
        return dict(zip(names, w.tolist(), strict=True))

    def sample(self, step: int, n_tasks: int) -> list[Task]:
        """The batch of ``n_tasks`` tasks for ``step`` (deterministic in seed and step)."""
        rng = np.random.default_rng([self.seed, step])
        weights = self.current_weights(step)
        names = list(weights)
        counts = rng.multinomial(n_tasks, [weights[n] for n in names])
        batch: list[Task] = []
        for name, k in zip(names, counts, strict=True):
            pool = self.tasks[name]
            if k and pool:
                idx = rng.choice(len(pool), size=int(k), replace=len(pool) < k)
                batch.extend(pool[i] for i in idx)
        return batch

    def observe(self, domain: str, rewards: Sequence[float], successes: Sequence[bool]) -> None:
        st = self.stats.setdefault(domain, RunningStats())
        st.update(rewards)
        st.successes += int(sum(successes))
        st.episodes += len(successes)

    def state_dict(self) -> dict[str, dict[str, float]]:
        return {k: vars(v).copy() for k, v in self.stats.items()}

    def load_state_dict(self, state: Mapping[str, Mapping[str, float]]) -> None:
        self.stats = {k: RunningStats(**v) for k, v in state.items()}  # type: ignore[arg-type]

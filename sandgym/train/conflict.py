"""Gradient conflict between domains in a mixed batch, and PCGrad-style projection (``algorithm.gradient_conflict``).

With several domains in one step, the learner can compute each domain's share of the batch gradient apart
(the micro-batches of one domain, then the next), at no extra forward/backward cost. :func:`pairwise_cosines`
measures how much they disagree (a negative cosine: a step that helps one domain hurts the other), and
:func:`pcgrad` removes from each domain's gradient its component along any other domain's gradient it conflicts
with (Yu et al. 2020, "Gradient Surgery for Multi-Task Learning") before they are summed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

__all__ = ["ConflictStats", "pairwise_cosines", "pcgrad"]


def pairwise_cosines(grads: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """Cosine between every pair of per-domain gradients (flattened), keyed ``"a|b"`` in sorted order."""
    names = sorted(grads)
    out: dict[str, float] = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ga, gb = grads[a], grads[b]
            denom = float(ga.norm() * gb.norm())
            out[f"{a}|{b}"] = float(ga @ gb) / denom if denom > 0 else 0.0
    return out


def pcgrad(grads: Sequence[torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Sum of the gradients after projecting each off the others it conflicts with; returns (sum, projections).

    For each ``g_i`` and each other ``g_j`` (the original, unprojected ones, in a fixed order) with
    ``g_i . g_j < 0``: ``g_i -= (g_i . g_j) / |g_j|^2 * g_j``. Gradients that do not conflict are summed as they are.
    """
    out = torch.zeros_like(grads[0])
    projections = 0
    for i, g in enumerate(grads):
        g = g.clone()
        for j, other in enumerate(grads):
            if i == j:
                continue
            dot = float(g @ other)
            norm2 = float(other @ other)
            if dot < 0 and norm2 > 0:
                g -= (dot / norm2) * other
                projections += 1
        out += g
    return out, projections


class ConflictStats:
    """Per-step record: mean and minimum pairwise cosine, and how many projections PCGrad made."""

    def __init__(self, cosines: Mapping[str, float], projections: int) -> None:
        self.cosines = dict(cosines)
        self.projections = projections

    @property
    def mean(self) -> float:
        return sum(self.cosines.values()) / len(self.cosines) if self.cosines else float("nan")

    @property
    def min(self) -> float:
        return min(self.cosines.values()) if self.cosines else float("nan")

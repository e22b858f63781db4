"""The policy-gradient loss: clipped importance ratio, truncated importance weights, KL to the reference.

Everything is masked so only model-sampled tokens carry gradient. Aggregation choices:

- ``token_mean``: sum over every sampled token in the batch / number of sampled tokens (DAPO; long answers weigh
  more, no length bias per sequence).
- ``seq_mean_token_mean``: mean over each sequence's tokens, then mean over sequences (original GRPO; biases
  towards short answers for positive advantages).
- ``seq_mean_token_sum_norm``: each sequence's token sum divided by a constant ``norm_len`` (Dr.GRPO; unbiased).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

LOSS_AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-prob of each target token under ``logits / temperature``.

    Shapes: logits [B, T, V] (position t predicts token t+1), targets [B, T] -> [B, T]. Computed with
    ``logsumexp`` on one row block at a time so the full-vocabulary log-softmax is never materialised twice.
    """
    if temperature != 1.0:
        logits = logits / temperature
    out = torch.empty(targets.shape, dtype=torch.float32, device=logits.device)
    for b in range(logits.shape[0]):
        row = logits[b].float()
        out[b] = row.gather(-1, targets[b].unsqueeze(-1)).squeeze(-1) - torch.logsumexp(row, dim=-1)
    return out


@dataclass(frozen=True)
class LossParts:
    loss: torch.Tensor
    pg_loss: float
    kl: float
    clip_frac: float
    tis_mean: float
    ratio_mean: float
    tis_max: float = 1.0
    """The largest importance weight ``exp(old - sampling)`` before the cap (how far the generator strayed)."""
    tis_capped_frac: float = 0.0
    """Share of sampled tokens whose weight was capped at ``tis_cap``."""


def policy_loss(
    new_logp: torch.Tensor,
    old_logp: torch.Tensor,
    sampling_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    tis_cap: float = 2.0,
    aggregation: str = "token_mean",
    norm_len: int = 1024,
) -> LossParts:
    """Clipped-ratio policy-gradient loss with truncated importance sampling and a k3 KL penalty.

    Shapes (all [B, T], aligned on target tokens): ``new_logp`` (with grad), ``old_logp`` (the policy before this
    update, no grad), ``sampling_logp`` (what the generator reported), ``advantages`` (per token), ``mask`` (1 on
    model-sampled tokens), ``ref_logp`` (adapter disabled; only when ``beta > 0``).

    The PPO ratio ``exp(new - old)`` is clipped to ``[1 - clip_low, 1 + clip_high]``; the truncated importance
    weight ``min(exp(old - sampling), tis_cap)`` corrects for a generator whose log-probs differ from the
    trainer's (another engine, an older policy), and is 1 when they agree.
    """
    if aggregation not in LOSS_AGGREGATIONS:
        raise ValueError(f"loss aggregation {aggregation!r} is not one of {LOSS_AGGREGATIONS}")
    mask = mask.to(new_logp.dtype)
    ratio = torch.exp(new_logp - old_logp)
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg = -torch.minimum(ratio * advantages, clipped * advantages)
    weight = torch.exp(old_logp - sampling_logp).detach()
    tis = torch.clamp(weight, max=tis_cap)
    per_token = pg * tis
    kl = torch.zeros_like(new_logp)
    if beta > 0.0 and ref_logp is not None:
        delta = ref_logp - new_logp
        kl = torch.exp(delta) - delta - 1.0  # k3 estimator: unbiased, always >= 0
        per_token = per_token + beta * kl
    loss = aggregate(per_token, mask, aggregation, norm_len)
    n = mask.sum().clamp(min=1.0)
    with torch.no_grad():
        clip_frac = (((ratio - clipped).abs() > 1e-8).to(mask.dtype) * mask).sum() / n
        return LossParts(
            loss=loss,
            pg_loss=float((pg * mask).sum() / n),
            kl=float((kl * mask).sum() / n),
            clip_frac=float(clip_frac),
            tis_mean=float((tis * mask).sum() / n),
            ratio_mean=float((ratio * mask).sum() / n),
            tis_max=float(weight.masked_fill(mask == 0, 0.0).max()) if bool(mask.any()) else 1.0,
            tis_capped_frac=float(((weight > tis_cap).to(mask.dtype) * mask).sum() / n),
        )


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, aggregation: str, norm_len: int = 1024) -> torch.Tensor:
    """Reduce a [B, T] per-token loss to a scalar over masked tokens (see the module docstring)."""
    if aggregation == "token_mean":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    per_seq = (per_token * mask).sum(-1)
    if aggregation == "seq_mean_token_mean":
        return (per_seq / mask.sum(-1).clamp(min=1.0)).mean()
    if aggregation == "seq_mean_token_sum_norm":
        return (per_seq / float(norm_len)).mean()
    raise ValueError(f"loss aggregation {aggregation!r} is not one of {LOSS_AGGREGATIONS}")

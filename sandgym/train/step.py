"""One learner update on a batch of trajectories: tensors -> log-probs -> loss -> backward -> optimiser step.

Shapes in docstrings: B sequences (a micro-batch), T tokens (padded), V vocabulary.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from sandgym.agents.sampler import PAD_SLACK, length_buckets
from sandgym.agents.trajectory import Trajectory
from sandgym.train.advantages import token_advantages
from sandgym.train.config import AlgorithmConfig, TrainConfig
from sandgym.train.conflict import ConflictStats, pairwise_cosines, pcgrad
from sandgym.train.domains import DomainMixer
from sandgym.train.head import head_logprobs, hidden_states_out
from sandgym.train.loss import policy_loss, token_logprobs
from sandgym.train.shared_prefix import (
    checkpointing_on,
    common_prefix,
    freed_memory_returned,
    logits_after_shared_prefix,
    usable,
)


@dataclass(frozen=True)
class Sample:
    """One trajectory ready for the learner, with its per-token advantages (aligned on ``token_ids``)."""

    token_ids: tuple[int, ...]
    action_mask: tuple[int, ...]
    sampling_logprobs: tuple[float, ...]
    advantages: tuple[float, ...]
    domain: str = ""
    """The trajectory's domain (per-domain gradients for ``algorithm.gradient_conflict``)."""


def make_samples(trajs: Sequence[Trajectory], per_token_adv: Sequence[Sequence[float]]) -> list[Sample]:
    return [
        Sample(t.token_ids, t.action_mask, t.logprobs, tuple(a), t.domain)
        for t, a in zip(trajs, per_token_adv, strict=True)
        if t.has_tokens and sum(t.action_mask) > 0
    ]


def batch_samples(trajs: Sequence[Trajectory], mixer: DomainMixer, config: TrainConfig) -> tuple[list[Trajectory], list[Sample]]:
    """The learner's batch from one step's trajectories (whichever backend rolled them out).

    Infra failures are dropped (never scored); the rest get per-token advantages (``token_advantages``); with
    ``beta = 0`` and ``skip_zero_advantage``, trajectories whose advantages are all zero (a group with no reward
    spread) carry no gradient and are left out. Returns (the valid trajectories, the samples to train on).
    """
    valid = [t for t in trajs if not t.infra_failure]
    skip = config.algorithm.skip_zero_advantage and config.algorithm.beta == 0
    keep = [(t, a) for t, a in zip(valid, token_advantages(valid, mixer, config), strict=True)
            if not (skip and max(map(abs, a), default=0.0) < 1e-8)]
    return valid, make_samples([t for t, _ in keep], [a for _, a in keep])


@dataclass(frozen=True)
class Batch:
    """Padded tensors of one micro-batch; everything but ``input_ids``/``attention_mask`` is aligned on targets.

    input_ids, attention_mask: [B, T]; targets, mask, sampling_logp, advantages: [B, T-1].
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    sampling_logp: torch.Tensor
    advantages: torch.Tensor
    shared_prefix: int = 0
    """Leading tokens identical in every row and before any sampled token (the group's prompt, or at least the
    system prompt): :func:`forward_logprobs` runs them once for the whole micro-batch."""


def shared_prefix(samples: Sequence[Sample]) -> int:
    """Length of the longest common prefix of the rows' tokens that ends at or before the first sampled token."""
    return common_prefix([s.token_ids for s in samples], min(first_sampled(s) for s in samples))


def first_sampled(s: Sample) -> int:
    """Position of the first token the model sampled (the prompt is everything before it)."""
    return s.action_mask.index(1) if 1 in s.action_mask else len(s.token_ids)


def collate(samples: Sequence[Sample], pad_id: int, device: torch.device | str = "cpu") -> Batch:
    n = max(len(s.token_ids) for s in samples)
    ids = torch.full((len(samples), n), pad_id, dtype=torch.long)
    att = torch.zeros((len(samples), n), dtype=torch.long)
    mask = torch.zeros((len(samples), n), dtype=torch.float32)
    slp = torch.zeros((len(samples), n), dtype=torch.float32)
    adv = torch.zeros((len(samples), n), dtype=torch.float32)
    for i, s in enumerate(samples):
        k = len(s.token_ids)
        ids[i, :k] = torch.tensor(s.token_ids)
        att[i, :k] = 1
        mask[i, :k] = torch.tensor(s.action_mask, dtype=torch.float32)
        slp[i, :k] = torch.tensor(s.sampling_logprobs, dtype=torch.float32)
        adv[i, :k] = torch.tensor(s.advantages, dtype=torch.float32)
    return Batch(
        input_ids=ids.to(device),
        attention_mask=att.to(device),
        targets=ids[:, 1:].to(device),
        mask=mask[:, 1:].to(device),
        sampling_logp=slp[:, 1:].to(device),
        advantages=adv[:, 1:].to(device),
        shared_prefix=shared_prefix(samples) if len(samples) > 1 else 0,
    )


def forward_logprobs(model: torch.nn.Module, batch: Batch, temperature: float) -> torch.Tensor:
    """Log-probs [B, T-1] of the batch's targets under ``model`` (logits / temperature).

    The vocabulary projection runs only from the first position any row samples at (``logits_to_keep``), so
    the prompt's full-vocabulary logits are never built; positions before it get log-prob 0 (they are masked).
    A prefix shared by every row (``batch.shared_prefix``: a GRPO group's prompt) runs through the model once and
    its KV cache serves every row; gradients flow through it as through separate copies. The model returns hidden
    states and the output head runs on a block of positions at a time (:mod:`sandgym.train.head`), so a long
    episode's full-vocabulary logits and their gradient never exist at once.
    """
    b, n = batch.input_ids.shape
    sampled = batch.mask.any(0).nonzero()
    start = int(sampled[0]) if len(sampled) else n - 1
    with hidden_states_out(model) as head:  # hidden states where the logits were: the head runs in blocks below
        if usable(model, b, batch.shared_prefix):
            out = logits_after_shared_prefix(model, batch.input_ids, batch.attention_mask, batch.shared_prefix, start)
        else:
            out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False,
                        logits_to_keep=n - start).logits[:, :-1]
    targets = batch.targets[:, start:]
    lp = token_logprobs(out, targets, temperature) if head is None else head_logprobs(head, out, targets, temperature)
    if start == 0:
        return lp
    return torch.cat([lp.new_zeros((lp.shape[0], start)), lp], dim=1)


@dataclass(frozen=True)
class StepStats:
    loss: float
    pg_loss: float
    kl: float
    clip_frac: float
    tis_mean: float
    grad_norm: float
    tokens: int
    sequences: int
    tis_max: float = 1.0
    """The largest uncapped importance weight of the step (this rank's, with data-parallel ranks)."""
    tis_capped_frac: float = 0.0
    """Share of sampled tokens whose importance weight hit ``algorithm.tis_cap``."""
    grad_cosine: float | None = None
    """Mean pairwise cosine between the domains' gradients (``gradient_conflict`` on, 2+ domains); else None."""
    grad_cosine_min: float | None = None
    pcgrad_projections: int = 0
    domains: int = 1
    """Domains among the trained sequences (groups with zero advantage are skipped before the learner, so a
    mixed step may train one domain only; the gradient cosine needs 2+)."""


def micro_batches(samples: Sequence[Sample], size: int, pad_slack: int = PAD_SLACK) -> Iterator[list[Sample]]:
    """At most ``size`` rows each, length-aware: rows of similar length together (no row padded by more than
    ``max(pad_slack, its length)`` tokens: :func:`~sandgym.agents.sampler.length_buckets`; -1 turns that off),
    and within them rows with the same prompt side by side, so a group's shared prefix runs once. The order does
    not change the summed gradient."""
    for bucket in length_buckets([len(s.token_ids) for s in samples], pad_slack):
        ordered = sorted((samples[i] for i in bucket), key=lambda s: (s.token_ids[: first_sampled(s)], len(s.token_ids)))
        for i in range(0, len(ordered), size):
            yield list(ordered[i : i + size])


@dataclass(frozen=True)
class Shard:
    """One rank's part of a data-parallel update (see :mod:`sandgym.train.distributed.ddp`).

    The rank computes gradients on micro-batches ``i`` with ``i % world == rank``, each weighted by its share of the
    *global* batch; ``all_reduce`` (an in-place sum across ranks, e.g. ``torch.distributed.all_reduce``) then adds
    the shards' gradients and statistics, so every rank steps on the full batch's gradient.
    """

    rank: int
    world: int
    all_reduce: Callable[[torch.Tensor], Any]


def learner_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[Sample],
    algo: AlgorithmConfig,
    *,
    pad_id: int,
    temperature: float,
    micro_batch: int,
    max_grad_norm: float,
    norm_len: int,
    device: torch.device | str = "cpu",
    shard: Shard | None = None,
    pad_slack: int = PAD_SLACK,
) -> StepStats:
    """``algo.epochs`` optimiser passes over ``samples``; returns averaged statistics.

    Each micro-batch's loss is scaled by its share of the batch's sampled tokens (or sequences), so the summed
    gradient equals the gradient of the loss aggregated over the whole batch. With ``shard``, this rank's part of
    that sum is computed and the parts are added with ``shard.all_reduce`` (same result as one process). Under
    activation checkpointing, freed activations go back to the system while it runs, and only then.
    """
    with freed_memory_returned(checkpointing_on(model)):  # the learner's activations only
        params = [p for p in model.parameters() if p.requires_grad]
        total_tokens = sum(sum(s.action_mask[1:]) for s in samples)
        domains = sorted({s.domain for s in samples})
        per_domain = algo.gradient_conflict != "off" and shard is None and len(domains) > 1
        if per_domain:  # each domain's micro-batches together: its share of the gradient is read after them
            parts_of_batch = [mb for d in domains for mb in micro_batches([s for s in samples if s.domain == d],
                                                                           micro_batch, pad_slack)]
        else:
            parts_of_batch = list(micro_batches(samples, micro_batch, pad_slack))
        if shard is not None:
            parts_of_batch = [mb for i, mb in enumerate(parts_of_batch) if i % shard.world == shard.rank]
        mbs = [collate(mb, pad_id, device) for mb in parts_of_batch]
        old = _old_logprobs(model, mbs, temperature) if algo.epochs > 1 else None
        ref = _ref_logprobs(model, mbs, temperature) if algo.beta > 0 else None
        totals = torch.zeros(6, dtype=torch.float64)  # loss, pg_loss, kl, clip_frac, tis_mean, tis_capped_frac
        tis_max = 0.0
        grad_norm = 0.0
        conflict: ConflictStats | None = None
        domain_of = [parts[0].domain for parts in parts_of_batch]
        for _ in range(algo.epochs):
            optimizer.zero_grad(set_to_none=True)
            grads: dict[str, torch.Tensor] = {}
            for i, mb in enumerate(mbs):
                new = forward_logprobs(model, mb, temperature)
                parts = policy_loss(
                    new,
                    old[i] if old is not None else new.detach(),
                    mb.sampling_logp,
                    mb.advantages,
                    mb.mask,
                    ref_logp=ref[i] if ref is not None else None,
                    beta=algo.beta,
                    clip_low=algo.clip_low,
                    clip_high=algo.clip_high,
                    tis_cap=algo.tis_cap,
                    aggregation=algo.loss_aggregation,
                    norm_len=norm_len,
                )
                share = _share(mb, algo.loss_aggregation, total_tokens, len(samples))
                (parts.loss * share).backward()
                totals += share * torch.tensor([float(parts.loss.detach()), parts.pg_loss, parts.kl, parts.clip_frac,
                                                parts.tis_mean, parts.tis_capped_frac], dtype=torch.float64)
                if bool(mb.mask.any()):
                    tis_max = max(tis_max, parts.tis_max)
                if per_domain and (i + 1 == len(mbs) or domain_of[i + 1] != domain_of[i]):
                    grads[domain_of[i]] = _take_grads(params)
            if per_domain:
                conflict = _combine(params, grads, algo.gradient_conflict)
            if shard is not None:  # sum of the shards' gradients = the full batch's gradient (a rank may hold none)
                for p in params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    shard.all_reduce(p.grad)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
            if math.isfinite(grad_norm):
                optimizer.step()
        if shard is not None:
            shard.all_reduce(totals)
        t = (totals / algo.epochs).tolist()
        return StepStats(loss=t[0], pg_loss=t[1], kl=t[2], clip_frac=t[3], tis_mean=t[4], grad_norm=grad_norm,
                         tokens=total_tokens, sequences=len(samples), tis_max=tis_max or 1.0, tis_capped_frac=t[5],
                         grad_cosine=conflict.mean if conflict else None,
                         grad_cosine_min=conflict.min if conflict else None,
                         pcgrad_projections=conflict.projections if conflict else 0, domains=len(domains))


def update_with_config(model: torch.nn.Module, optimizer: torch.optim.Optimizer, samples: Sequence[Sample],
                       config: TrainConfig, *, pad_id: int, shard: Shard | None = None) -> StepStats:
    """:func:`learner_update` with a run's ``[algorithm]``, ``[optim]`` and ``[rollout]`` settings."""
    return learner_update(model, optimizer, samples, config.algorithm, pad_id=pad_id,
                          temperature=config.rollout.temperature, micro_batch=config.optim.micro_batch,
                          max_grad_norm=config.optim.max_grad_norm, norm_len=config.rollout.max_total_tokens,
                          shard=shard)


def _take_grads(params: Sequence[torch.Tensor]) -> torch.Tensor:
    """The accumulated gradient as one flat vector; the parameters' gradients are zeroed for the next domain."""
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    for p in params:
        p.grad = None
    return flat


def _combine(params: Sequence[torch.Tensor], grads: Mapping[str, torch.Tensor], mode: str) -> ConflictStats:
    """Measure the domains' gradient cosines, then write their sum (PCGrad-projected for ``mode="pcgrad"``)
    back as the parameters' gradients."""
    names = sorted(grads)
    if mode == "pcgrad":
        total, projections = pcgrad([grads[n] for n in names])
    else:
        total, projections = torch.stack([grads[n] for n in names]).sum(0), 0
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = total[offset:offset + n].view_as(p).clone()
        offset += n
    return ConflictStats(pairwise_cosines(grads), projections)


def _share(mb: Batch, aggregation: str, total_tokens: int, total_seqs: int) -> float:
    if aggregation == "token_mean":
        return float(mb.mask.sum()) / max(total_tokens, 1)
    return mb.input_ids.shape[0] / max(total_seqs, 1)


@torch.no_grad()
def _old_logprobs(model: torch.nn.Module, mbs: Sequence[Batch], temperature: float) -> list[torch.Tensor]:
    return [forward_logprobs(model, mb, temperature) for mb in mbs]


@torch.no_grad()
def _ref_logprobs(model: torch.nn.Module, mbs: Sequence[Batch], temperature: float) -> list[torch.Tensor]:
    """Reference log-probs: the same model with the LoRA adapter disabled (no second copy in memory)."""
    disable = getattr(model, "disable_adapter", None)
    ctx = disable() if callable(disable) else contextlib.nullcontext()
    with ctx:
        return [forward_logprobs(model, mb, temperature) for mb in mbs]

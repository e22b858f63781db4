"""A batched sampling loop over a KV cache with exact per-token log-probs and early exit of finished rows.

Why not ``model.generate``: it decodes until the longest row finishes, does not return the log-probs of the
distribution actually sampled from, and draws all rows from one random stream (so a sample depends on which
other episodes share its batch). Here each row has its own ``torch.Generator``, finished rows leave the batch
(their KV cache rows are dropped) and ``on_done`` fires the moment a row finishes so the caller can start the
environment step while the others keep decoding.

Log-probs: ``log_softmax(logits / temperature)`` of the chosen token — the tempered distribution *before* top-p
truncation, i.e. exactly what a trainer recomputes from ``logits / temperature``. With ``temperature == 0`` the
row is decoded greedily and the log-probs are those of the raw logits (temperature 1).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

_STOP_TAIL_TOKENS = 16


@dataclass(frozen=True)
class SampledRow:
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    truncated: bool
    """Hit the row's max_new_tokens before a stop token/string."""
    ended: bool
    """The last token is a stop token (EOS / end-of-turn)."""


def _sample(
    logits: torch.Tensor, temperature: float, top_p: float, generators: Sequence[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick one token per row. logits: (B, V) float32 -> (tokens (B,), logprobs (B,))."""
    if temperature <= 0:
        lp = torch.log_softmax(logits, dim=-1)
        tok = lp.argmax(dim=-1)
        return tok, lp.gather(1, tok[:, None])[:, 0]
    lp = torch.log_softmax(logits / temperature, dim=-1)
    u = torch.stack([torch.rand((), generator=g) for g in generators]).to(lp.device)
    if top_p < 1.0:
        sorted_lp, order = lp.sort(dim=-1, descending=True)
        probs = sorted_lp.exp()
        cum = probs.cumsum(dim=-1)
        probs = probs.masked_fill(cum - probs > top_p, 0.0)  # keep the smallest prefix reaching top_p
        cdf = probs.cumsum(dim=-1)
        pos = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp_(max=lp.shape[-1] - 1)
        pos = torch.minimum(pos, (probs > 0).sum(-1, keepdim=True) - 1)
        tok = order.gather(1, pos)[:, 0]
    else:
        cdf = lp.exp().cumsum(dim=-1)
        pos = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp_(max=lp.shape[-1] - 1)
        tok = pos[:, 0]
    return tok, lp.gather(1, tok[:, None])[:, 0]


@torch.inference_mode()
def sample_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: Sequence[int],
    generators: Sequence[torch.Generator],
    temperature: float = 1.0,
    top_p: float = 1.0,
    stop_token_ids: frozenset[int] = frozenset(),
    stop_strings: Sequence[str] = (),
    decode: Callable[[list[int]], str] | None = None,
    pad_token_id: int = 0,
    on_done: Callable[[int, SampledRow], None] | None = None,
) -> list[SampledRow]:
    """Sample a continuation of every prompt (left-padded into one batch, decoded with a KV cache; identical
    prompts are prefilled once).

    Rows leave the batch when they emit a stop token, contain a stop string (``decode`` needed) or reach their
    ``max_new_tokens`` (``0`` returns an empty, truncated row at once).
    """
    device = next(model.parameters()).device
    n = len(prompts)
    results: list[SampledRow | None] = [None] * n
    gen_ids: list[list[int]] = [[] for _ in range(n)]
    gen_lps: list[list[float]] = [[] for _ in range(n)]

    def finish(i: int, truncated: bool, ended: bool) -> None:
        row = SampledRow(tuple(gen_ids[i]), tuple(gen_lps[i]), truncated, ended)
        results[i] = row
        if on_done is not None:
            on_done(i, row)

    active = [i for i in range(n) if max_new_tokens[i] > 0]
    for i in range(n):
        if max_new_tokens[i] <= 0:
            finish(i, truncated=True, ended=False)
    if not active:
        return [r for r in results if r is not None]

    # Rows with the same prompt (a GRPO group, several evaluation samples of a task) share one prefill: the
    # distinct prompts run through the model once and their KV cache is repeated for every row that uses them.
    distinct: dict[tuple[int, ...], int] = {}
    owner = [distinct.setdefault(tuple(prompts[i]), len(distinct)) for i in active]
    width = max(len(p) for p in distinct)
    ids = torch.full((len(distinct), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(distinct), width), dtype=torch.long)
    for r, p in enumerate(distinct):
        ids[r, width - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[r, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp_(min=0)
    cache = DynamicCache(config=getattr(model, "config", None))
    ckw = cache_kwarg(model)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1, **{ckw: cache})
    logits = out.logits[:, -1, :]
    if len(distinct) < len(active):
        rows = torch.tensor(owner, dtype=torch.long, device=device)
        cache.batch_select_indices(rows)
        mask, pos, logits = mask[rows], pos[rows], logits[rows]
    last_pos = pos[:, -1]
    stop_strings = tuple(stop_strings) if decode is not None else ()

    while True:
        tok, lp = _sample(logits.float(), temperature, top_p, [generators[i] for i in active])
        tok_l, lp_l = tok.tolist(), lp.tolist()
        keep: list[int] = []
        for r, i in enumerate(active):
            gen_ids[i].append(tok_l[r])
            gen_lps[i].append(lp_l[r])
            if tok_l[r] in stop_token_ids:
                finish(i, truncated=False, ended=True)
            elif stop_strings and decode is not None and _has_stop(decode(gen_ids[i][-_STOP_TAIL_TOKENS:]), stop_strings):
                finish(i, truncated=False, ended=False)
            elif len(gen_ids[i]) >= max_new_tokens[i]:
                finish(i, truncated=True, ended=False)
            else:
                keep.append(r)
        if not keep:
            break
        if len(keep) < len(active):
            sel = torch.tensor(keep, dtype=torch.long, device=device)
            cache.batch_select_indices(sel)
            mask, last_pos, tok = mask[sel], last_pos[sel], tok[sel]
            active = [active[r] for r in keep]
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
        last_pos = last_pos + 1
        out = model(input_ids=tok[:, None], attention_mask=mask, position_ids=last_pos[:, None], use_cache=True, **{ckw: cache})
        logits = out.logits[:, -1, :]
    return [r for r in results if r is not None]


def cache_kwarg(model: Any) -> str:
    """transformers >= 5.2x names the KV cache argument ``cache``; older versions ``past_key_values``."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def _has_stop(tail: str, stop_strings: Sequence[str]) -> bool:
    return any(s in tail for s in stop_strings)

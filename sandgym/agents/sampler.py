"""A batched sampling loop over a KV cache with exact per-token log-probs and early exit of finished rows.

Why not ``model.generate``: it decodes until the longest row finishes, does not return the log-probs of the
distribution actually sampled from, and draws all rows from one random stream (so a sample depends on which
other episodes share its batch). Here each row has its own ``torch.Generator``, finished rows leave the batch
(their KV cache rows are dropped) and ``on_done`` fires the moment a row finishes so the caller can start the
environment step while the others keep decoding.

Log-probs: ``log_softmax(logits / temperature)`` of the chosen token — the tempered distribution *before* top-p
truncation, i.e. exactly what a trainer recomputes from ``logits / temperature``. With ``temperature == 0`` the
row is decoded greedily and the log-probs are those of the raw logits (temperature 1).

Prefill is shared where the work is the same: rows with an identical prompt (a GRPO group) run it once, and a row
given the KV cache of its own earlier turns (``past``, multi-turn episodes) only runs the tokens added since.
``keep_kv`` returns each row's cache for its next turn.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from sandgym.agents.kv_cache import reserved_cache

_STOP_TAIL_TOKENS = 16


@dataclass(frozen=True)
class SampledRow:
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    truncated: bool
    """Hit the row's max_new_tokens before a stop token/string."""
    ended: bool
    """The last token is a stop token (EOS / end-of-turn)."""
    kv: PastKV | None = None
    """With ``keep_kv``: the KV cache of the prompt and every sampled token but the last (never fed back)."""


@dataclass(frozen=True)
class PastKV:
    """One row's KV cache for its first ``length`` tokens: per layer (keys, values), each [kv_heads, length, dim]."""

    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]

    @property
    def length(self) -> int:
        return int(self.layers[0][0].shape[1])

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.layers)


PAD_SLACK = 1024
"""Length-aware batching (:func:`length_buckets`): a row may be padded by at most this many tokens, or by its own
length when longer, before it goes into a batch of its own length."""


def length_buckets(lengths: Sequence[int], slack: int = PAD_SLACK) -> list[list[int]]:
    """Indices grouped into batches of similar length, shortest first: a batch grows (in order of length) while its
    longest row exceeds its shortest by at most ``max(slack, shortest)`` tokens. Mixed 8K documents and short
    prompts then never share a padded batch, while ordinary spreads of lengths stay in one. ``slack < 0``: one
    batch (naive)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    if slack < 0:
        return [order] if order else []
    buckets: list[list[int]] = []
    for i in order:
        if buckets and lengths[i] - lengths[buckets[-1][0]] <= max(slack, lengths[buckets[-1][0]]):
            buckets[-1].append(i)
        else:
            buckets.append([i])
    return buckets


def reusable_cache(model: Any) -> bool:
    """Whether the model's KV cache is plain per-token storage that can be cut per row and reassembled (no sliding
    windows or other compressed layers)."""
    from transformers.cache_utils import DynamicLayer

    layers = DynamicCache(config=getattr(model, "config", None)).layers
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


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
    past: Sequence[PastKV | None] | None = None,
    keep_kv: bool | Sequence[bool] = False,
) -> list[SampledRow]:
    """Sample a continuation of every prompt (left-padded into one batch, decoded with a KV cache; identical
    prompts are prefilled once).

    Rows leave the batch when they emit a stop token, contain a stop string (``decode`` needed) or reach their
    ``max_new_tokens`` (``0`` returns an empty, truncated row at once). ``past[i]``, when given, is the KV cache
    of ``prompts[i]``'s first ``past[i].length`` tokens (at least one prompt token must follow it); only the rest is
    prefilled (see :func:`reusable_cache` for which models allow it). ``keep_kv`` (all rows, or one flag per row)
    returns the rows' caches in :attr:`SampledRow.kv`.
    """
    device = next(model.parameters()).device
    n = len(prompts)
    results: list[SampledRow | None] = [None] * n
    gen_ids: list[list[int]] = [[] for _ in range(n)]
    gen_lps: list[list[float]] = [[] for _ in range(n)]

    def finish(i: int, truncated: bool, ended: bool, kv: PastKV | None = None) -> None:
        row = SampledRow(tuple(gen_ids[i]), tuple(gen_lps[i]), truncated, ended, kv)
        results[i] = row
        if on_done is not None:
            on_done(i, row)

    active = [i for i in range(n) if max_new_tokens[i] > 0]
    for i in range(n):
        if max_new_tokens[i] <= 0:
            finish(i, truncated=True, ended=False)
    if not active:
        return [r for r in results if r is not None]

    wants_kv = [bool(keep_kv)] * n if isinstance(keep_kv, bool) else [bool(k) for k in keep_kv]
    ckw = cache_kwarg(model)
    pasts = [past[i] if past is not None else None for i in active]
    reserve = max(max_new_tokens[i] for i in active)  # the cache appends in place (sandgym.agents.kv_cache)
    if any(p is not None for p in pasts):
        cache, mask, pos = _cache_from_pasts(model, [prompts[i] for i in active], pasts, pad_token_id, device,
                                             reserve)
        ids, _ = _left_pad([prompts[i][p.length if p else 0:] for i, p in zip(active, pasts, strict=True)], pad_token_id)
        n_new = ids.shape[1]
        out = model(input_ids=ids.to(device), attention_mask=mask, position_ids=pos[:, -n_new:], use_cache=True,
                    logits_to_keep=1, **{ckw: cache})
        logits = out.logits[:, -1, :]
    else:
        # Rows with the same prompt (a GRPO group, several evaluation samples of a task) share one prefill: the
        # distinct prompts run through the model once and their KV cache is repeated for every row using them.
        distinct: dict[tuple[int, ...], int] = {}
        owner = [distinct.setdefault(tuple(prompts[i]), len(distinct)) for i in active]
        ids, mask = _left_pad(list(distinct), pad_token_id)
        ids, mask = ids.to(device), mask.to(device)
        pos = (mask.cumsum(-1) - 1).clamp_(min=0)
        cache = reserved_cache(model, reserve)
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                    **{ckw: cache})
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
        staying: list[int] = []
        for r, i in enumerate(active):
            gen_ids[i].append(tok_l[r])
            gen_lps[i].append(lp_l[r])
            if tok_l[r] in stop_token_ids:
                finish(i, False, True, _row_kv(cache, r, mask[r]) if wants_kv[i] else None)
            elif stop_strings and decode is not None and _has_stop(decode(gen_ids[i][-_STOP_TAIL_TOKENS:]), stop_strings):
                finish(i, False, False, _row_kv(cache, r, mask[r]) if wants_kv[i] else None)
            elif len(gen_ids[i]) >= max_new_tokens[i]:
                finish(i, True, False, _row_kv(cache, r, mask[r]) if wants_kv[i] else None)
            else:
                staying.append(r)
        if not staying:
            break
        if len(staying) < len(active):
            sel = torch.tensor(staying, dtype=torch.long, device=device)
            cache.batch_select_indices(sel)
            mask, last_pos, tok = mask[sel], last_pos[sel], tok[sel]
            active = [active[r] for r in staying]
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
        last_pos = last_pos + 1
        out = model(input_ids=tok[:, None], attention_mask=mask, position_ids=last_pos[:, None], use_cache=True, **{ckw: cache})
        logits = out.logits[:, -1, :]
    return [r for r in results if r is not None]


def _left_pad(rows: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [B, W] left-padded to the longest row, and the attention mask (1 on real tokens)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r):] = torch.tensor(list(r), dtype=torch.long)
            mask[i, width - len(r):] = 1
    return ids, mask


def _cache_from_pasts(
    model: Any, prompts: Sequence[Sequence[int]], pasts: Sequence[PastKV | None], pad_token_id: int,
    device: torch.device, reserve: int = 1,
) -> tuple[DynamicCache, torch.Tensor, torch.Tensor]:
    """A batch cache from the rows' own past caches, each left-padded to the longest, plus the attention mask and
    position ids of [past | new tokens] (both parts left-padded: a row's padding may sit between them)."""
    lengths = [p.length if p is not None else 0 for p in pasts]
    new = [len(prompt) - n for prompt, n in zip(prompts, lengths, strict=True)]
    if min(new) < 1:
        raise ValueError("every prompt must extend its past cache by at least one token")
    width_past, width_new = max(lengths), max(new)
    ref = next(p for p in pasts if p is not None)
    layers = []
    for li, (k0, v0) in enumerate(ref.layers):
        k = k0.new_zeros((len(pasts), k0.shape[0], width_past, k0.shape[2]))
        v = v0.new_zeros((len(pasts), v0.shape[0], width_past, v0.shape[2]))
        for r, p in enumerate(pasts):
            if p is not None:
                k[r, :, width_past - p.length:] = p.layers[li][0]
                v[r, :, width_past - p.length:] = p.layers[li][1]
        layers.append((k.to(device), v.to(device)))
    cache = reserved_cache(model, reserve)
    if len(cache.layers) != len(layers):
        cache = DynamicCache(ddp_cache_data=layers, config=getattr(model, "config", None))
    else:
        cache_layers: list[Any] = list(cache.layers)  # ReservedLayers (or plain DynamicLayers)
        for layer, (k, v) in zip(cache_layers, layers, strict=True):
            layer.update(k, v)
    mask = torch.zeros((len(pasts), width_past + width_new), dtype=torch.long)
    pos = torch.zeros_like(mask)
    for r, (n_past, n_new) in enumerate(zip(lengths, new, strict=True)):
        mask[r, width_past - n_past : width_past] = 1
        mask[r, width_past + width_new - n_new :] = 1
        pos[r, width_past + width_new - n_new :] = torch.arange(n_past, n_past + n_new)
    return cache, mask.to(device), pos.to(device)


def _row_kv(cache: DynamicCache, row: int, mask_row: torch.Tensor) -> PastKV:
    """Row ``row``'s cache at its unpadded positions (every token fed so far, in order)."""
    keep = mask_row.nonzero().squeeze(1)
    layers: list[Any] = list(cache.layers)  # plain DynamicLayers (see reusable_cache)
    return PastKV(tuple((layer.keys[row][:, keep], layer.values[row][:, keep]) for layer in layers))


def causal_lm(model: Any) -> Any:
    """The transformers model under a DDP and/or PEFT wrapper (``model`` itself when it has neither)."""
    model = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
    unwrap = getattr(model, "get_base_model", None)
    return unwrap() if callable(unwrap) else model


def cache_kwarg(model: Any) -> str:
    """transformers >= 5.2x names the KV cache argument ``cache``; older versions ``past_key_values``."""
    inner = causal_lm(model)
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def _has_stop(tail: str, stop_strings: Sequence[str]) -> bool:
    return any(s in tail for s in stop_strings)

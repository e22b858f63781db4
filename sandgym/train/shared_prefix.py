"""The learner's forward pass over a micro-batch whose rows share a prompt, and activation checkpointing for it.

A GRPO group's rows share their prompt: a long document, a system prompt with tool schemas. The prompt runs through
the model once (batch 1) and its keys and values serve every row's remaining tokens; gradients flow through the
prefix as through separate copies (:func:`logits_after_shared_prefix`).

With activation checkpointing (``[optim] activation_checkpointing``) each decoder layer keeps only its input and
recomputes the rest during the backward pass, so a learner micro-batch's memory grows with the tokens times the
hidden size instead of times every activation of every layer. transformers' own checkpointing drops the KV cache
(a cache that appends would be appended to again when the layer is replayed); :class:`PrefixLayer` never appends
after the prefix pass, so a replay returns exactly what the first pass did, and the shared-prefix pass keeps working
under checkpointing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from sandgym.agents.sampler import cache_kwarg, causal_lm, reusable_cache

MIN_SHARED_PREFIX = 16
"""Shorter common prefixes are not worth the extra forward call."""


class PrefixLayer(DynamicLayer):
    """One layer's keys and values of a shared prefix (batch 1), read by ``rows`` rows and never extended.

    The prefix pass stores its states (a replay of it under checkpointing stores the same values again). Once
    :meth:`serve` is called, a call with ``rows`` rows gets the prefix (broadcast, not copied) followed by its own
    states, which are not kept: a replayed layer sees the same inputs as its first pass.
    """

    rows = 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.rows or key_states.shape[0] != self.rows:  # the prefix pass (batch 1), or a replay of it
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            self.keys, self.values = key_states, value_states
            return key_states, value_states
        assert self.keys is not None and self.values is not None, "the prefix pass runs first"
        b = key_states.shape[0]
        keys = torch.cat([self.keys.expand(b, -1, -1, -1), key_states], dim=-2)
        values = torch.cat([self.values.expand(b, -1, -1, -1), value_states], dim=-2)
        return keys, values


def prefix_cache(model: torch.nn.Module) -> tuple[DynamicCache, list[PrefixLayer]]:
    cache = DynamicCache(config=getattr(model, "config", None))
    layers = [PrefixLayer() for _ in cache.layers]
    cache.layers = list(layers)
    return cache, layers


def common_prefix(token_ids: Sequence[Sequence[int]], limit: int) -> int:
    """Length of the longest common prefix of the rows, at most ``limit`` (the first position any row samples)."""
    ref = token_ids[0]
    for ids in token_ids[1:]:
        k = 0
        while k < limit and ids[k] == ref[k]:
            k += 1
        limit = k
    return limit


def usable(model: torch.nn.Module, rows: int, prefix: int) -> bool:
    """The shared-prefix pass needs 2+ rows, a prefix worth it, and a plain per-token KV cache (no sliding window,
    no linear-attention state)."""
    return rows > 1 and prefix >= MIN_SHARED_PREFIX and reusable_cache(model)


def logits_after_shared_prefix(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                               prefix: int, start: int) -> torch.Tensor:
    """Logits [B, T-1-start, V] of positions ``start..T-2``: the first ``prefix`` tokens once (batch 1), then each
    row's remaining tokens on top of their keys and values."""
    (b, n), k = input_ids.shape, prefix
    cache, layers = prefix_cache(model)
    ckw = cache_kwarg(model)
    head = model(input_ids=input_ids[:1, :k], attention_mask=attention_mask[:1, :k], use_cache=True,
                 logits_to_keep=1, **{ckw: cache})
    for layer in layers:
        layer.rows = b
    pos = torch.arange(k, n, device=input_ids.device).expand(b, -1)
    tail = model(input_ids=input_ids[:, k:], attention_mask=attention_mask, position_ids=pos,
                 use_cache=True, logits_to_keep=n - max(start, k), **{ckw: cache})
    logits = tail.logits[:, :-1]
    if start < k:  # the prefix's last position predicts the first sampled token (start == k - 1)
        logits = torch.cat([head.logits[:, -1:].expand(b, -1, -1), logits], dim=1)
    return logits


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    from transformers.modeling_layers import GradientCheckpointingLayer

    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def set_activation_checkpointing(model: Any, on: bool) -> None:
    """Turn activation checkpointing of every decoder layer on or off (non-reentrant, so LoRA's frozen inputs need
    no gradient). Layers keep the learner's :class:`PrefixLayer` cache under it: its replay is exact. With it on,
    :func:`~sandgym.train.step.learner_update` returns freed activations to the system while it runs
    (:func:`freed_memory_returned`)."""
    inner = causal_lm(model)
    new_api = hasattr(inner, "activation_checkpointing_enable")  # transformers >= 5.2x; older: gradient_*
    if on and new_api:
        inner.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    elif on:
        inner.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        (inner.activation_checkpointing_disable if new_api else inner.gradient_checkpointing_disable)()
    for layer in decoder_layers(inner):
        setattr(layer, "_can_checkpoint_with_cache", on)  # noqa: B010 (an instance flag over transformers' class one)


def checkpointing_on(model: torch.nn.Module) -> bool:
    """Whether :func:`set_activation_checkpointing` turned checkpointing on for ``model``'s decoder layers."""
    return any(getattr(m, "_can_checkpoint_with_cache", False) is True for m in decoder_layers(model))


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
RETURN_ABOVE = 1 << 20
KEEP_MMAP_BELOW, KEEP_TRIM_BELOW = 32 << 20, 64 << 20
"""glibc's own ceilings for its adaptive thresholds on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX`` and twice that)."""


@contextlib.contextmanager
def freed_memory_returned(on: bool = True) -> Iterator[bool]:
    """Inside: :func:`return_freed_memory`. After: :func:`keep_freed_memory`, so the sampler that runs next reuses
    its blocks. The 1 MiB thresholds are for the learner only: left on while sampling, every KV-cache-sized block
    is an ``mmap`` and a page-faulting first touch, and 8K-token decoding ran 1.76x slower (305.7 against 174.1 ms
    a token, docs/results/long_context_cost-2026-12-04/mallopt_probe.py). Yields whether the thresholds were set."""
    if not on:
        yield False
        return
    applied = return_freed_memory()
    try:
        yield applied
    finally:
        if applied:
            keep_freed_memory()


def keep_freed_memory() -> bool:
    """Let glibc keep freed blocks up to 32 MiB in its heap for reuse (its adaptive ceiling; setting a threshold
    by hand turns adaptation off, so this is where an adapted threshold ends up after the first large free)."""
    return _mallopt(KEEP_MMAP_BELOW, KEEP_TRIM_BELOW)


def return_freed_memory() -> bool:
    """Make glibc give large freed blocks back to the system at once (``mallopt`` of ``M_MMAP_THRESHOLD`` and
    ``M_TRIM_THRESHOLD`` to 1 MiB).

    glibc's default threshold adapts upwards after a large block is freed, so the learner's layer-sized
    activations (recomputed and freed layer by layer under checkpointing) end up in a heap that is never trimmed:
    measured at 2K tokens, one row, peak RSS 3.2 GB with the default, 2.7 GB with only the trim threshold, 1.2 GB
    with both. Returns False where it does not apply (not glibc)."""
    return _mallopt(RETURN_ABOVE, RETURN_ABOVE)


def _mallopt(mmap_threshold: int, trim_threshold: int) -> bool:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return bool(libc is not None and libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)
                    and libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold))
    except (OSError, AttributeError):
        return False

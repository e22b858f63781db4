"""A KV cache that appends in place: the sampler's decoding loop without a whole-cache copy per token.

transformers' ``DynamicLayer`` grows by ``torch.cat``: every decoding step copies every layer's whole key and value
cache to append one token, so the copy grows with the context (SmolLM2-135M at 8K tokens: 30 layers x K and V x
8,128 positions x 3 heads x 64 x 4 bytes = 375 MB a step, for one row). :class:`ReservedLayer` keeps keys and
values in buffers with room for ``reserve`` more tokens (the sampler's ``max_new_tokens``) and exposes views of
their filled part; appending writes the new token only. The values are the same tensors a ``DynamicLayer`` would
hold (tested: identical samples and log-probs), and a buffer that runs out of room or loses its rows is copied
once into a new one with room again.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

__all__ = ["ReservedLayer", "reserved_cache"]


class ReservedLayer(DynamicLayer):  # type: ignore[misc]
    """A ``DynamicLayer`` whose ``keys``/``values`` are views into buffers with ``reserve`` tokens of spare room."""

    def __init__(self, reserve: int) -> None:
        super().__init__()
        self.reserve = max(int(reserve), 1)
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None

    def _fits(self, filled: int, needed: int, batch: int) -> bool:
        """The buffers still back ``keys`` (nothing replaced them) and have room for ``needed`` positions."""
        if self._k is None or self._k.shape[0] != batch or needed > self._k.shape[-2]:
            return False
        return filled == 0 or _tensor(self.keys).data_ptr() == self._k.data_ptr()

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        filled = self.get_seq_length()
        needed = filled + key_states.shape[-2]
        if not self._fits(filled, needed, key_states.shape[0]):
            shape = (*key_states.shape[:-2], needed + self.reserve, key_states.shape[-1])
            k, v = key_states.new_empty(shape), value_states.new_empty(shape[:-1] + value_states.shape[-1:])
            if filled:
                k[..., :filled, :] = _tensor(self.keys)
                v[..., :filled, :] = _tensor(self.values)
            self._k, self._v = k, v
        assert self._k is not None and self._v is not None
        self._k[..., filled:needed, :] = key_states
        self._v[..., filled:needed, :] = value_states
        self.keys, self.values = self._k[..., :needed, :], self._v[..., :needed, :]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep rows ``indices`` (finished rows leave the batch), buffers and spare room included."""
        filled = self.get_seq_length()
        if not filled:
            return
        if self._fits(filled, filled, _tensor(self.keys).shape[0]):
            assert self._k is not None and self._v is not None
            self._k, self._v = self._k[indices], self._v[indices]
            self.keys, self.values = self._k[..., :filled, :], self._v[..., :filled, :]
        else:
            super().batch_select_indices(indices)

    def reset(self) -> None:
        self._k = self._v = None
        super().reset()


def _tensor(x: Any) -> torch.Tensor:
    assert isinstance(x, torch.Tensor)
    return x


def reserved_cache(model: Any, reserve: int) -> DynamicCache:
    """The cache ``model`` would build (``DynamicCache(config=...)``) with every layer a :class:`ReservedLayer`
    when all of them are plain ``DynamicLayer`` s; otherwise (sliding windows, other layer kinds) that cache as is."""
    cache = DynamicCache(config=getattr(model, "config", None))
    if cache.layers and all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [ReservedLayer(reserve) for _ in cache.layers]
    return cache

"""The learner's log-probs without the full-vocabulary logits of every position.

A causal LM's last layer (the output head) turns each position's hidden state (576 floats on the embedded model) into
a logit per vocabulary entry (49,152). A 4,096-token episode's logits are 805 MB in float32; a micro-batch of 4 with
their gradient is over 6 GB, most of a learner step's memory on a CPU. Here the model returns its final hidden
states instead (:func:`hidden_states_out`), and :func:`head_logprobs` applies the head a block of positions at a
time, keeping only the block's hidden states for the backward pass, which recomputes the block's logits. The result
equals ``log_softmax(logits)[target]`` up to float summation order.

A model whose logits are more than ``head(hidden)`` (a soft cap, a scale applied after the head) is detected on
first use with a two-token probe and keeps the plain path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from sandgym.agents.sampler import causal_lm
from sandgym.train.loss import token_logprobs

BLOCK_POSITIONS = 1024
"""Positions whose logits exist at once: 1,024 x 49,152 float32 logits are 200 MB."""

_PROBED = "_sandgym_head_ok"


def _head_slot(lm: torch.nn.Module) -> tuple[str, torch.nn.Linear] | None:
    get = getattr(lm, "get_output_embeddings", None)
    head = get() if callable(get) else None
    if not isinstance(head, torch.nn.Linear):
        return None
    return next(((name, head) for name, child in lm.named_children() if child is head), None)


@contextlib.contextmanager
def _swapped(lm: torch.nn.Module, name: str, head: torch.nn.Linear) -> Iterator[None]:
    setattr(lm, name, torch.nn.Identity())
    try:
        yield
    finally:
        setattr(lm, name, head)


def _probe(lm: torch.nn.Module, name: str, head: torch.nn.Linear) -> bool:
    """Whether the model's logits are exactly ``head(hidden states)``: one forward pass of two tokens each way."""
    ids = torch.tensor([[1, 2]], device=head.weight.device)
    modes = {m: m.training for m in lm.modules()}
    lm.eval()  # no dropout: both passes must see the same network
    try:
        with torch.no_grad():
            logits = lm(input_ids=ids, use_cache=False).logits
            with _swapped(lm, name, head):
                hidden = lm(input_ids=ids, use_cache=False).logits
            return hidden.shape[-1] == head.in_features and torch.allclose(head(hidden), logits, atol=1e-4, rtol=1e-4)
    finally:
        for m, training in modes.items():
            m.training = training


@contextlib.contextmanager
def hidden_states_out(model: torch.nn.Module) -> Iterator[torch.nn.Linear | None]:
    """While open, ``model(...).logits`` holds the final hidden states [B, T, hidden] (``logits_to_keep`` applies as
    before); yields the output head to apply with :func:`head_logprobs`. Yields ``None`` and changes nothing when the
    model's logits are not a plain linear head of its hidden states."""
    lm = causal_lm(model)
    slot = _head_slot(lm)
    if slot is not None and getattr(lm, _PROBED, None) is None:
        setattr(lm, _PROBED, _probe(lm, *slot))  # noqa: B010 (a flag on the instance, probed once)
    if slot is None or not getattr(lm, _PROBED):
        yield None
        return
    with _swapped(lm, *slot):
        yield slot[1]


def _block_logprobs(hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    temperature: float) -> torch.Tensor:
    logits = torch.nn.functional.linear(hidden, weight, bias)
    return token_logprobs(logits.unsqueeze(0), targets.unsqueeze(0), temperature)[0]


def head_logprobs(head: torch.nn.Linear, hidden: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
                  block: int | None = None) -> torch.Tensor:
    """Log-prob [B, T] of each target under ``head(hidden) / temperature``, ``hidden`` [B, T, H]: ``block``
    positions (default :data:`BLOCK_POSITIONS`) of one row at a time, recomputed in the backward pass when gradients are on."""
    block = block or BLOCK_POSITIONS
    rows: list[torch.Tensor] = []
    grad = torch.is_grad_enabled()
    for b in range(hidden.shape[0]):
        parts: list[Any] = []
        for s in range(0, hidden.shape[1], block):
            args = (hidden[b, s:s + block], targets[b, s:s + block], head.weight, head.bias, temperature)
            parts.append(checkpoint(_block_logprobs, *args, use_reentrant=False) if grad
                         else _block_logprobs(*args))
        rows.append(torch.cat(parts) if parts else hidden.new_zeros((0,), dtype=torch.float32))
    return torch.stack(rows)

"""An int8 copy of the model to sample from, with the LoRA adapter applied live.

``HFPolicy(..., generation_weights="int8")``: every ``nn.Linear`` of a copy of the base model (the LM head
included) is quantized once to dynamic int8 (``torch.ao.quantization.quantize_dynamic``: int8 weights, activations
quantized per call, fbgemm/x86 kernels on CPU); each LoRA target then adds the adapter's own ``B(A(x)) * scaling``
in float, reading the learner's live adapter tensors. Nothing is re-merged or re-quantized after an optimiser step,
and the copy's weights cost a quarter of the float ones. Decoding on a 2-core CPU is 1.7-1.8x faster than the
merged float copy (docs/BENCHMARKS.md, "GRPO step vs TRL").

The samples come from a different distribution than the learner's float model: on SmolLM2-135M the log-prob of a
sampled token differs by 0.84 nats on average and the truncated importance weight (``algorithm.tis_cap``) that
corrects for it averages ~0.8-0.9 (``losses/tis_mean`` / ``losses/tis_max`` show it per step). Use it where rollout
speed matters more than staying on-policy, and watch those metrics.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn


class LiveLoraInt8Linear(nn.Module):
    """A dynamic-int8 base linear plus the float LoRA update of ``lora`` (a peft ``LoraLayer``), read live."""

    def __init__(self, quantized: nn.Module, lora: Any) -> None:
        super().__init__()
        self.quantized = quantized
        self._lora = (lora,)  # a tuple: not a submodule, so the copy never owns (or freezes) the adapter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.quantized(x)
        lora = self._lora[0]
        if lora.disable_adapters:
            return out
        for name in lora.active_adapters:
            if name in lora.lora_A:
                a, b = lora.lora_A[name], lora.lora_B[name]
                out = out + b(a(lora.lora_dropout[name](x.to(a.weight.dtype)))).to(out.dtype) * lora.scaling[name]
        return out


def int8_generation_copy(plain_copy: nn.Module, lora_layers: Sequence[tuple[str, Any]]) -> nn.Module:
    """Quantize ``plain_copy`` (a float model sharing the base weights; its own tensors are not modified) in place
    and wire the adapter of each ``(name, LoraLayer)`` into the quantized linear of the same name."""
    if "fbgemm" not in torch.backends.quantized.supported_engines and "x86" not in torch.backends.quantized.supported_engines:
        raise RuntimeError("generation_weights='int8' needs torch's x86/fbgemm quantized kernels (a CPU build for "
                           "x86-64); use generation_weights='float'")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantize_dynamic's deprecation notice (torchao is its successor)
        torch.ao.quantization.quantize_dynamic(plain_copy, {nn.Linear}, dtype=torch.qint8, inplace=True)
    for name, lora in lora_layers:
        parent_name, _, leaf = name.rpartition(".")
        parent = plain_copy.get_submodule(parent_name) if parent_name else plain_copy
        setattr(parent, leaf, LiveLoraInt8Linear(getattr(parent, leaf), lora))
    return plain_copy.eval()


__all__ = ["LiveLoraInt8Linear", "int8_generation_copy"]

"""The int8 generation copy: close to the float model, reads the live adapter, never owns or freezes it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from sandgym.agents.hf import HFPolicy, LoraSpec
from sandgym.agents.rollout import RolloutConfig, rollout
from sandgym.errors import ConfigError
from tests.agents.fakes import EchoEnv, FakeTask


def _policy(tiny_model_dir: Any, weights: str) -> HFPolicy:
    pol = HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0), generation_weights=weights)
    with torch.no_grad():  # a non-zero adapter, so the live LoRA path matters
        for n, p in pol.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(n)))
    return pol


def _logprobs(model: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.log_softmax(model(input_ids=ids).logits.float(), dim=-1)


def test_int8_copy_tracks_the_float_model_and_the_live_adapter(tiny_model_dir: Any) -> None:
    pol = _policy(tiny_model_dir, "int8")
    pol.model.eval()
    ids = torch.tensor([list(range(5, 45))])
    gen = pol.generation_model()
    assert gen is pol.generation_model()  # built once
    before_float, before_int8 = _logprobs(pol.model, ids), _logprobs(gen, ids)
    assert (before_int8 - before_float).abs().max() < 0.1 and not torch.equal(before_int8, before_float)
    with torch.no_grad():  # an optimiser step on the adapter: the int8 copy sees it without a rebuild
        for n, p in pol.model.named_parameters():
            if "lora_B" in n:
                p.add_(0.2)
    after_float, after_int8 = _logprobs(pol.model, ids), _logprobs(gen, ids)
    moved = (after_float - before_float).abs().max()
    assert moved > 0.5 and (after_int8 - after_float).abs().max() < 0.1 * moved


def test_int8_copy_does_not_own_or_freeze_the_adapter(tiny_model_dir: Any) -> None:
    pol = _policy(tiny_model_dir, "int8")
    gen = pol.generation_model()
    trainable = [p for n, p in pol.model.named_parameters() if "lora_" in n]
    assert trainable and all(p.requires_grad for p in trainable)
    assert not any("lora_" in n for n, _ in gen.named_parameters())
    quantized = [m for m in gen.modules() if type(m).__name__ == "Linear" and "quantized" in type(m).__module__]
    assert quantized  # the linears (LoRA targets and the rest) are int8


def test_int8_rollouts_record_logprobs_close_to_the_learners(tiny_model_dir: Any) -> None:
    pol = _policy(tiny_model_dir, "int8")
    cfg = RolloutConfig(max_new_tokens=16, max_total_tokens=600, max_turns=2, seed=3)
    trajs = rollout(pol, EchoEnv, [FakeTask("a", turns_needed=2)], group_size=4, config=cfg)
    assert all(t.has_tokens and t.num_generated_tokens > 0 for t in trajs)
    pol.model.eval()
    for t in trajs:
        lp = _logprobs(pol.model, torch.tensor([t.token_ids]))[0]
        pos = torch.nonzero(torch.tensor(t.action_mask)).squeeze(1)
        learner = lp[pos - 1, torch.tensor(t.token_ids)[pos]]
        sampled = torch.tensor([x for x, m in zip(t.logprobs, t.action_mask, strict=True) if m])
        assert (learner - sampled).abs().max() < 0.15  # what the truncated importance weight corrects


def test_bad_generation_weights_name_the_choices(tiny_model_dir: Any) -> None:
    with pytest.raises(ConfigError, match="generation_weights='int4' is not one of 'float', 'int8'"):
        HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8), generation_weights="int4")

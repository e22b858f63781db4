"""HFPolicy: LoRA wrapping, the merged generation copy, the reference context, adapter save/load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from sandgym.agents.hf import HFPolicy, LoraSpec
from sandgym.errors import ConfigError, ModelNotAvailableError

IDS = torch.tensor([[5, 17, 42, 99, 7, 3]])


def logits(model: Any) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(input_ids=IDS).logits.float()


def perturb(policy: HFPolicy, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in policy.model.named_parameters():
            if "lora_B" in n:
                p.add_(torch.randn(p.shape, generator=g) * 0.05)


@pytest.fixture()
def policy(tiny_model_dir: Path) -> HFPolicy:
    return HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0))


def test_defaults_and_lora_targets(policy: HFPolicy) -> None:
    assert policy.device.type == "cpu" and next(policy.model.parameters()).dtype == torch.float32
    targets = set(policy.model.peft_config["default"].target_modules)
    assert targets == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    trainable = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert LoraSpec().targets_for("gpt2") == ["c_attn", "c_proj", "c_fc"]
    assert LoraSpec().targets_for("some_new_arch") == "all-linear"


def test_merged_copy_tracks_adapter_updates(policy: HFPolicy) -> None:
    perturb(policy, 1)
    torch.testing.assert_close(logits(policy.generation_model()), logits(policy.model), atol=1e-5, rtol=0)
    before = logits(policy.generation_model())
    perturb(policy, 2)  # an optimizer step: in-place update of the LoRA weights
    after = logits(policy.generation_model())
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, logits(policy.model), atol=1e-5, rtol=0)
    # the copy shares the frozen tensors instead of duplicating them
    emb = policy.model.get_base_model().model.embed_tokens.weight
    assert policy.generation_model().model.embed_tokens.weight.data_ptr() == emb.data_ptr()


def test_reference_disables_adapter(policy: HFPolicy, tiny_model_dir: Path) -> None:
    perturb(policy, 3)
    plain = HFPolicy(str(tiny_model_dir), lora=None)
    with policy.reference() as ref:
        torch.testing.assert_close(logits(ref), logits(plain.model), atol=1e-6, rtol=0)
    assert not torch.allclose(logits(policy.model), logits(plain.model))


def test_adapter_save_and_load(policy: HFPolicy, tiny_model_dir: Path, tmp_path: Path) -> None:
    perturb(policy, 4)
    out = policy.save_adapter(tmp_path / "adapter")
    assert (out / "adapter_config.json").is_file()
    loaded = HFPolicy(str(tiny_model_dir), adapter=out)
    torch.testing.assert_close(logits(loaded.model), logits(policy.model), atol=1e-6, rtol=0)
    assert any(p.requires_grad for p in loaded.model.parameters())  # loadable for further training


def test_errors_name_the_fix(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailableError, match="adapter_config.json"):
        HFPolicy(str(tiny_model_dir), adapter=tmp_path)
    with pytest.raises(ConfigError, match="r=0"):
        LoraSpec(r=0)
    with pytest.raises(ConfigError, match="float32"):
        HFPolicy(str(tiny_model_dir), dtype="float33")
    with pytest.raises(ConfigError, match="lora=LoraSpec"):
        HFPolicy(str(tiny_model_dir), lora=None).save_adapter(tmp_path / "x")


def test_length_buckets_keep_documents_and_short_prompts_apart() -> None:
    from sandgym.agents.sampler import length_buckets

    lengths = [8000, 300, 350, 7900, 2000, 1200]
    assert [[lengths[i] for i in b] for b in length_buckets(lengths)] == [[300, 350, 1200], [2000], [7900, 8000]]
    assert length_buckets(lengths, slack=-1) == [sorted(range(6), key=lambda i: lengths[i])]  # naive: one batch
    assert length_buckets([100, 130, 900]) == [[0, 1, 2]]  # an ordinary spread stays one batch
    assert length_buckets([]) == []


def test_generate_samples_short_requests_first_without_padding_to_the_long_one(policy: HFPolicy) -> None:
    """Length-aware batching: short prompts are prefilled at their own width and finish (``on_done``) before the
    long prompt's batch starts; results come back in request order, each row from its own generator."""
    from sandgym.agents.policy import GenerationRequest, SamplingParams

    long, short = tuple(5 + i % 50 for i in range(1500)), tuple(range(5, 45))
    requests = [GenerationRequest(key=k, messages=(), observation="", info={}, max_new_tokens=4, token_ids=ids,
                                  generator=torch.Generator().manual_seed(k))
                for k, ids in enumerate([long, short, short[:-3]])]
    widths: list[int] = []
    hook = policy.generation_model().register_forward_pre_hook(
        lambda _m, _a, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    finished: list[int] = []
    out = policy.generate(requests, SamplingParams(temperature=1.0, stop_strings=()),
                          on_done=lambda i, _g: finished.append(i))
    hook.remove()
    assert all(1 <= len(g.token_ids) <= 4 for g in out) and len(out) == 3
    assert max(widths[:4]) == 40 and 1500 in widths  # the short batch never padded to 1500 tokens
    assert sorted(finished[:2]) == [1, 2] and finished[2] == 0
    policy.pad_slack = -1  # naive: one batch, padded to the longest
    widths.clear()
    hook = policy.generation_model().register_forward_pre_hook(
        lambda _m, _a, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    policy.kv_reuse_mb = 0
    policy.generate(requests, SamplingParams(temperature=1.0, stop_strings=()))
    hook.remove()
    assert widths[0] == 1500

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

import pytest
import torch

from sandgym.train import step as step_mod
from sandgym.train.config import AlgorithmConfig
from sandgym.train.step import Sample, learner_update


@pytest.fixture()
def policy(tiny_model_dir):
    from sandgym.agents.hf import HFPolicy, LoraSpec

    return HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0))


def _samples():
    ids = tuple(range(10, 30))
    mask = tuple([0] * 8 + [1] * 12)
    return [
        Sample(ids, mask, tuple([0.0] * 20), tuple(1.0 * m for m in mask)),
        Sample(ids[::-1], mask, tuple([0.0] * 20), tuple(-1.0 * m for m in mask)),
    ]


def _update(policy, algo, samples=None):
    model = policy.model
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    return learner_update(model, opt, samples or _samples(), algo, pad_id=0, temperature=1.0, micro_batch=1,
                          max_grad_norm=1.0, norm_len=32)


def test_adapter_changes_and_base_does_not(policy):
    named = dict(policy.model.named_parameters())
    before = {k: v.detach().clone() for k, v in named.items()}
    _update(policy, AlgorithmConfig())
    changed = {k for k, v in named.items() if not torch.equal(v.detach(), before[k])}
    assert changed and all("lora_" in k for k in changed)
    assert any("lora_B" in k for k in changed)


def test_beta_zero_skips_the_reference_pass(policy, monkeypatch):
    calls = []
    real = step_mod._ref_logprobs
    monkeypatch.setattr(step_mod, "_ref_logprobs", lambda *a, **k: calls.append(1) or real(*a, **k))
    _update(policy, AlgorithmConfig(beta=0.0))
    assert calls == []
    stats = _update(policy, AlgorithmConfig(beta=0.1))
    assert calls == [1]
    assert stats.kl > 0  # the adapter moved away from the reference in the first update


def test_masked_tokens_get_no_gradient_through_the_model(policy):
    # Changing only tokens under mask 0 after the last sampled token must not change the loss gradient.
    ids = tuple(range(10, 30))
    mask = tuple([0] * 8 + [1] * 6 + [0] * 6)
    a = Sample(ids, mask, tuple([0.0] * 20), tuple(float(m) for m in mask))
    b = Sample(ids[:14] + tuple(range(40, 46)), mask, tuple([0.0] * 20), tuple(float(m) for m in mask))
    grads = []
    for s in (a, b):
        policy.model.zero_grad()
        batch = step_mod.collate([s], pad_id=0)
        lp = step_mod.forward_logprobs(policy.model, batch, 1.0)
        (-(lp * batch.mask * batch.advantages).sum()).backward()
        grads.append([p.grad.clone() for p in policy.model.parameters() if p.requires_grad and p.grad is not None])
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(*grads, strict=True))


def test_multiple_epochs_clip(policy):
    stats = _update(policy, AlgorithmConfig(epochs=3, clip_low=0.01, clip_high=0.01))
    assert stats.clip_frac > 0

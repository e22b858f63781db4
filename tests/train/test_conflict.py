"""Per-domain gradients in the learner: the cosine between domains, and PCGrad projection."""

import pytest
import torch

from sandgym.train.config import AlgorithmConfig
from sandgym.train.conflict import pairwise_cosines, pcgrad
from sandgym.train.step import Sample, learner_update


def test_pcgrad_removes_only_the_conflicting_component():
    a, b = torch.tensor([1.0, 1.0]), torch.tensor([-1.0, 0.5])
    total, n = pcgrad([a, b])
    # a . b = -0.5 < 0: a loses its component along b, and b along a
    a_p = a - (-0.5 / 1.25) * b
    b_p = b - (-0.5 / 2.0) * a
    assert n == 2 and torch.allclose(total, a_p + b_p)
    assert float(a_p @ b) == pytest.approx(0.0, abs=1e-6)
    c = torch.tensor([1.0, 0.0])
    total, n = pcgrad([a, c])  # no conflict: the plain sum
    assert n == 0 and torch.equal(total, a + c)
    assert pairwise_cosines({"x": a, "y": -a, "z": c}) == pytest.approx(
        {"x|y": -1.0, "x|z": 2 ** -0.5, "y|z": -(2 ** -0.5)})


def _samples(sign_b: float):
    ids = tuple(range(10, 30))
    mask = tuple([0] * 8 + [1] * 12)
    return [Sample(ids, mask, (0.0,) * 20, tuple(1.0 * m for m in mask), "coding"),
            Sample(ids, mask, (0.0,) * 20, tuple(sign_b * m for m in mask), "long_context")]


def _run(tiny_model_dir, mode: str, samples):
    from sandgym.agents.hf import HFPolicy, LoraSpec

    torch.manual_seed(0)
    policy = HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0))
    with torch.no_grad():  # lora_B starts at zero; give it values so every LoRA weight has a gradient
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    model = policy.model
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    stats = learner_update(model, opt, samples, AlgorithmConfig(gradient_conflict=mode), pad_id=0, temperature=1.0,
                           micro_batch=1, max_grad_norm=1e9, norm_len=32)
    return stats, {k: v.detach().clone() for k, v in model.named_parameters() if "lora_" in k}


def test_measuring_does_not_change_the_update(tiny_model_dir):
    off, p_off = _run(tiny_model_dir, "off", _samples(0.5))
    measured, p_measured = _run(tiny_model_dir, "measure", _samples(0.5))
    assert off.grad_cosine is None and measured.grad_cosine == pytest.approx(1.0, abs=1e-4)  # same sequence, same sign
    assert all(torch.allclose(p_off[k], p_measured[k], atol=1e-6) for k in p_off)


def test_pcgrad_cancels_exactly_opposed_domains(tiny_model_dir):
    measured, _ = _run(tiny_model_dir, "measure", _samples(-1.0))
    projected, _ = _run(tiny_model_dir, "pcgrad", _samples(-1.0))
    assert measured.grad_cosine == pytest.approx(-1.0, abs=1e-4) and measured.pcgrad_projections == 0
    assert projected.pcgrad_projections == 2 and projected.grad_norm == pytest.approx(0.0, abs=1e-6)


def test_combine_writes_the_projected_sum_back_into_each_parameter():
    from sandgym.train.step import _combine

    params = [torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)]
    grads = {"a": torch.tensor([1.0, 1.0, 0.0]), "b": torch.tensor([-1.0, 0.5, 2.0])}
    stats = _combine(params, grads, "pcgrad")
    expected, n = pcgrad([grads["a"], grads["b"]])
    assert n == stats.projections == 2
    assert torch.allclose(torch.cat([p.grad.reshape(-1) for p in params]), expected)
    assert stats.min == stats.mean == pytest.approx(pairwise_cosines(grads)["a|b"])


def test_one_domain_is_not_measured(tiny_model_dir):
    samples = [Sample(s.token_ids, s.action_mask, s.sampling_logprobs, s.advantages, "coding") for s in _samples(0.5)]
    stats, _ = _run(tiny_model_dir, "pcgrad", samples)
    assert stats.grad_cosine is None and stats.pcgrad_projections == 0
    from sandgym.train.metrics import loss_metrics

    assert stats.domains == 1 and loss_metrics(stats)["losses/trained_domains"] == 1.0  # why no cosine is logged
    both, _ = _run(tiny_model_dir, "measure", _samples(0.5))
    assert both.domains == 2 and loss_metrics(both)["losses/trained_domains"] == 2.0

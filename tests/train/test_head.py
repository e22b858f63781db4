"""The learner's log-probs from hidden states and a blocked output head equal the plain full-logits path."""

import dataclasses

import pytest
import torch

from sandgym.train import head as head_mod
from sandgym.train.loss import token_logprobs
from sandgym.train.step import Sample, collate, forward_logprobs


@pytest.fixture()
def policy(tiny_model_dir):
    from sandgym.agents.hf import HFPolicy, LoraSpec

    p = HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0))
    with torch.no_grad():  # a non-zero adapter, so gradients reach lora_A too
        for n, t in p.model.named_parameters():
            if "lora_B" in n:
                t.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(n)))
    return p


def _batch(rows: int = 3, first: int = 7, length: int = 40):
    g = torch.Generator().manual_seed(1)
    samples = []
    for i in range(rows):
        ids = tuple(int(x) for x in torch.randint(10, 200, (length - 3 * i,), generator=g))
        mask = tuple([0] * first + [1] * (len(ids) - first))
        samples.append(Sample(ids, mask, (0.0,) * len(ids), tuple(float((-1) ** i) * m for m in mask)))
    return collate(samples, pad_id=0)


def _plain(monkeypatch):
    """forward_logprobs as it was: the model's own logits, log-softmax per row."""
    import contextlib

    monkeypatch.setattr("sandgym.train.step.hidden_states_out", lambda _m: contextlib.nullcontext(None))


def _run(model, batch, temperature):
    model.zero_grad()
    lp = forward_logprobs(model, batch, temperature)
    (lp * batch.mask * batch.advantages).sum().backward()
    return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize(("shared", "block", "temperature"), [(False, 1024, 1.0), (False, 5, 0.7), (True, 4, 1.0)])
def test_blocked_head_matches_the_full_logits(policy, monkeypatch, shared, block, temperature):
    model = policy.model.train()
    batch = _batch()
    if not shared:
        batch = dataclasses.replace(batch, shared_prefix=0)
    monkeypatch.setattr(head_mod, "BLOCK_POSITIONS", block)
    calls = []
    real = head_mod.head_logprobs
    monkeypatch.setattr("sandgym.train.step.head_logprobs", lambda *a, **k: calls.append(1) or real(*a, **k))
    lp_h, g_h = _run(model, batch, temperature)
    assert calls == [1]  # the blocked path ran
    monkeypatch.undo()
    _plain(monkeypatch)
    lp_f, g_f = _run(model, batch, temperature)
    torch.testing.assert_close(lp_h * batch.mask, lp_f * batch.mask, atol=1e-5, rtol=1e-4)
    assert any(g.abs().sum() > 0 for g in g_f.values())
    for name in g_f:
        assert (g_h[name] - g_f[name]).norm() <= 1e-4 * g_f[name].norm() + 1e-8, name
    assert isinstance(model.get_base_model().lm_head, torch.nn.Linear)  # the head is back in place


def test_a_model_whose_logits_are_not_its_head_keeps_the_plain_path(policy):
    """A soft cap after the head (as Gemma 2's ``final_logit_softcapping``) fails the probe: the log-probs are the
    true ones."""
    model = policy.model.eval()
    lm = model.get_base_model()

    def capped(_module, _args, out):
        out.logits = 3.0 * torch.tanh(out.logits / 3.0)
        return out

    handle = lm.register_forward_hook(capped)
    try:
        batch = dataclasses.replace(_batch(rows=1), shared_prefix=0)
        with torch.no_grad():
            lp = forward_logprobs(model, batch, 1.0)
            logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
        assert getattr(lm, head_mod._PROBED) is False
        torch.testing.assert_close(lp * batch.mask, token_logprobs(logits, batch.targets) * batch.mask)
    finally:
        handle.remove()


def test_head_logprobs_never_holds_every_position_logits(monkeypatch):
    """Each block's logits are at most ``block`` positions, with gradients too (recomputed, not kept)."""
    head = torch.nn.Linear(8, 50)
    hidden = torch.randn(2, 23, 8, requires_grad=True)
    targets = torch.randint(0, 50, (2, 23))
    widths = []
    real = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear", lambda x, *a: widths.append(x.shape[0]) or real(x, *a))
    lp = head_mod.head_logprobs(head, hidden, targets, 1.0, block=5)
    lp.sum().backward()
    assert max(widths) == 5 and len(widths) == 2 * 5 * 2  # 5 blocks a row, each again in the backward pass
    ref = torch.log_softmax(real(hidden, head.weight, head.bias), -1).gather(-1, targets[..., None])[..., 0]
    torch.testing.assert_close(lp, ref)

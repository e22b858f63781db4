import pytest
import torch

from sandgym.train.advantages import compute_advantages, grpo_advantages, per_step_returns, rloo_advantages
from sandgym.train.loss import aggregate, policy_loss, token_logprobs


def test_grpo_groups_are_independent():
    r = torch.tensor([1.0, 0.0, 5.0, 5.0])
    g = torch.tensor([0, 0, 1, 1])
    adv = grpo_advantages(r, g)
    assert adv[:2].tolist() == pytest.approx([1.0, -1.0], abs=1e-4)
    assert adv[2:].tolist() == [0.0, 0.0]  # equal rewards: no signal


def test_dr_grpo_keeps_reward_scale():
    r = torch.tensor([2.0, 0.0, 0.0, 0.0])
    adv = compute_advantages("dr_grpo", r, torch.zeros(4, dtype=torch.long))
    assert adv.tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])


def test_rloo_matches_leave_one_out_definition():
    r = torch.tensor([3.0, 1.0, 2.0, 6.0])
    g = torch.zeros(4, dtype=torch.long)
    expected = [r[i] - (r.sum() - r[i]) / 3 for i in range(4)]
    assert rloo_advantages(r, g).tolist() == pytest.approx([float(x) for x in expected])


def test_unknown_estimator_names_choices():
    with pytest.raises(ValueError, match="grpo"):
        compute_advantages("ppo", torch.zeros(2), torch.zeros(2, dtype=torch.long))


def test_per_step_returns():
    assert per_step_returns([0.0, 1.0, 0.0]) == [1.0, 1.0, 0.0]


def test_token_logprobs_equals_log_softmax_gather():
    logits = torch.randn(2, 5, 11)
    targets = torch.randint(0, 11, (2, 5))
    ref = torch.log_softmax(logits / 0.7, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(token_logprobs(logits, targets, 0.7), ref, atol=1e-5)


def test_masked_tokens_get_zero_gradient():
    new = torch.zeros(1, 4, requires_grad=True)
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    adv = torch.ones(1, 4)
    parts = policy_loss(new, new.detach(), new.detach(), adv, mask)
    parts.loss.backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 3] == 0
    assert new.grad[0, 1] < 0 and new.grad[0, 2] < 0  # positive advantage pushes log-prob up


def test_ratio_is_clipped_for_positive_advantage():
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[2.0, 1.0]])).requires_grad_(True)  # ratio 2 on token 0
    parts = policy_loss(new, old, old, torch.ones(1, 2), torch.ones(1, 2), clip_high=0.2)
    parts.loss.backward()
    assert new.grad[0, 0] == 0  # clipped: no gradient beyond 1 + clip_high
    assert parts.clip_frac == pytest.approx(0.5)


def test_truncated_importance_weight_caps_stale_samples():
    old = torch.zeros(1, 2)
    sampling = torch.tensor([[-5.0, 0.0]])  # the generator thought token 0 was much less likely
    parts = policy_loss(old.clone().requires_grad_(True), old, sampling, torch.ones(1, 2), torch.ones(1, 2), tis_cap=2.0)
    assert parts.tis_mean == pytest.approx((2.0 + 1.0) / 2)
    assert parts.tis_max == pytest.approx(float(torch.exp(torch.tensor(5.0))))  # before the cap
    assert parts.tis_capped_frac == pytest.approx(0.5)


def test_kl_is_zero_when_policy_equals_reference_and_positive_otherwise():
    lp = torch.log(torch.tensor([[0.5, 0.25]]))
    same = policy_loss(lp, lp, lp, torch.zeros(1, 2), torch.ones(1, 2), ref_logp=lp, beta=0.1)
    assert same.kl == pytest.approx(0.0, abs=1e-7)
    other = policy_loss(lp, lp, lp, torch.zeros(1, 2), torch.ones(1, 2), ref_logp=lp - 0.5, beta=0.1)
    assert other.kl > 0


def test_aggregations_differ_as_documented():
    per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [3.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    assert float(aggregate(per_token, mask, "token_mean")) == pytest.approx(7 / 5)
    assert float(aggregate(per_token, mask, "seq_mean_token_mean")) == pytest.approx((1 + 3) / 2)
    assert float(aggregate(per_token, mask, "seq_mean_token_sum_norm", norm_len=4)) == pytest.approx((4 / 4 + 3 / 4) / 2)

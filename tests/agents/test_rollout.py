"""The rollout engine with a tiny random model: exact masks, log-probs, concatenation, budgets, determinism."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from sandgym.agents.hf import HFPolicy, LoraSpec
from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.rollout import RolloutConfig, RolloutEngine, rollout
from sandgym.agents.trajectory import Trajectory
from sandgym.errors import ConfigError
from tests.agents.fakes import EchoEnv, FakeTask, OkAgent

TASKS = [FakeTask("a", turns_needed=3), FakeTask("b", turns_needed=2)]
CFG = RolloutConfig(max_new_tokens=48, max_total_tokens=600, max_turns=4, seed=7)


@pytest.fixture(scope="module")
def policy(tiny_model_dir: Any) -> HFPolicy:
    pol = HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0))
    with torch.no_grad():  # a non-zero adapter, so the merged generation copy is really exercised
        for n, p in pol.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(n)))
    return pol


@pytest.fixture(scope="module")
def trajs(policy: HFPolicy) -> list[Trajectory]:
    return rollout(policy, EchoEnv, TASKS, group_size=4, config=CFG)


def recompute_logprobs(model: Any, traj: Trajectory, temperature: float) -> torch.Tensor:
    ids = torch.tensor([traj.token_ids])
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    lp = torch.log_softmax(logits / temperature, dim=-1)
    pos = torch.nonzero(torch.tensor(traj.action_mask)).squeeze(1)
    return lp[pos - 1, ids[0, pos]]


def test_groups_ordered_and_complete(trajs: list[Trajectory]) -> None:
    assert [(t.group_id, t.sample_idx) for t in trajs] == [(g, s) for g in range(2) for s in range(4)]
    assert {t.task_id for t in trajs[:4]} == {"a"} and all(t.domain == "fake" for t in trajs)
    assert all(t.terminated and not t.truncated for t in trajs)
    assert [t.num_turns for t in trajs] == [3] * 4 + [2] * 4
    assert all(t.reward_components == {"correct@v1": t.reward} for t in trajs)
    assert all(t.runtime == {"wall_s": 0.01} for t in trajs)  # non-numeric runtime values are dropped


def test_mask_covers_exactly_sampled_tokens(trajs: list[Trajectory]) -> None:
    for t in trajs:
        pos = 0
        for turn in t.turns:
            assert t.action_mask[pos: pos + len(turn.prompt_token_ids)] == (0,) * len(turn.prompt_token_ids)
            pos += len(turn.prompt_token_ids)
            n = len(turn.completion_token_ids)
            assert t.action_mask[pos: pos + n] == (1,) * n
            assert t.logprobs[pos: pos + n] == turn.completion_logprobs
            pos += n
        assert pos == len(t.token_ids)
        assert t.num_generated_tokens == sum(len(x.completion_token_ids) for x in t.turns) > 0
        assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.action_mask, strict=True) if not m)


def test_multiturn_tokens_are_concatenation_of_parts(trajs: list[Trajectory], policy: HFPolicy) -> None:
    tok = policy.tokenizer
    for t in trajs:
        concat = tuple(i for turn in t.turns for i in (*turn.prompt_token_ids, *turn.completion_token_ids))
        assert concat == t.token_ids
        first = tok.decode(list(t.turns[0].prompt_token_ids))
        assert first.startswith("<|im_start|>system\nYou are a test agent") and first.endswith("<|im_start|>assistant\n")
        for prev, turn in zip(t.turns, t.turns[1:], strict=False):
            delta = tok.decode(list(turn.prompt_token_ids))
            assert f"<tool_response>\n{prev.observation}\n</tool_response>" in delta
            assert delta.endswith("<|im_end|>\n<|im_start|>assistant\n")
            ended = prev.completion_token_ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")
            assert delta.startswith("\n<|im_start|>user") if ended else delta.startswith("<|im_end|>")


@pytest.mark.parametrize("merged", [True, False])
def test_logprobs_match_forward_pass(policy: HFPolicy, merged: bool) -> None:
    policy.merge_for_generation = merged
    try:
        cfg = RolloutConfig(max_new_tokens=32, max_total_tokens=400, max_turns=3, temperature=0.7, seed=3)
        out = rollout(policy, EchoEnv, TASKS[:1], group_size=3, config=cfg)
    finally:
        policy.merge_for_generation = True
    for t in out:
        again = recompute_logprobs(policy.model, t, 0.7)
        sampled = torch.tensor([lp for lp, m in zip(t.logprobs, t.action_mask, strict=True) if m])
        torch.testing.assert_close(again, sampled, atol=1e-4, rtol=0)


def test_turns_reuse_the_episodes_kv_cache(policy: HFPolicy, trajs: list[Trajectory]) -> None:
    """Later turns prefill only their new tokens; the episodes are the ones a full re-prefill samples."""
    fed: list[int] = []
    model = policy.generation_model()
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: fed.append(kw["input_ids"].numel()), with_kwargs=True)
    try:
        reused = rollout(policy, EchoEnv, TASKS, group_size=4, config=CFG)
        reused_tokens, fed[:] = sum(fed), []
        policy.kv_reuse_mb = 0
        full = rollout(policy, EchoEnv, TASKS, group_size=4, config=CFG)
        full_tokens = sum(fed)
    finally:
        hook.remove()
        del policy.kv_reuse_mb  # back to the class default
    assert [t.token_ids for t in reused] == [t.token_ids for t in full] == [t.token_ids for t in trajs]
    assert [lp for t in reused for lp in t.logprobs] == pytest.approx([lp for t in full for lp in t.logprobs], abs=1e-4)
    assert max(t.num_turns for t in reused) == 3
    assert reused_tokens < 0.8 * full_tokens, (reused_tokens, full_tokens)
    assert policy._kv == {}  # every episode's cache is freed when it ends


def test_an_episode_frees_its_kv_cache_when_it_ends(policy: HFPolicy, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[Any] = []
    gen, end = policy.generate, policy.end_episode
    monkeypatch.setattr(policy, "generate", lambda *a, **k: (events.append("gen"), gen(*a, **k))[1])
    monkeypatch.setattr(policy, "end_episode", lambda key: (events.append(("end", key, key in policy._kv)), end(key))[1])
    rollout(policy, EchoEnv, TASKS, group_size=4, config=CFG)  # task b ends a turn before task a
    last_round = max(i for i, e in enumerate(events) if e == "gen")
    early = [e for e in events[:last_round] if e != "gen"]
    assert early and any(had for _, _, had in early)  # freed while other episodes were still generating
    assert policy._kv == {}


def test_top_p_keeps_untruncated_tempered_logprobs(policy: HFPolicy) -> None:
    cfg = RolloutConfig(max_new_tokens=16, max_total_tokens=300, max_turns=2, temperature=1.3, top_p=0.5, seed=5)
    for t in rollout(policy, EchoEnv, TASKS[:1], group_size=2, config=cfg):
        sampled = torch.tensor([lp for lp, m in zip(t.logprobs, t.action_mask, strict=True) if m])
        torch.testing.assert_close(recompute_logprobs(policy.model, t, 1.3), sampled, atol=1e-4, rtol=0)


def test_deterministic_under_seed(policy: HFPolicy, trajs: list[Trajectory]) -> None:
    again = rollout(policy, EchoEnv, TASKS, group_size=4, config=CFG)
    assert [t.token_ids for t in again] == [t.token_ids for t in trajs]
    flat = [lp for t in again for lp in t.logprobs]
    assert flat == pytest.approx([lp for t in trajs for lp in t.logprobs], abs=1e-5)
    other = rollout(policy, EchoEnv, TASKS, group_size=4, config=RolloutConfig(**{**CFG.__dict__, "seed": 8}))
    assert [t.token_ids for t in other] != [t.token_ids for t in trajs]
    # a sample does not depend on the other episodes in its batch
    alone = rollout(policy, EchoEnv, TASKS[1:], group_size=4, config=CFG, first_group_id=1)
    assert [t.token_ids for t in alone] == [t.token_ids for t in trajs[4:]]


def test_greedy_is_repeatable(policy: HFPolicy) -> None:
    cfg = RolloutConfig(max_new_tokens=8, max_total_tokens=300, max_turns=2, temperature=0.0, seed=1)
    a = rollout(policy, EchoEnv, TASKS[:1], group_size=2, config=cfg)
    assert a[0].token_ids == a[1].token_ids


@pytest.mark.parametrize(
    ("cfg", "turns_needed", "reason"),
    [
        (RolloutConfig(max_new_tokens=1, max_total_tokens=600, max_turns=50, seed=2, temperature=2.0), 50, "max_new_tokens"),
        (RolloutConfig(max_new_tokens=64, max_total_tokens=600, max_turns=2, seed=2), 50, "max_turns"),
        (RolloutConfig(max_new_tokens=64, max_total_tokens=90, max_turns=50, seed=2), 50, "max_total_tokens"),
    ],
)
def test_budgets_set_truncation_reason(policy: HFPolicy, cfg: RolloutConfig, turns_needed: int, reason: str) -> None:
    out = rollout(policy, EchoEnv, [FakeTask("long", turns_needed)], group_size=4, config=cfg)
    assert all(t.truncated and not t.terminated for t in out)
    assert {t.truncation_reason for t in out} == {reason}
    assert all(t.failure_mode == "budget" and t.reward == 0.0 for t in out)
    for t in out:
        assert len(t.token_ids) <= cfg.max_total_tokens
        assert t.num_turns <= cfg.max_turns
        assert all(len(x.completion_token_ids) <= cfg.max_new_tokens for x in t.turns)
    if reason == "max_new_tokens":
        assert all(t.turns[-1].truncated for t in out)
    if reason == "max_turns":
        assert all(t.num_turns == 2 for t in out)


def test_truncated_turn_can_continue(policy: HFPolicy) -> None:
    cfg = RolloutConfig(max_new_tokens=1, max_total_tokens=600, max_turns=3, seed=2, temperature=2.0, truncated_turn="continue")
    out = rollout(policy, EchoEnv, [FakeTask("c", 3)], group_size=4, config=cfg)
    assert all(t.terminated and not t.truncated and t.num_turns == 3 for t in out)
    cut = [sum(x.truncated for x in t.turns) for t in out]
    assert cut == [t.metadata["truncated_turns"] for t in out] and sum(cut) > 0


def test_prompt_longer_than_budget_is_flagged(policy: HFPolicy) -> None:
    out = rollout(policy, EchoEnv, TASKS[:1], config=RolloutConfig(max_total_tokens=5))
    assert out[0].truncation_reason == "max_total_tokens" and out[0].num_generated_tokens == 0
    assert out[0].num_tokens > 5  # the prompt is kept visible, not silently cut


def test_env_truncation_is_reported() -> None:
    out = rollout(ScriptedPolicy(OkAgent), lambda: EchoEnv(truncate_after=2), [FakeTask("t", 9)], config=CFG)
    assert out[0].truncated and out[0].truncation_reason == "env" and out[0].num_turns == 2


def test_scripted_and_model_policies_share_the_engine(policy: HFPolicy) -> None:
    text_only = rollout(ScriptedPolicy(OkAgent), EchoEnv, TASKS, group_size=2, config=CFG)
    assert all(t.success and t.reward == 1.0 and not t.has_tokens for t in text_only)
    assert text_only[0].turns[0].text.startswith("ok 1 <tool_call>")
    assert text_only[0].turns[0].observation == "result 1: 61 chars"
    with_ids = rollout(ScriptedPolicy(OkAgent, tokenizer=policy.tokenizer), EchoEnv, TASKS, group_size=2, config=CFG)
    t = with_ids[0]
    assert t.success and t.has_tokens and t.num_turns == 3
    assert policy.tokenizer.decode([i for i, m in zip(t.token_ids, t.action_mask, strict=True) if m]).count("<|im_end|>") == 3
    assert all(lp == 0.0 for lp in t.logprobs)


def test_infra_failure_does_not_crash_the_batch() -> None:
    EchoEnv.closed = 0
    out = rollout(ScriptedPolicy(OkAgent), lambda: EchoEnv(fail_on_step=2), TASKS, group_size=2, config=CFG)
    assert all(t.infra_failure and t.failure_mode == "infra" and not t.success for t in out)
    assert all("sandbox died" in t.metadata["infra_error"] for t in out)
    assert all(t.num_turns == 2 for t in out)
    assert EchoEnv.closed == 4


def test_env_steps_overlap() -> None:
    cfg = RolloutConfig(max_turns=3, env_workers=8)
    eng = RolloutEngine(ScriptedPolicy(OkAgent), lambda: EchoEnv(step_delay=0.2), cfg)
    out = eng.run([FakeTask(str(i), 2) for i in range(8)])
    assert all(t.success for t in out)
    assert eng.last_stats is not None and eng.last_stats.wall_s < 8 * 2 * 0.2 / 2  # serial would take 3.2 s
    assert eng.last_stats.as_metrics()["rollout/episodes"] == 8.0


def test_episodes_whose_resets_finish_apart_share_one_generation_round() -> None:
    """Resets finishing 0-60 ms apart: the batch window waits for them, so each turn is one round of all 8
    episodes instead of several part-full rounds (each decoding in lock-step, at nearly a full round's cost)."""
    tasks = [FakeTask(str(i), 2) for i in range(8)]
    eng = RolloutEngine(ScriptedPolicy(OkAgent), lambda: EchoEnv(reset_delay=0.02),
                        RolloutConfig(max_turns=3, batch_window_s=1.0))
    assert all(t.success for t in eng.run(tasks))
    assert eng.last_stats is not None and eng.last_stats.generation_rounds == 2  # two turns, one round each


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match="max_turns=0"):
        RolloutConfig(max_turns=0)
    with pytest.raises(ConfigError, match="top_p"):
        RolloutConfig(top_p=0.0)
    with pytest.raises(ConfigError, match="batch_window_s=-1"):
        RolloutConfig(batch_window_s=-1)

"""``evidence_norepeat@v1``: ``evidence@v1``'s credit minus ``REPEAT_COST`` per call that repeats one already run in
the episode (same tool, arguments and output). Motivated by a measured failure: after RL with ``evidence@v1`` the
policy found every evidence line of multihop tasks, then re-ran the same grep until its turn budget ran out."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

import pytest

from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.rollout import RolloutConfig, rollout
from sandgym.agents.scripted import call
from sandgym.envs.rewards import GOLDEN_DIR, INTERMEDIATE_DEFAULT_WEIGHT, REWARDS, check_golden
from sandgym.envs.tool_env import ToolEnv
from sandgym.envs.turn_terms import (
    REPEAT_COST,
    TURN_TERMS,
    Turn,
    TurnTermName,
    as_turn,
    evidence_norepeat_turn_v1,
    repeated_calls,
    run_turns,
)
from sandgym.tasks.suites.long_context import make_family
from sandgym.tasks.task import Task
from sandgym.train.advantages import turn_rewards
from sandgym.train.config import load_config
from sandgym.train.domains import DomainMixer
from sandgym.train.metrics import step_metrics
from tests.envs.test_evidence_term import play

W = INTERMEDIATE_DEFAULT_WEIGHT
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOREPEAT = TURN_TERMS["evidence_norepeat@v1"].credit
EVIDENCE = TURN_TERMS["evidence@v1"].credit

# ---- a small document (the golden cases' multihop chain auth -> billing -> mailer, answer flint) --------------------
DOC = "logs/notes.log"
LINES = [f"2024-05-01T00:00:{k:02d}Z INFO auth: handled request in {k}ms (status 200)" for k in range(1, 31)]
LINES[4] = "NOTE: service auth forwards all of its requests to service billing."
LINES[11] = "NOTE: service mailer stores its data in database flint."
LINES[17] = "NOTE: service billing forwards all of its requests to service mailer."
META = {"placement": "file", "document": DOC, "chain": ["auth", "billing", "mailer"], "evidence": [5, 12, 18]}
FILES = {DOC: "\n".join(LINES) + "\n"}


def grep(pattern: str, shown: list[int], **extra: Any) -> tuple[str, dict[str, Any], str]:
    args = {"pattern": pattern, "path": DOC, **extra}
    return "grep", args, "\n".join(f"{DOC}:{n}:{LINES[n - 1]}" for n in shown) or f"[no matches for {pattern!r}]"


AUTH = grep("service auth forwards", [5])
BILLING = grep("service billing forwards", [18])
MAILER = grep("service mailer stores", [12])
SUBMIT = ("submit", {"answer": "flint"}, "Submitted.")


def turn(*calls: tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    return {"text": "", "calls": [list(c) for c in calls]}


def credits(*turns: dict[str, Any], term=NOREPEAT, meta=META) -> list[float]:
    return run_turns(term, list(turns), meta, FILES)


# ---- the pure term ---------------------------------------------------------------------------------------------------
def test_a_chain_found_without_repeats_earns_what_evidence_v1_pays() -> None:
    turns = [turn(AUTH), turn(BILLING), turn(MAILER), turn(SUBMIT)]
    assert credits(*turns) == credits(*turns, term=EVIDENCE) == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0.0])


def test_repeating_an_earlier_identical_grep_costs_repeat_cost_each_time() -> None:
    got = credits(turn(AUTH), turn(BILLING), turn(MAILER), turn(AUTH), turn(AUTH), turn(MAILER))
    assert got == pytest.approx([1 / 3, 1 / 3, 1 / 3, -REPEAT_COST, -REPEAT_COST, -REPEAT_COST])
    # a turn that repeats a call and finds a new line in another nets the two
    assert credits(turn(AUTH), turn(AUTH, BILLING)) == pytest.approx([1 / 3, 1 / 3 - REPEAT_COST])


def test_same_arguments_with_another_output_or_other_arguments_cost_nothing() -> None:
    rewritten = ("grep", dict(AUTH[1]), f"{DOC}:5:NOTE: service auth forwards all of its requests to service x.")
    other_path = ("grep", {**AUTH[1], "path": "./" + DOC}, AUTH[2])
    other_tool = ("read_file", dict(AUTH[1]), AUTH[2])
    assert credits(turn(AUTH), turn(rewritten), turn(other_path), turn(other_tool)) == pytest.approx(
        [1 / 3, 0.0, 0.0, 0.0])
    # the arguments compare canonically: another key order is the same call
    reordered = ("grep", dict(reversed(list(AUTH[1].items()))), AUTH[2])
    assert list(reordered[1]) != list(AUTH[1])
    assert credits(turn(AUTH), turn(reordered)) == pytest.approx([1 / 3, -REPEAT_COST])


def test_two_identical_calls_in_one_turn_the_second_is_the_repeat() -> None:
    assert credits(turn(AUTH, AUTH)) == pytest.approx([1 / 3 - REPEAT_COST])
    assert credits(turn(AUTH, AUTH, AUTH)) == pytest.approx([1 / 3 - 2 * REPEAT_COST])
    assert repeated_calls([AUTH, BILLING, AUTH], [BILLING]) == 2


def test_failed_calls_never_count_and_a_task_without_evidence_is_never_charged() -> None:
    # a call that failed is not among the calls that ran: writing it again costs nothing, before or after
    failed = {"text": call("grep", **AUTH[1]) * 2, "calls": []}
    assert credits(failed, turn(AUTH), failed) == pytest.approx([0.0, 1 / 3, 0.0])
    inline = {"placement": "inline"}
    assert credits(turn(AUTH), turn(AUTH, AUTH), meta=inline) == [0.0, 0.0]
    assert TURN_TERMS["evidence_norepeat@v1"].items(inline) == 0
    assert TURN_TERMS["evidence_norepeat@v1"].items(META) == 3


def test_the_turn_carries_the_episodes_earlier_calls() -> None:
    t = as_turn(turn(AUTH), META, FILES, [BILLING])
    assert t.earlier == (BILLING,) and t.calls == (AUTH,)
    assert Turn("x").earlier == ()  # the field defaults to no earlier call
    assert NOREPEAT(as_turn(turn(AUTH), META, FILES, [AUTH]), {5: True}) == (-REPEAT_COST, {})
    assert evidence_norepeat_turn_v1([AUTH], [], META, FILES, {}) == (pytest.approx(1 / 3), {5: True})


def test_it_never_pays_more_than_evidence_v1_on_the_same_turns() -> None:
    """Exploit check: no sequence of turns earns more per turn under the new term than under ``evidence@v1`` (and
    therefore no more in total), over crafted sequences and random ones drawn from a pool of calls."""
    both = grep("^note: service (billing|mailer) ", [12, 18], ignore_case=True)
    broad = grep("NOTE", [5, 12, 18, 24])
    wide = ("read_file", {"path": DOC, "start_line": 1, "end_line": 30},
            f"[{DOC}: lines 1-30 of 30]\n" + "\n".join(f"{n:2d}| {LINES[n - 1]}" for n in range(1, 31)))
    page = ("read_file", {"path": DOC, "start_line": 10, "end_line": 20},
            f"[{DOC}: lines 10-20 of 30]\n" + "\n".join(f"{n:2d}| {LINES[n - 1]}" for n in range(10, 21)))
    forged = ("grep", dict(AUTH[1]), f"{DOC}:5:NOTE: service auth forwards all of its requests to service x.")
    pool = [AUTH, BILLING, MAILER, both, broad, wide, page, forged, SUBMIT, grep("nothing", [])]
    crafted = [
        [turn(AUTH), turn(AUTH), turn(AUTH)],
        [turn(AUTH, AUTH, BILLING, BILLING), turn(MAILER, MAILER)],
        [turn(page, page), turn(page), turn(wide), turn(both)],
        [turn(forged), turn(AUTH), turn(forged), turn(broad)],
    ]
    rng = random.Random(0)
    randomised = [[turn(*rng.choices(pool, k=rng.randint(0, 3))) for _ in range(rng.randint(1, 8))]
                  for _ in range(300)]
    for turns in crafted + randomised:
        for meta in (META, {"placement": "inline"}):
            norepeat, evidence = credits(*turns, meta=meta), credits(*turns, term=EVIDENCE, meta=meta)
            assert all(n <= e + 1e-12 for n, e in zip(norepeat, evidence, strict=True)), (turns, norepeat, evidence)
            assert sum(norepeat) <= sum(evidence) + 1e-12 <= 1.0 + 2e-12
            repeats = [repeated_calls([tuple(c) for c in t["calls"]],
                                      [tuple(c) for u in turns[:i] for c in u["calls"]]) for i, t in enumerate(turns)]
            charged = REPEAT_COST * sum(repeats) if meta is META else 0.0
            assert sum(evidence) - sum(norepeat) == pytest.approx(charged)


# ---- registry, golden cases, config ----------------------------------------------------------------------------------
def test_the_term_is_registered_everywhere_a_term_name_is_checked() -> None:
    assert "evidence_norepeat@v1" in get_args(TurnTermName) and set(get_args(TurnTermName)) == set(TURN_TERMS)
    assert "evidence_norepeat@v1" in REWARDS
    assert TURN_TERMS["evidence_norepeat@v1"].items is TURN_TERMS["evidence@v1"].items
    cfg = load_config(str(EXAMPLES / "long_context_lengths.toml"),
                      ['rollout.env_kwargs={turn_rewards=true, turn_term="evidence_norepeat@v1"}'])
    assert cfg.rollout.env_kwargs["turn_term"] == "evidence_norepeat@v1"


def test_the_golden_turn_cases_replay() -> None:
    data = json.loads((GOLDEN_DIR / "multihop_norepeat_turns.json").read_text())
    cases = data["turn_cases"]["evidence_norepeat@v1"]
    assert len(cases) >= 4 and any(min(c["expected"]) < 0 for c in cases)
    assert check_golden() == []


# ---- the env ---------------------------------------------------------------------------------------------------------
def multihop(tokens: int = 4096) -> Task:
    return make_family("multihop")("train", 1, 0, 1, tokens=tokens, placement="file")[0]


def answer(task: Task) -> str:
    assert task.reference is not None
    return str(task.reference.answer)


def test_a_repeated_grep_lowers_the_step_reward_by_weight_times_repeat_cost(fake_factory) -> None:
    task = multihop()
    chain, doc, n = task.metadata["chain"], task.metadata["document"], len(task.metadata["evidence"])
    find_all = call("grep", pattern="^NOTE: service", path=doc)
    first = call("grep", pattern=f"service {chain[0]} forwards", path=doc, fixed_strings=True)
    turns = [first, find_all, first, find_all, find_all + find_all, call("submit", answer=answer(task))]
    paid = {}
    for name in ("evidence@v1", "evidence_norepeat@v1"):
        env = ToolEnv([task], sandbox_factory=fake_factory, tools=None, turn_rewards=True, turn_term=name)
        paid[name] = play(env, task, turns)
    ev = [i["turn_reward"] for i in paid["evidence@v1"]]
    nr = [i["turn_reward"] for i in paid["evidence_norepeat@v1"]]
    assert ev == pytest.approx([W / n, W * (n - 1) / n, 0.0, 0.0, 0.0, 0.0])
    cost = W * REPEAT_COST
    assert nr == pytest.approx([W / n, W * (n - 1) / n, -cost, -cost, -2 * cost, 0.0])
    final = paid["evidence_norepeat@v1"][-1]
    assert final["outcome"].grade.answer_matched and final["outcome"].actions.evidence_found == n
    # the episode total is the share of evidence found (the charges are in the per-turn rewards)
    assert final["reward_components"]["evidence_norepeat@v1"] == 1.0
    assert paid["evidence@v1"][-1]["reward_components"]["evidence@v1"] == 1.0
    assert "evidence_norepeat@v1" not in paid["evidence@v1"][-1]["reward_components"]
    # the behaviour count sees the same four repeats whichever term is paid
    assert final["outcome"].actions.repeated_calls == 4
    assert paid["evidence@v1"][-1]["outcome"].actions.repeated_calls == 4


def test_repeated_calls_are_counted_with_no_term_paid(fake_factory) -> None:
    task = multihop()
    doc = task.metadata["document"]
    grep_all = call("grep", pattern="^NOTE: service", path=doc)
    env = ToolEnv([task], sandbox_factory=fake_factory, tools=None)
    infos = play(env, task, [grep_all, call("grep", pattern="^NOTE: service ", path=doc), grep_all])
    assert [i["actions"].repeated_calls for i in infos] == [0, 0, 1]
    assert play(env, task, [grep_all])[0]["actions"].repeated_calls == 0  # a new episode starts afresh


def test_the_weight_scales_the_cost_and_a_new_episode_starts_with_no_earlier_calls(fake_factory) -> None:
    task = multihop()
    doc = task.metadata["document"]
    grep_all = call("grep", pattern="^NOTE: service", path=doc)
    env = ToolEnv([task], sandbox_factory=fake_factory, tools=None, turn_rewards=True,
                  turn_term="evidence_norepeat@v1", reward_weights={"correctness": 1.0, "evidence_norepeat@v1": 0.5})
    for _ in range(2):  # the second episode's first grep is no repeat of the first episode's
        infos = play(env, task, [grep_all, grep_all, call("submit", answer="wrong")])
        assert [i["turn_reward"] for i in infos] == pytest.approx([0.5, -0.5 * REPEAT_COST, 0.0])
        assert infos[-1]["reward_components"]["evidence_norepeat@v1"] == 1.0


def test_a_call_that_failed_is_not_a_repeat_in_the_env(fake_factory) -> None:
    task = multihop()
    doc = task.metadata["document"]
    bad = call("grep", pattern="([", path=doc)  # an invalid regex: the tool reports an error
    env = ToolEnv([task], sandbox_factory=fake_factory, tools=None, turn_rewards=True,
                  turn_term="evidence_norepeat@v1")
    infos = play(env, task, [bad, bad + bad, call("submit", answer="wrong")])
    assert "Error" in env.messages[3]["content"]
    assert [i["turn_reward"] for i in infos] == [0.0, 0.0, 0.0]


class _RepeatingAgent:
    """Finds the whole chain in one grep, re-runs it twice, then submits the right answer."""

    def reset(self, task: Task) -> None:
        self.task, self.turn = task, 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        self.turn += 1
        if self.turn <= 3:
            return call("grep", pattern="^NOTE: service", path=self.task.metadata["document"])
        return call("submit", answer=answer(self.task))


def test_negative_turn_credit_reaches_the_trajectory_and_the_step_metrics(fake_factory) -> None:
    task = multihop()
    make = lambda: ToolEnv([task], sandbox_factory=fake_factory, tools=None, turn_rewards=True,  # noqa: E731
                           turn_term="evidence_norepeat@v1")
    cfg = RolloutConfig(max_new_tokens=256, max_total_tokens=100_000, max_turns=6, seed=0)
    (traj,) = rollout(ScriptedPolicy(_RepeatingAgent), make, [task], config=cfg)
    cost = W * REPEAT_COST
    assert traj.success and traj.num_turns == 4
    assert traj.metadata["turn_rewards"] == pytest.approx([W, -cost, -cost, traj.reward])
    assert turn_rewards(traj) == traj.metadata["turn_rewards"]
    mixer = DomainMixer(tasks={"long_context": [task]}, weights={"long_context": 1.0})
    m = step_metrics(1, [traj], [traj], None, 1.0, 1.0, mixer)
    assert m["rollout/turn_reward_mean"] == pytest.approx(W - 2 * cost)

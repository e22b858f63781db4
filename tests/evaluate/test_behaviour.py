"""Behaviour metrics on hand-built episodes whose answers are known."""

import pytest

from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade
from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.behaviour import behaviour, behaviour_gains
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.report import markdown


def row(task: str, *, solved: bool, first: bool | None, verified: bool, submitted: bool = True, turns: int = 2,
        no_call: int = 0, sample: int = 0) -> EpisodeRow:
    outcome = EpisodeOutcome(
        task_id=task, domain="coding", family="strings",
        grade=Grade(tests_passed=2 if solved else 0, tests_expected=2),
        actions=Actions(turns=turns, submitted=submitted, code_actions=turns - no_call, no_call_turns=no_call,
                        test_runs=0 if first is None else 1, first_test_passed=first, tested_before_submit=verified),
        truncation=None if submitted else "max_turns")
    return EpisodeRow(seed=0, task_id=task, domain="coding", family="strings", unseen=False, sample=sample,
                      success=outcome.success, reward=float(solved), failure_mode=outcome.failure_mode, turns=turns,
                      gen_tokens=10, sandbox_s=0.1, truncated=not submitted, infra_failure=False,
                      trajectory={"outcome": outcome.to_dict()})


def test_known_recovery_verify_and_first_attempt_rates():
    rows = [
        row("a", solved=True, first=False, verified=True, sample=0),    # failed first, recovered
        row("a", solved=False, first=False, verified=False, sample=1),  # failed first, never recovered
        row("b", solved=True, first=True, verified=True, sample=0),     # passed first
        row("b", solved=False, first=None, verified=False, submitted=False, turns=3, no_call=3, sample=1),
    ]
    m = behaviour(rows)
    assert m["first_attempt_pass"]["value"] == pytest.approx(0.25)  # (0 + 0 + 1 + 0) / 4, averaged per task
    assert m["recovery"]["value"] == pytest.approx(0.5) and m["recovery"]["episodes"] == 2
    assert m["verify_before_submit"]["value"] == pytest.approx(0.5)
    assert m["submitted"]["value"] == pytest.approx(0.75)
    assert m["valid_call_rate"]["value"] == pytest.approx(0.75)  # task a: 1, task b: (1 + 0) / 2
    assert m["turns"]["value"] == pytest.approx(2.25)


def test_gains_are_paired_and_reach_the_report():
    base = [row(t, solved=False, first=False, verified=False, submitted=False) for t in "abcdef"]
    cand = [row(t, solved=True, first=False, verified=True) for t in "abcdef"]
    g = behaviour_gains(cand, base)
    assert g["recovery"]["diff"]["value"] == pytest.approx(1.0)
    assert g["verify_before_submit"]["diff"]["low"] > 0
    m = aggregate(cand, samples=1, baseline=base)
    assert m["baseline"]["behaviour_gain"]["recovery"]["diff"]["value"] == pytest.approx(1.0)
    text = markdown({**m, "policy": {"spec": "x"}})
    assert "## Behaviour" in text and "recovery" in text and "+1.000" in text


def test_rows_without_an_outcome_have_no_behaviour_to_report():
    r = row("a", solved=False, first=None, verified=False)
    bare = EpisodeRow(**{**vars(r), "trajectory": {}})
    m = behaviour([bare])
    assert "recovery" not in m and m["first_attempt_pass"]["value"] == 0.0


def test_completion_per_document_length_in_metrics_and_report():
    from sandgym.evaluate.aggregate import length_bucket

    assert [length_bucket(n) for n in (900, 1100, 2300, 4300, 7800, 16000)] == ["1K", "1K", "2K", "4K", "8K", "16K"]
    rows, base = [], []
    for length, rate in ((1000, 1.0), (4100, 0.5), (8000, 0.0)):
        for t in range(4):
            for s in range(2):
                ok = (t + s) % 2 == 0 if rate == 0.5 else rate == 1.0
                r = row(f"d{length}-{t}", solved=ok, first=None, verified=False, sample=s)
                rows.append(EpisodeRow(**{**vars(r), "doc_tokens": length, "domain": "long_context"}))
                base.append(EpisodeRow(**{**vars(r), "doc_tokens": length, "success": False}))
    m = aggregate(rows, samples=2, baseline=base)
    assert list(m["by_length"]) == ["1K", "4K", "8K"]
    assert [m["by_length"][b]["completion"]["value"] for b in m["by_length"]] == [1.0, 0.5, 0.0]
    assert m["baseline"]["by_length"]["1K"]["completion"]["value"] == 0.0
    gains = m["baseline"]["gain_by_length"]  # paired over the same tasks, per length
    assert [gains[b]["diff"]["value"] for b in ("1K", "4K", "8K")] == [1.0, 0.5, 0.0]
    assert gains["1K"]["diff"]["low"] > 0 and gains["8K"]["diff"]["high"] == 0.0
    assert list(m["by_length_pooled"]) == ["4K+"]  # 4K and every longer length; not the shortest or longest alone
    assert m["by_length_pooled"]["4K+"]["completion"]["value"] == 0.25 and m["by_length_pooled"]["4K+"]["tasks"] == 8
    assert m["baseline"]["gain_by_length_pooled"]["4K+"]["diff"]["value"] == 0.25
    text = markdown({**m, "policy": {"spec": "x"}})
    assert "## By document length" in text and "| 4K | 0.500" in text and "| +1.000" in text and "| 4K+ | 0.250" in text
    assert "No task in these suites has a document" in markdown({**aggregate(rows[:0] + [row("a", solved=True,
        first=True, verified=True)], samples=1), "policy": {"spec": "x"}})


def test_evidence_found_applies_only_to_tasks_that_declare_evidence():
    def lc(task: str, found: int, declared: int, sample: int = 0) -> EpisodeRow:
        r = row(task, solved=False, first=None, verified=False, sample=sample)
        outcome = EpisodeOutcome.from_dict(r.trajectory["outcome"])
        actions = Actions(turns=2, submitted=True, evidence_found=found, evidence_declared=declared)
        return EpisodeRow(**{**vars(r), "trajectory": {"outcome": {**outcome.to_dict(),
                                                                     "actions": vars(actions)}}})

    rows = [lc("a", 1, 4), lc("a", 3, 4, sample=1), lc("b", 2, 2), lc("c", 0, 0)]
    m = behaviour(rows)
    assert m["evidence_found"]["value"] == pytest.approx((0.25 + 0.75 + 1.0) / 3)
    assert m["evidence_found"]["episodes"] == 3  # task c declares none: not counted
    gains = behaviour_gains(rows, [lc("a", 0, 4), lc("b", 1, 2)])
    assert gains["evidence_found"]["diff"]["value"] == pytest.approx((0.5 + 0.5) / 2)


def test_repeated_calls_counts_per_episode_and_skips_episodes_without_tool_calls():
    def ep(task: str, repeats: int, calls: int, sample: int = 0) -> EpisodeRow:
        r = row(task, solved=False, first=None, verified=False, sample=sample)
        outcome = EpisodeOutcome.from_dict(r.trajectory["outcome"])
        actions = Actions(turns=3, submitted=False, tool_calls=calls, repeated_calls=repeats)
        return EpisodeRow(**{**vars(r), "trajectory": {"outcome": {**outcome.to_dict(), "actions": vars(actions)}}})

    rows = [ep("a", 2, 3), ep("a", 0, 3, sample=1), ep("b", 3, 4), ep("c", 0, 0)]
    m = behaviour(rows)
    assert m["repeated_calls"]["value"] == pytest.approx((2 + 0 + 3) / 3)
    assert m["repeated_calls"]["episodes"] == 3  # c made no tool call: not counted
    gains = behaviour_gains(rows, [ep("a", 1, 3), ep("b", 1, 3)])
    assert gains["repeated_calls"]["diff"]["value"] == pytest.approx((0.0 + 2.0) / 2)

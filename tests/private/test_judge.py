"""The judge reward, hybrid rewards and calibration, with a scripted judge whose agreement is known (80%)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandgym.agents.policy import Policy, ScriptedPolicy
from sandgym.cli import main
from sandgym.errors import ConfigError
from sandgym.private.calibrate import calibrate, calibration_stats, load_judge_policy, load_labelled
from sandgym.private.judge import FunctionPolicy, HybridReward, JudgeReward, parse_score

RUBRIC = "The answer is correct."


def _reply(text: str) -> str:
    """Scripted judge: 9 for 'correct' answers, 1 otherwise; items marked FLIP are judged wrongly."""
    answer = text.split("## Answer\n", 1)[1]
    good = answer.startswith("correct")
    if "FLIP" in answer:
        good = not good
    return f"Reasoning...\nSCORE: {9 if good else 1}"


def scripted_judge() -> FunctionPolicy:
    return FunctionPolicy(_reply, name="scripted-judge")


def _labelled(n: int = 10) -> list[dict[str, object]]:
    """n items, half good; every 5th item is flipped, so the judge agrees on exactly 80%."""
    rows = []
    for i in range(n):
        label = i % 2
        answer = ("correct" if label else "wrong") + f" answer {i}" + (" FLIP" if i % 5 == 0 else "")
        rows.append({"prompt": f"question {i}", "answer": answer, "label": label})
    return rows


@pytest.mark.parametrize("text,score", [
    ("SCORE: 7", 0.7), ("score = 7/10", 0.7), ("**SCORE:** 8.5", 0.85), ("I'd say 3 out of 5.", 0.6),
    ("Score: 12", 1.0), ("SCORE: 2\n...revised. SCORE: 6", 0.6), ("  4 ", 0.4), ("no idea", None),
])
def test_parse_score(text: str, score: float | None) -> None:
    got = parse_score(text)
    assert got == (pytest.approx(score) if score is not None else None)


def test_judge_reward_records_version_and_calibration() -> None:
    judge = JudgeReward(scripted_judge(), RUBRIC)
    assert isinstance(judge.policy, Policy)
    assert judge([("q")], ["correct!"]) == [0.9]
    version = judge.reward_version
    assert version.startswith("judge@") and version == JudgeReward(scripted_judge(), RUBRIC).reward_version
    assert JudgeReward(scripted_judge(), "Other rubric").reward_version != version
    assert JudgeReward(scripted_judge(), RUBRIC, version="v2").reward_version != version
    assert JudgeReward(scripted_judge(), RUBRIC, judge_id="other-model").reward_version != version
    result = judge.grade(["q"], ["???"])[0]
    assert result.version == version and result.calibration is None and result.parsed
    stats = calibrate(judge, load_items(_labelled()))
    calibrated = judge.with_calibration(stats)
    graded = calibrated.grade(["q"], ["correct"])[0]
    assert graded.calibration == stats.to_json() and graded.version == version
    silent = JudgeReward(FunctionPolicy(lambda _: "I cannot grade this"), RUBRIC).grade(["q"], ["a"])[0]
    assert silent.score == 0.0 and not silent.parsed


def load_items(rows: list[dict[str, object]]) -> list:
    from sandgym.private.calibrate import LabelledItem

    return [LabelledItem(str(r["prompt"]), str(r["answer"]), int(r["label"])) for r in rows]  # type: ignore[arg-type]


def test_calibration_numbers_known() -> None:
    stats = calibrate(JudgeReward(scripted_judge(), RUBRIC), load_items(_labelled(10)))
    assert stats.n == 10 and stats.agreement == 0.8
    assert stats.confusion == ((4, 1), (1, 4))
    assert stats.ece == pytest.approx(0.1)  # bins 0.1 and 0.9 each hold 5 items, 1 of them wrong
    assert stats.kappa == pytest.approx(0.6) and stats.unparsed == 0
    assert stats.brier == pytest.approx((8 * 0.01 + 2 * 0.81) / 10)
    perfect = calibration_stats([1.0, 0.0], [1, 0])
    assert perfect.agreement == 1.0 and perfect.ece == 0.0


def test_hybrid_reward_weights_and_components() -> None:
    judge = JudgeReward(scripted_judge(), RUBRIC)
    hybrid = HybridReward({"has_code": lambda p, a: float("def " in a)}, judge, {"has_code": 3.0, "judge": 1.0})
    results = hybrid.score(["q", "q"], ["correct def f(): pass", "wrong"])
    assert [r.reward for r in results] == [pytest.approx((3 + 0.9) / 4), pytest.approx(0.1 / 4)]
    assert results[0].components == {"has_code": 1.0, judge.reward_version: 0.9}
    assert hybrid.version.startswith("hybrid@")
    with pytest.raises(ConfigError, match="below the rule terms"):
        HybridReward({"r": lambda p, a: 1.0}, judge, {"r": 1.0, "judge": 1.0})
    with pytest.raises(ConfigError, match="missing"):
        HybridReward({"r": lambda p, a: 1.0}, judge, {"r": 1.0})


def test_scripted_policy_works_as_judge() -> None:
    class Agent:
        def reset(self, task: object) -> None:
            pass

        def act(self, observation: str, info: object) -> str:
            return "SCORE: 5"

    assert JudgeReward(ScriptedPolicy(Agent), RUBRIC)(["q"], ["a"]) == [0.5]


def test_cli_calibrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(r) + "\n" for r in _labelled(20)))
    out = tmp_path / "calib.json"
    code = main(["judge", "calibrate", "--labelled", str(labelled), "--judge",
                 "python:tests.private.test_judge:scripted_judge", "--rubric", RUBRIC, "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "agreement=0.800" in text and "ECE=0.100" in text and "judge@" in text
    report = json.loads(out.read_text())
    assert report["confusion"] == [[8, 2], [2, 8]] and report["judge"] == "scripted-judge"
    assert len(load_labelled(labelled)) == 20


def test_labelled_and_spec_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "answer": "a", "label": 0.5}\n')
    with pytest.raises(ConfigError, match="bad.jsonl:1: label 0.5 is not binary"):
        load_labelled(bad)
    with pytest.raises(ConfigError, match="python:package.module:attribute"):
        load_judge_policy("python:nothing")

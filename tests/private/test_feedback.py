"""``sandgym feedback import``: rewards by outcome, edit distance, preference pairs, malformed lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandgym.agents.trajectory import load_jsonl
from sandgym.cli import main
from sandgym.errors import ConfigError
from sandgym.private.feedback import FeedbackError, RewardMapping, import_feedback, parse_lines, read_records

GOOD = [
    {"id": "a", "prompt": "sum a list", "output": "def s(x): return sum(x)", "outcome": "accepted"},
    {"id": "r", "prompt": "sum a list", "output": "def s(x): return 0", "outcome": "rejected"},
    {"id": "e", "prompt": "reverse", "output": "def r(s): return s", "outcome": "edited",
     "edited_output": "def r(s): return s[::-1]"},
    {"id": "d", "prompt": "reverse", "output": "x", "outcome": "edited", "edit_distance": 40},
]
BAD_LINES = {
    2: "{not json",
    4: json.dumps({"prompt": "p", "output": "o", "outcome": "acepted"}),
    6: json.dumps({"prompt": "p", "outcome": "accepted"}),
    7: json.dumps({"prompt": "p", "output": "o", "outcome": "edited", "edit_distance": -3}),
    8: json.dumps({"prompt": "p", "output": "o", "outcome": "accepted", "promt": "x"}),
    9: json.dumps(["a list"]),
}


def _write(path: Path, with_bad: bool) -> Path:
    lines = [json.dumps(r) for r in GOOD]
    if with_bad:
        out: list[str] = []
        good = iter(lines)
        for number in range(1, len(lines) + len(BAD_LINES) + 1):
            out.append(BAD_LINES[number] if number in BAD_LINES else next(good))
        lines = out
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rewards_default_and_configured(tmp_path: Path) -> None:
    result = import_feedback(_write(tmp_path / "logs.jsonl", False), tmp_path / "out.jsonl")
    rewards = {t.task_id: t.reward for t in result.trajectories}
    assert rewards == {"a": 1.0, "r": 0.0, "e": 0.5, "d": 0.5}
    back = load_jsonl(tmp_path / "out.jsonl")
    assert [t.task_id for t in back] == ["a", "r", "e", "d"] and not back[0].has_tokens
    assert back[0].metadata["prompt"] == "sum a list" and back[0].reward_components == {"feedback@v1": 1.0}
    mapping = RewardMapping.parse("accepted=2,rejected=-1", edit_distance_scale=20)
    trajs = import_feedback(tmp_path / "logs.jsonl", tmp_path / "o2.jsonl", mapping=mapping).trajectories
    scaled = {t.task_id: t.reward for t in trajs}
    assert scaled["a"] == 2.0 and scaled["r"] == -1.0 and scaled["d"] == -1.0  # 40 >= scale: no better than rejected
    assert scaled["e"] == pytest.approx(2.0 - 3.0 * 6 / 20)  # "[::-1]" inserted: distance 6


def test_preference_pairs(tmp_path: Path) -> None:
    result = import_feedback(_write(tmp_path / "logs.jsonl", False), tmp_path / "out.jsonl")
    pairs = [json.loads(x) for x in (tmp_path / "out.pairs.jsonl").read_text().splitlines()]
    assert pairs == list(result.pairs)
    kinds = {(p["kind"], p["chosen"], p["rejected"]) for p in pairs}
    assert ("edit", "def r(s): return s[::-1]", "def r(s): return s") in kinds
    assert ("accepted>rejected", "def s(x): return sum(x)", "def s(x): return 0") in kinds
    assert len(pairs) == 2


def test_malformed_lines_named_and_nothing_else_lost(tmp_path: Path) -> None:
    logs = _write(tmp_path / "logs.jsonl", True)
    with pytest.raises(FeedbackError) as err:
        read_records(logs)
    message = str(err.value)
    for number in BAD_LINES:
        assert f"logs.jsonl:line {number}:" in message
    assert "did you mean 'accepted'" in message and "missing required field 'output'" in message
    assert "edit_distance must be a number >= 0" in message and "did you mean 'prompt'" in message
    assert "--skip-bad" in message
    good, bad = read_records(logs, skip_bad=True)
    assert [r.id for r in good] == ["a", "r", "e", "d"] and [b.line for b in bad] == sorted(BAD_LINES)


def test_cli_import_and_skip_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = _write(tmp_path / "logs.jsonl", True)
    assert main(["feedback", "import", str(logs), "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "line 2: invalid JSON" in capsys.readouterr().err
    assert not (tmp_path / "t.jsonl").exists()
    assert main(["feedback", "import", str(logs), "--out", str(tmp_path / "t.jsonl"), "--skip-bad",
                 "--mapping", "edited=0.25"]) == 0
    captured = capsys.readouterr()
    assert "imported 4 record(s)" in captured.out and "skipped 6 malformed" in captured.out
    assert captured.err.count("skipped ") == 6
    assert {t.task_id: t.reward for t in load_jsonl(tmp_path / "t.jsonl")}["e"] == 0.25


def test_a_missing_or_unreadable_log_is_an_error_not_a_traceback(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["feedback", "import", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "caf\xe9"}\n')
    assert main(["feedback", "import", str(tmp_path / "latin1.jsonl"), "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "UTF-8" in capsys.readouterr().err


def test_a_record_whose_text_holds_a_line_separator_is_one_record(tmp_path: Path) -> None:
    log = tmp_path / "logs.jsonl"
    record = {"prompt": "p", "output": "a\u2028b", "outcome": "accepted"}
    log.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    good, bad = read_records(log)
    assert not bad and [r.output for r in good] == ["a\u2028b"]


def test_mapping_errors() -> None:
    with pytest.raises(ConfigError, match="OUTCOME=REWARD"):
        RewardMapping.parse("approved=1")
    with pytest.raises(ConfigError, match="not a number"):
        RewardMapping.parse("accepted=high")
    with pytest.raises(ConfigError, match="edit_distance_scale"):
        RewardMapping(edit_distance_scale=0)


def test_generated_ids_are_stable() -> None:
    good, _ = parse_lines([json.dumps({"prompt": "p", "output": "o", "outcome": "rejected"})] * 2)
    assert good[0].id == good[1].id and good[0].id.startswith("fb-")


def test_secrets_scrubbed_from_logs(tmp_path: Path) -> None:
    logs = tmp_path / "logs.jsonl"
    rec = {"prompt": "deploy with key AKIAIOSFODNN7EXAMPLE", "output": "mail bob@corp.example.com",
           "outcome": "edited", "edited_output": "mail <team>"}
    logs.write_text(json.dumps(rec) + "\n")
    result = import_feedback(logs, tmp_path / "out.jsonl")
    text = (tmp_path / "out.jsonl").read_text() + (tmp_path / "out.pairs.jsonl").read_text()
    assert "AKIAIOSFODNN7EXAMPLE" not in text and "bob@corp" not in text
    assert result.scrub.by_kind == {"aws_access_key": 1, "email": 1}
    assert result.trajectories[0].metadata["edit_distance"] > 0

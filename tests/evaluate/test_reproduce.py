"""`sandgym eval reproduce METRICS.json`: an unchanged tree reproduces a small evaluation exactly; a changed suite
or reward version is refused, naming the difference; a figure outside its recorded interval exits 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import MappingProxyType

import pytest

from sandgym.cli import main
from tests.interop.tasks_fixture import write_suite


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A small evaluation (oracle against noop, one JSONL task, 2 samples) and its metrics.json."""
    root = tmp_path_factory.mktemp("recorded")
    suite = write_suite(root / "tasks.jsonl")
    out = root / "eval"
    assert main(["eval", "--policy", "oracle", "--baseline", "noop", "--suite", str(suite), "--samples", "2",
                 "--out", str(out)]) == 0
    return out / "metrics.json"


def _copy(recorded: Path, where: Path) -> tuple[Path, Path]:
    """The recorded evaluation as if it had been run on a copy of its suite file (so the test may change it)."""
    where.mkdir(parents=True)
    old_suite = json.loads(recorded.read_text())["config"]["suites"][0]
    suite = where / "tasks.jsonl"
    shutil.copy(old_suite, suite)
    metrics = where / "metrics.json"
    metrics.write_text(recorded.read_text().replace(json.dumps(old_suite)[1:-1], json.dumps(str(suite))[1:-1]))
    return metrics, suite


def test_an_unchanged_tree_reproduces_the_evaluation_exactly(recorded: Path, capsys) -> None:
    assert main(["eval", "reproduce", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert "| overall.completion | 1.0000 [1.0000, 1.0000] | 1.0000 | yes |" in out
    assert "| baseline.overall.completion | 0.0000 [0.0000, 0.0000] | 0.0000 | yes |" in out
    doc = json.loads((recorded.parent / "reproduce" / "reproduce.json").read_text())
    assert doc["ok"] and doc["metrics"] == doc["within"] >= 10
    assert all(c["new"] == c["value"] for c in doc["checks"])  # exactly, not only within the interval
    again = json.loads((recorded.parent / "reproduce" / "metrics.json").read_text())
    assert again["manifest"]["tasks_sha256"] == json.loads(recorded.read_text())["manifest"]["tasks_sha256"]


def test_a_changed_suite_is_refused_naming_it(recorded: Path, tmp_path: Path, capsys) -> None:
    metrics, suite = _copy(recorded, tmp_path / "copy")
    suite.write_text(suite.read_text().replace("add_one(-5) == -4", "add_one(-6) == -5"))
    assert main(["eval", "reproduce", str(metrics)]) == 2
    err = capsys.readouterr().err
    assert f"suite {str(suite)!r} tasks hash (the tasks changed)" in err, err
    assert not (tmp_path / "copy" / "reproduce" / "episodes.jsonl").exists()  # nothing ran


def test_a_changed_reward_version_is_refused_naming_it(recorded: Path, tmp_path: Path, monkeypatch,
                                                       capsys) -> None:
    from sandgym.envs import rewards

    # the tree now scores correctness with a v2 (registered as the house rule says: a change is a new version)
    monkeypatch.setitem(rewards.REWARDS, "correctness@v2", rewards.REWARDS["correctness@v1"])
    weights = {("correctness@v2" if k == "correctness@v1" else k): v for k, v in rewards._DEFAULT_WEIGHTS.items()}
    monkeypatch.setattr(rewards, "_DEFAULT_WEIGHTS", MappingProxyType(weights))
    assert main(["eval", "reproduce", str(recorded), "--out", str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err
    assert "reward correctness version: correctness@v1 -> correctness@v2" in err, err
    assert not (tmp_path / "again").exists()


def test_a_figure_outside_its_recorded_interval_exits_1(recorded: Path, tmp_path: Path, capsys) -> None:
    metrics, _ = _copy(recorded, tmp_path / "copy")
    doc = json.loads(metrics.read_text())
    doc["overall"]["completion"] = {"value": 0.25, "low": 0.0, "high": 0.5}  # a record the tree cannot reproduce
    metrics.write_text(json.dumps(doc))
    assert main(["eval", "reproduce", str(metrics)]) == 1
    out = capsys.readouterr().out
    assert "| overall.completion | 0.2500 [0.0000, 0.5000] | 1.0000 | NO |" in out
    assert json.loads((tmp_path / "copy" / "reproduce" / "reproduce.json").read_text())["ok"] is False


def test_a_metrics_json_without_a_manifest_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "metrics.json").write_text(json.dumps({"overall": {}, "config": {"suites": ["x"]}}))
    assert main(["eval", "reproduce", str(tmp_path)]) == 2
    assert "has no manifest" in capsys.readouterr().err

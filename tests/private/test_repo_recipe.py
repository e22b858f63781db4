"""``sandgym recipe repo``: one command from a repository to per-rung base / one-shot / SFT / SFT + RL on its
held-out code, at a tiny size (a tiny random model, one RL step): every stage runs, in order, and a rerun resumes
instead of redoing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandgym.cli import main
from tests.private.conftest import sandbox_or_skip

FIXTURE = Path(__file__).parent / "fixtures" / "minicalc"
TINY = ["--set", "optim.steps=1", "--set", "optim.tasks_per_step=1", "--set", "algorithm.group_size=2",
        "--set", "sft.episodes=2", "--set", "sft.epochs=1", "--set", "checkpoint.every=1"]


@pytest.mark.timeout(900)  # a hang guard: every stage (two probes, SFT, RL, 4 policies x 2 rungs) loads a model
def test_recipe_runs_every_stage_and_resumes(tmp_path: Path, tiny_model_dir: Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    sandbox_or_skip()
    out = tmp_path / "recipe"
    args = ["recipe", "repo", str(FIXTURE), "--out", str(out), "--model", str(tiny_model_dir), "--max-tasks", "8",
            "--rungs", "complete,fix", "--samples", "1", *TINY]
    assert main(args) == 0
    report = json.loads((out / "from_repo_report.json").read_text())
    assert report["made_by_isolation"] == {"process": report["made"]}
    assert set(report["made_by_kind"]) == {"complete", "fix"}
    for rung in ("complete", "fix"):
        assert (out / "rungs" / f"{rung}.jsonl").is_file() and (out / "rungs" / f"{rung}-oneshot.jsonl").is_file()
    for who in ("base", "sft"):  # the base model, then the warm start, on each rung's train tasks
        assert set(json.loads((out / "probe" / who / "probe.json").read_text())) == {"complete", "fix"}
    summary = json.loads((out / "run" / "summary.json").read_text())
    # a random model solves nothing: no foothold, so RL trains on the lowest rung, and the report says so
    assert summary["rl_rungs"] == ["complete"] and "no rung gave the base model or the warm start" in summary["why"]
    assert set(summary["timings"]) >= {"probe_base", "sft", "probe_sft", "rl", "eval_complete"}
    assert summary["peak_memory_mb"] > 0
    # the rung RL trained on is scored, each policy paired with the others; the rung without a foothold is not
    assert list(summary["rungs"]) == ["complete"] and summary["unscored"] == ["fix"]
    assert not (out / "run" / "eval" / "fix").exists()
    text = (out / "run" / "REPORT.md").read_text()
    assert "Rung `complete`" in text and "Rung `fix`" not in text and "Out of reach for this model" in text
    assert "`fix` (held-out tasks not scored" in text and "`--score-all` scores them" in text
    train = (out / "train.toml").read_text()
    assert "rungs/complete.jsonl:train" in train and "rungs/fix.jsonl:train" in train  # SFT on every rung
    capsys.readouterr()
    assert main([*args, "--score-all"]) == 0  # every stage is found done; only the other rung's evaluation runs
    assert "tasks: reusing" in capsys.readouterr().err
    summary = json.loads((out / "run" / "summary.json").read_text())
    assert summary["unscored"] == [] and set(summary["timings"]) >= {"eval_complete", "eval_fix"}
    for rung in ("complete", "fix"):
        m = summary["rungs"][rung]
        assert set(m["completion"]) == {"base", "oneshot", "sft", "sft_rl"} and m["tasks"] >= 1
        assert m["gains"]["rl_vs_sft"] is not None
    assert "Rung `fix`" in (out / "run" / "REPORT.md").read_text()


def test_recipe_rejects_an_unknown_rung(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    assert main(["recipe", "repo", str(FIXTURE), "--out", str(out), "--rungs", "complete,finish"]) == 2
    assert "--rungs 'complete,finish': each must be one of complete, fix" in capsys.readouterr().err
    assert not out.exists()  # refused before anything was made

"""``sandgym recipe repo``: one command from a repository to per-rung base / one-shot / SFT / SFT + RL on its
held-out code, at a tiny size (a tiny random model, one RL step): every stage runs, in order, and a rerun resumes
instead of redoing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandgym.cli import main
from sandgym.experiments import ladder
from tests.private.conftest import sandbox_or_skip

FIXTURE = Path(__file__).parent / "fixtures" / "minicalc"
TINY = ["--set", "optim.steps=1", "--set", "optim.tasks_per_step=1", "--set", "algorithm.group_size=2",
        "--set", "sft.episodes=2", "--set", "sft.epochs=1", "--set", "checkpoint.every=1"]


def _lift_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The RL policy's probe reports one solved `fix` task: the climb's path, which a random model never takes."""
    real = ladder.probe

    def probe(files: Any, spec: str, out: Path, size: Any) -> Any:
        found = real(files, spec, out, size)
        return {r: {**p, "solved": 1} if out.name == "rl" and r == "fix" else p for r, p in found.items()}

    monkeypatch.setattr(ladder, "probe", probe)


@pytest.mark.timeout(900)  # a hang guard: every stage (three probes, SFT, RL, the climb, 4 policies x 3 rungs)
def test_recipe_runs_every_stage_climbs_and_resumes(tmp_path: Path, tiny_model_dir: Any,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox_or_skip()
    _lift_fix(monkeypatch)
    out = tmp_path / "recipe"
    rungs = ("complete", "fix", "find")
    args = ["recipe", "repo", str(FIXTURE), "--out", str(out), "--model", str(tiny_model_dir), "--max-tasks", "12",
            "--rungs", ",".join(rungs), "--samples", "1", *TINY]
    assert main(args) == 0
    report = json.loads((out / "from_repo_report.json").read_text())
    assert report["made_by_isolation"] == {"process": report["made"]}
    assert set(report["made_by_kind"]) == set(rungs)
    for rung in rungs:
        assert (out / "rungs" / f"{rung}.jsonl").is_file() and (out / "rungs" / f"{rung}-oneshot.jsonl").is_file()
    for who in ("base", "sft"):  # the base model, then the warm start, on each rung's train tasks
        assert set(json.loads((out / "probe" / who / "probe.json").read_text())) == set(rungs)
    summary = json.loads((out / "run" / "summary.json").read_text())
    # a random model solves nothing: no foothold, so RL trains on the lowest rung, and the report says so
    assert summary["rl_rungs"] == ["complete"] and "no rung gave the base model or the warm start" in summary["why"]
    # the RL policy, probed on the rungs above, "solved" a fix task: GRPO went on from its adapter there too
    assert set(summary["climb"]["probe"]) == {"fix", "find"} and summary["climb"]["rungs"] == ["fix"]
    assert summary["rl_run"].endswith("climb") and (out / "run" / "train" / "climb" / "checkpoints").is_dir()
    climb_config = (out / "run" / "train" / "climb" / "config.toml").read_text()
    assert "checkpoints/step-000001" in climb_config and "rungs/fix.jsonl:train" in climb_config
    assert set(summary["timings"]) >= {"probe_base", "sft", "probe_sft", "rl", "probe_rl", "climb", "eval_complete",
                                       "eval_fix"}
    assert summary["peak_memory_mb"] > 0
    # the rungs RL trained or climbed to are scored, each policy paired with the others; the rung without a
    # foothold is not
    assert list(summary["rungs"]) == ["complete", "fix"] and summary["unscored"] == ["find"]
    assert not (out / "run" / "eval" / "find").exists()
    text = (out / "run" / "REPORT.md").read_text()
    assert "Rung `complete`" in text and "Rung `fix`" in text and "Rung `find`" not in text
    assert "RL climbed to it" in text and "GRPO went on from its adapter on fix" in text
    assert "`find` (held-out tasks not scored" in text and "`--score-all` scores them" in text
    assert "Out of reach for this model" in text
    train = (out / "train.toml").read_text()
    assert all(f"rungs/{r}.jsonl:train" in train for r in rungs)  # SFT on every rung
    capsys.readouterr()
    assert main([*args, "--score-all"]) == 0  # every stage is found done; only the last rung's evaluation runs
    assert "tasks: reusing" in capsys.readouterr().err
    summary = json.loads((out / "run" / "summary.json").read_text())
    assert summary["unscored"] == [] and "eval_find" in summary["timings"]
    for rung in rungs:
        m = summary["rungs"][rung]
        assert set(m["completion"]) == {"base", "oneshot", "sft", "sft_rl"} and m["tasks"] >= 1
        assert m["gains"]["rl_vs_sft"] is not None
    assert summary["rungs"]["find"]["test_name_baseline"]["tasks"] == summary["rungs"]["find"]["tasks"]
    assert "Rung `find`" in (out / "run" / "REPORT.md").read_text()


def test_recipe_rejects_an_unknown_rung(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    assert main(["recipe", "repo", str(FIXTURE), "--out", str(out), "--rungs", "complete,finish"]) == 2
    assert "--rungs 'complete,finish': each must be one of complete, fix" in capsys.readouterr().err
    assert not out.exists()  # refused before anything was made

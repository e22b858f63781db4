"""``sandgym recipe repo``: one command from a repository to base / SFT / SFT + RL on its held-out code, at a tiny
size (a tiny random model, one RL step): every stage runs, in order, and a rerun resumes instead of redoing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandgym.cli import main
from tests.private.conftest import sandbox_or_skip

FIXTURE = Path(__file__).parent / "fixtures" / "minicalc"
TINY = ["--set", "optim.steps=1", "--set", "optim.tasks_per_step=1", "--set", "algorithm.group_size=2",
        "--set", "sft.episodes=2", "--set", "rollout.max_new_tokens=8",
        "--set", "checkpoint.every=1"]


def test_recipe_runs_every_stage_and_resumes(tmp_path: Path, tiny_model_dir: Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    sandbox_or_skip()
    out = tmp_path / "recipe"
    args = ["recipe", "repo", str(FIXTURE), "--out", str(out), "--model", str(tiny_model_dir), "--max-tasks", "6",
            "--kinds", "bugfix,locate", "--n-tasks", "2", "--samples", "1", *TINY]
    assert main(args) == 0
    report = json.loads((out / "from_repo_report.json").read_text())
    assert report["made_by_split"]["train"] and report["made_by_split"]["heldout"]
    assert report["made_by_isolation"] == {"process": report["made"]}
    run = out / "run"
    assert (run / "train" / "sft" / "adapter" / "adapter_config.json").is_file()
    assert (run / "train" / "relabel" / "episodes" / "episodes.jsonl").is_file()  # the warm start's own episodes
    assert (run / "train" / "relabel" / "adapter" / "adapter_config.json").is_file()
    summary = json.loads((run / "eval" / "summary.json").read_text())
    assert set(summary["timings"]) >= {"sft", "sft_relabel", "rl", "eval_base", "eval_sft", "eval_sft_rl"}
    sft = json.loads((run / "eval" / "sft" / "metrics.json").read_text())
    assert sft["policy"]["spec"].endswith("relabel/adapter")  # the SFT policy scored is the relabelled one
    assert "RL over SFT" in (run / "REPORT.md").read_text()
    # the configs written beside the tasks name where the recipe trained: `sandgym eval DIR/eval.toml` rescores it
    from sandgym.evaluate.config import load_eval_config
    from sandgym.train.config import load_config

    ev = load_eval_config(out / "eval.toml")
    assert load_config(out / "train.toml").out_dir == ev.policy == (run / "train").as_posix()
    assert ev.out == (out / "eval").as_posix() and not (out / "eval").exists()
    capsys.readouterr()
    assert main(args) == 0  # every stage is found done
    assert "tasks: reusing" in capsys.readouterr().err

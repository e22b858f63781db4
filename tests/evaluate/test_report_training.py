"""The training curve in a report (from a run's metrics.jsonl: the demo run's own, kept in docs/results), and the
demo's REPORT with its training curve and a base / SFT / SFT+RL episode browser read from the evaluation directory,
as ``make demo`` writes it."""

from __future__ import annotations

import doctest
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from sandgym.evaluate import report_browser, report_training
from sandgym.evaluate.episodes import append_rows
from sandgym.evaluate.report_training import training_section, training_table
from sandgym.evaluate.report_writer import Figure, Table, pyplot
from sandgym.experiments.demo import demo_report, eval_config, report
from sandgym.train.config import load_config
from sandgym.train.metrics import load_metrics
from tests.evaluate.browser_episodes import three_policies

DEMO_RUN = Path(__file__).resolve().parents[2] / "docs" / "results" / "make_demo-2026-12-06"


@pytest.fixture
def train_dir(tmp_path) -> Path:
    """A run directory holding the recorded demo run's metrics.jsonl (6 RL steps)."""
    run = tmp_path / "train"
    run.mkdir()
    shutil.copy(DEMO_RUN / "train_metrics.jsonl", run / "metrics.jsonl")
    return run


@pytest.mark.parametrize("module", [report_training, report_browser])
def test_docstring_examples_hold(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_training_table_has_every_step_of_a_short_run(train_dir):
    rows = load_metrics(train_dir)
    table = training_table(rows)
    assert table.header == ("step", "training reward", "training success")
    assert [r[0] for r in table.rows] == ["1", "2", "3", "4", "5", "6"]
    assert table.rows[0][1:] == (f"{rows[0]['rollout/reward_mean']:.3f}", f"{rows[0]['rollout/success_rate']:.3f}")


def test_a_long_run_shows_twenty_steps_and_held_out_completion_where_evaluated():
    rows = [{"step": s, "rollout/reward_mean": s / 100, "rollout/success_rate": s / 200} for s in range(1, 101)]
    curve = [{"step": s, "completion": {"value": 0.5, "low": 0.4, "high": 0.6}} for s in (0, 50, 100)]
    table = training_table(rows, curve)
    steps = [int(r[0]) for r in table.rows]
    assert len(steps) == 20 and steps[0] == 0 and steps[-1] == 100 and table.header[-1] == "held-out completion"
    assert table.rows[-1][-1] == "0.500 [0.400, 0.600]" and table.rows[1][-1] == "n/a"


def test_training_section_says_what_it_shows_or_where_it_looked(train_dir):
    section = training_section(load_metrics(train_dir), source="train/metrics.jsonl")
    assert section.title == "Training" and section.blocks[0].text.startswith("6 RL steps (train/metrics.jsonl)")  # type: ignore[union-attr]
    assert isinstance(section.blocks[-1], Table)
    assert any(isinstance(b, Figure) for b in section.blocks) == (pyplot() is not None)
    missing = training_section([], source="train/metrics.jsonl")
    assert missing.blocks[0].text == "No training metrics at hand (train/metrics.jsonl not found)."  # type: ignore[union-attr]


def test_demo_report_has_the_training_curve_and_browses_three_policies(train_dir, tmp_path):
    evals = tmp_path / "eval"  # the demo's layout: OUT/train beside OUT/eval/<base|sft|sft_rl>
    cfg = eval_config(load_config("examples/quickstart.toml"), evals, n_tasks=4, samples=2, seeds=1)
    cfg = replace(cfg, trained_families=("strings",))
    rows = {name: list(p.rows) for name, p in zip(("base", "sft", "sft_rl"), three_policies(), strict=True)}
    for name, r in rows.items():
        (evals / name).mkdir(parents=True)
        append_rows(evals / name / "episodes.jsonl", r)
    _, metrics = report(evals, cfg, rows, {"sft": 1.0}, {"base": "b", "sft": "s", "sft_rl": "r"})
    demo_report(cfg, metrics, {"sft": 1.0}, under="eval/").write(tmp_path, stem="REPORT")  # as main() does
    md, page = (tmp_path / "REPORT.md").read_text(), (tmp_path / "REPORT.html").read_text()
    assert md.index("## Training") < md.index("## Episodes") < md.index("## Stage timings")
    assert "6 RL steps (train/metrics.jsonl)" in md and "| step | training reward | training success |" in md
    assert "48 episodes of base model, SFT only, SFT + RL" in md
    if pyplot() is not None:
        assert "alt='training curve'" in page and page.count("data:image/png;base64,") == 2
    data = json.loads(page.split("<script type='application/json' id='sg-data'>")[1].split("</script>")[0])
    assert data["policies"] == ["base model", "SFT only", "SFT + RL"] and len(data["episodes"]) == 48
    per_policy = (evals / "sft_rl" / "report.html").read_text()  # each eval report: the policy and its baseline
    assert '"policies":["SFT + RL","base model"]' in per_policy

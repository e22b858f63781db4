import json

import pytest

from sandgym.cli import main
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.episodes import read_rows
from sandgym.evaluate.report import SECTIONS
from sandgym.evaluate.run import run

SUITES = ("coding/strings:heldout", "coding/parsing:heldout", "long_context/needle:heldout")


@pytest.fixture(scope="module")
def oracle_vs_noop(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "oracle"
    cfg = EvalConfig(policy="oracle", baseline="noop", suites=SUITES, n_tasks=2, samples=2, seeds=(0, 1), out=str(out))
    return run(cfg)


def test_oracle_scores_one_and_noop_zero_through_the_pipeline(oracle_vs_noop):
    m = oracle_vs_noop.metrics
    assert m["overall"]["completion"]["value"] == 1.0
    assert m["baseline"]["overall"]["completion"]["value"] == 0.0
    assert m["overall"]["pass_at_k"]["2"]["value"] == 1.0 and m["overall"]["pass_hat_k"]["2"]["value"] == 1.0
    assert m["baseline"]["gain_overall"]["diff"]["value"] == pytest.approx(1.0)
    assert m["failure_modes"]["success"] == 1.0
    # parsing is an unseen family: the transfer view separates it
    assert m["transfer"]["unseen"]["tasks"] == 2 and m["transfer"]["trained"]["tasks"] == 4
    assert m["schema"] == "sandgym.eval/v1"
    assert m["versions"]["seeds"] == [0, 1]
    assert len(read_rows(oracle_vs_noop.out_dir / "episodes.jsonl")) == 6 * 2 * 2


def test_report_renders_every_section(oracle_vs_noop):
    md = oracle_vs_noop.report_md.read_text()
    for section in SECTIONS:
        assert f"## {section}" in md, section
    html = oracle_vs_noop.report_html.read_text()
    assert html.count("data:image/png;base64,") >= 3
    assert "<table>" in html


def test_interrupted_evaluation_resumes_without_redoing_episodes(tmp_path):
    out = tmp_path / "ev"
    small = EvalConfig(policy="oracle", suites=SUITES[:1], n_tasks=2, samples=2, seeds=(0,), out=str(out))
    run(small)
    first = read_rows(out / "episodes.jsonl")
    full = EvalConfig(policy="oracle", suites=SUITES[:1], n_tasks=2, samples=2, seeds=(0, 1), out=str(out))
    run(full)
    rows = read_rows(out / "episodes.jsonl")
    assert rows[: len(first)] == first  # nothing redone or rewritten
    assert sorted({r.key for r in rows}) == sorted({(s, r.task_id) for s in (0, 1) for r in first})
    assert len(rows) == 2 * len(first)


def test_eval_compare_puts_runs_side_by_side(oracle_vs_noop, tmp_path, capsys):
    other = tmp_path / "noop"
    run(EvalConfig(policy="noop", suites=SUITES[:1], n_tasks=2, samples=1, out=str(other)))
    assert main(["eval", "compare", str(oracle_vs_noop.out_dir), str(other)]) == 0
    table = capsys.readouterr().out
    assert "| oracle |" in table and "| noop |" in table
    assert table.count("\n") >= 3


def test_eval_cli_errors_are_clear(tmp_path, capsys):
    assert main(["eval", "--policy", "oracle", "--out", str(tmp_path)]) == 2
    assert "--suite" in capsys.readouterr().err
    assert main(["eval", "compare", str(tmp_path)]) == 2
    assert "metrics.json" in capsys.readouterr().err


def test_metrics_json_is_machine_readable(oracle_vs_noop):
    data = json.loads((oracle_vs_noop.out_dir / "metrics.json").read_text())
    assert {"overall", "by_domain", "by_family", "transfer", "stability", "failure_modes", "cost"} <= set(data)


def test_broken_sandbox_stops_the_evaluation_with_its_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    argv = ["eval", "--policy", "oracle", "--suite", SUITES[0], "--n-tasks", "2", "--samples", "1",
            "--sandbox", "e2b", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "'e2b' sandbox" in err and "E2B_API_KEY" in err and "sandgym sandbox check --backend e2b" in err
    assert not (tmp_path / "metrics.json").exists()  # no report of zeros that hides the cause

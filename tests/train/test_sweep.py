"""Sweeps (seeds x variations), periodic held-out evaluation and the sweep report, on the tiny model + toy env."""

import doctest
import json
import shutil
from pathlib import Path

import pytest
import torch

import sandgym.experiments.sweep
import tests.train.toy_env  # noqa: F401  (registers toy/Letters-v0)
from sandgym.cli import main
from sandgym.evaluate.metrics import format_interval
from sandgym.experiments.periodic_eval import load_curve
from sandgym.experiments.periodic_eval import train_with_eval as run
from sandgym.experiments.sweep import parse_vary, plan, run_sweep
from sandgym.experiments.sweep_report import compare_variants, hierarchical_ci
from sandgym.train.config import load_config
from tests.train.test_loop import toy_overrides

torch.set_num_threads(1)


def sweep_overrides(model_dir: Path, **extra: object) -> list[str]:
    """The toy training config for every run (seed and out_dir are set by the sweep): 2 steps, eval every 2."""
    base = {"optim.steps": 2, "checkpoint.every": 2, "eval.every": 2, "eval.n_tasks": 2, "eval.samples": 2, **extra}
    return [o for o in toy_overrides(model_dir, Path("unused"), **base) if not o.startswith("out_dir=")]


def test_periodic_eval_writes_a_curve_in_the_training_env(tiny_model_dir, tmp_path):
    cfg = load_config(None, [*toy_overrides(tiny_model_dir, tmp_path / "run", **{
        "optim.steps": 5, "checkpoint.every": 5, "eval.every": 2, "eval.n_tasks": 2, "eval.samples": 2})])
    run(cfg)
    curve = load_curve(tmp_path / "run")
    assert [r["step"] for r in curve] == [0, 2, 4, 5]  # before training, every 2 steps, after the last
    for r in curve:
        assert r["tasks"] == 2 and r["episodes"] == 4
        assert 0 <= r["completion"]["low"] <= r["completion"]["value"] <= r["completion"]["high"] <= 1
    # the toy env (not the tool env) scored the episodes: its reward is the share of lowercase first letters
    rows = [json.loads(x) for x in (tmp_path / "run/eval/step-000005/episodes.jsonl").read_text().splitlines()]
    assert {tuple(r["reward_components"]) for r in rows} == {("letters@v1",)}


def test_resumed_run_rewrites_the_curve_after_its_checkpoint(tiny_model_dir, tmp_path):
    over = toy_overrides(tiny_model_dir, tmp_path / "run", **{
        "optim.steps": 4, "checkpoint.every": 2, "eval.every": 2, "eval.n_tasks": 2})
    run(load_config(None, over))
    shutil.rmtree(tmp_path / "run/checkpoints/step-000004")  # resumes from step 2
    run(load_config(None, over), resume=True)
    assert [r["step"] for r in load_curve(tmp_path / "run")] == [0, 2, 4]


def test_periodic_eval_does_not_change_training(tiny_model_dir, tmp_path):
    rewards = {}
    for every in (0, 1):
        cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / str(every), **{
            "optim.steps": 3, "checkpoint.every": 3, "eval.every": every, "eval.n_tasks": 2}))
        run(cfg)
        rewards[every] = [json.loads(x)["rollout/reward_mean"]
                          for x in (tmp_path / str(every) / "metrics.jsonl").read_text().splitlines()]
    assert rewards[0] == rewards[1]


def test_sweep_2x2_completes_resumes_only_the_missing_run_and_reports_every_run(tiny_model_dir, tmp_path):
    out = tmp_path / "sweep"
    kw = dict(seeds=2, vary=["algorithm.name=grpo,rloo"], out=out, overrides=sweep_overrides(tiny_model_dir))
    state = run_sweep(None, **kw)
    runs = state["runs"]
    assert [(r["variant"], r["seed"], r["status"]) for r in runs] == [
        ("algorithm.name-grpo", 0, "done"), ("algorithm.name-grpo", 1, "done"),
        ("algorithm.name-rloo", 0, "done"), ("algorithm.name-rloo", 1, "done")]
    for r in runs:
        run_dir = Path(r["out_dir"])
        cfg = (run_dir / "config.toml").read_text()
        assert f"seed = {r['seed']}" in cfg and r["variant"].split("-")[1] in cfg
        assert [x["step"] for x in load_curve(run_dir)] == [0, 2]
    md = (out / "report.md").read_text()
    for r in runs:
        assert f"{r['variant']}/seed-{r['seed']}" in md
    for section in ("## Final metrics per variant", "## Paired comparisons", "## Learning curves", "## Runs"):
        assert section in md
    html_text = (out / "report.html").read_text()
    assert html_text.count("data:image/png;base64,") == 3  # both learning curves and the final metrics
    metrics = json.loads((out / "sweep_metrics.json").read_text())
    assert metrics["comparisons"]["algorithm.name-rloo"]["reward"]["n_pairs"] == 2
    assert metrics["comparisons"]["algorithm.name-rloo"]["completion_paired_by"] == "seed/task"
    assert metrics["comparisons"]["algorithm.name-rloo"]["completion"]["n_pairs"] == 4  # 2 seeds x 2 tasks
    grpo = metrics["variants"]["algorithm.name-grpo"]
    assert grpo["gain_over_start"]["n_pairs"] == 4
    start, final = grpo["start_completion"], grpo["final_completion"]
    assert start["low"] <= start["value"] <= start["high"]
    assert grpo["gain_over_start"]["diff"]["value"] == pytest.approx(final["value"] - start["value"])
    assert f"| {format_interval(start)} | {format_interval(final)} |" in md

    # interruption: one run lost its final checkpoint; re-running redoes that run only
    victim = Path(runs[1]["out_dir"])
    shutil.rmtree(victim / "checkpoints" / "step-000002")
    others = [Path(r["out_dir"]) / "metrics.jsonl" for r in runs if Path(r["out_dir"]) != victim]
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in others}
    state = run_sweep(None, **kw)
    assert [r["status"] for r in state["runs"]] == ["skipped", "done", "skipped", "skipped"]
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in others} == before
    assert (victim / "checkpoints" / "step-000002").is_dir()
    assert len((victim / "metrics.jsonl").read_text().splitlines()) == 2
    # a third invocation has nothing left to do
    assert {r["status"] for r in run_sweep(None, **kw)["runs"]} == {"skipped"}


def test_failed_run_is_reported_not_hidden_and_the_sweep_goes_on(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    args = ["sweep", "--seeds", "1", "--vary", "algorithm.name=grpo,bogus", "--out", str(out)]
    for o in sweep_overrides(tiny_model_dir, **{"eval.every": 0}):
        args += ["--set", o]
    assert main(args) == 1
    printed = capsys.readouterr().out
    assert "FAILED algorithm.name-bogus/seed-0" in printed and "algorithm.name" in printed
    sweep = json.loads((out / "sweep.json").read_text())
    status = {r["variant"]: r for r in sweep["runs"]}
    assert status["algorithm.name-grpo"]["status"] == "done"
    assert status["algorithm.name-bogus"]["status"] == "failed"
    assert "bogus" in status["algorithm.name-bogus"]["error"]
    md = (out / "report.md").read_text()
    assert "FAILED" in md and "algorithm.name-bogus/seed-0" in md and "1 failed" in md
    (out / "report.md").unlink()
    assert main(["sweep", "--report-only", "--out", str(out)]) == 0
    assert "algorithm.name-bogus/seed-0" in (out / "report.md").read_text()


def test_paired_comparison_on_constructed_data():
    # variant b beats a by exactly +0.2 reward on seeds 0, 1, 2; seed 3 exists only in b and is not paired
    a = {s: {"final_reward": r, "final_completion": c} for s, r, c in ((0, 0.1, 0.5), (1, 0.3, 0.5), (2, 0.5, 0.5))}
    b = {s: {"final_reward": r + 0.2, "final_completion": 0.5} for s, r in ((0, 0.1), (1, 0.3), (2, 0.5))}
    b[3] = {"final_reward": 5.0, "final_completion": 1.0}
    out = compare_variants({"a": a, "b": b})
    rew = out["b"]["reward"]
    assert out["b"]["baseline"] == "a" and rew["n_pairs"] == 3
    assert rew["diff"]["value"] == pytest.approx(0.2)
    assert rew["diff"]["low"] == pytest.approx(0.2) and rew["diff"]["high"] == pytest.approx(0.2)
    assert rew["p_value"] == pytest.approx(0.25)  # exact sign flips: 2 of 8 patterns reach |mean| = 0.2
    assert out["b"]["completion"]["diff"]["value"] == pytest.approx(0.0)
    assert out["b"]["completion"]["p_value"] == 1.0
    # per-task data pairs (seed, task): only shared tasks of shared seeds count
    a[0]["per_task"], b[0]["per_task"] = {"t1": [0, 0], "t2": [1, 1]}, {"t1": [1, 1], "t2": [1, 1], "t3": [0]}
    a[1]["per_task"], b[1]["per_task"] = {"t1": [0, 1]}, {"t1": [1, 1]}
    a[2]["per_task"], b[2]["per_task"] = {"t1": [1, 1]}, {"t1": [1, 1]}
    b[3]["per_task"] = {"t1": [1]}
    c = compare_variants({"a": a, "b": b})["b"]
    assert c["completion_paired_by"] == "seed/task" and c["completion"]["n_pairs"] == 4
    assert c["completion"]["diff"]["value"] == pytest.approx((1 + 0 + 0.5 + 0) / 4)


def test_hierarchical_interval_and_helpers():
    ci = hierarchical_ci({0: {"t1": [1, 1], "t2": [0, 0]}, 1: {"t1": [1, 0], "t2": [1, 1]}})
    assert ci.value == pytest.approx((0.5 + 0.75) / 2) and 0 <= ci.low <= ci.value <= ci.high <= 1
    same = hierarchical_ci({0: {"t": [1.0]}, 1: {"t": [1.0]}})
    assert (same.low, same.value, same.high) == (1.0, 1.0, 1.0)
    assert parse_vary(["algorithm.name=grpo,rloo", "optim.lr=1e-3"]) == [
        ("algorithm.name", ["grpo", "rloo"]), ("optim.lr", ["1e-3"])]
    specs = plan(Path("d"), [0, 1], parse_vary(["a.b=1,2", "c=x,y"]))
    assert len(specs) == 8 and len({s.out_dir for s in specs}) == 8
    mixes = plan(Path("d"), [0], parse_vary(['domains.mix=[{suite = "coding/strings:train"}],[{suite = "coding:train"}]']))
    assert len({s.variant for s in mixes}) == 2 and all("/" not in s.variant for s in mixes)
    with pytest.raises(Exception, match="seeds"):
        parse_vary(["seed=1,2"])
    assert doctest.testmod(sandgym.experiments.sweep).failed == 0


def test_transfer_intervals_split_trained_and_unseen_tasks():
    from sandgym.experiments.sweep_report import _split_ci

    seeds = {
        0: {"per_task": {"a": [1, 1], "b": [0, 1], "u": [0, 0]}, "per_task_start": {"a": [0, 0], "b": [0, 0], "u": [0, 0]},
            "unseen_tasks": {"u"}},
        1: {"per_task": {"a": [1, 1], "b": [1, 1], "u": [1, 0]}, "per_task_start": {"a": [1, 0], "b": [0, 0], "u": [0, 0]},
            "unseen_tasks": {"u"}},
    }
    trained = _split_ci(seeds, "per_task", unseen=False)
    unseen = _split_ci(seeds, "per_task", unseen=True)
    assert trained.value == pytest.approx((0.75 + 1.0) / 2) and unseen.value == pytest.approx((0.0 + 0.5) / 2)
    assert _split_ci(seeds, "per_task_start", unseen=False).value == pytest.approx((0 + 0.25) / 2)
    assert unseen.low <= unseen.value <= unseen.high
    del seeds[1]["per_task_start"]  # a seed without a step-0 evaluation: no interval rather than a biased one
    assert _split_ci(seeds, "per_task_start", unseen=False) is None


def test_the_loop_without_an_eval_hook_refuses_eval_every(tmp_path):
    from sandgym.errors import ConfigError
    from sandgym.train.loop import run as loop_run

    cfg = load_config(None, ["eval.every=2", f'out_dir="{tmp_path}"'])
    with pytest.raises(ConfigError, match="train_with_eval"):
        loop_run(cfg)

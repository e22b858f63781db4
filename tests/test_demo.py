"""The demo's attribution report on constructed episodes (the real demo run is recorded in docs/BENCHMARKS.md)."""

from pathlib import Path

import pytest

from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.run import load_tasks
from sandgym.experiments.demo import eval_config, report
from sandgym.train.config import load_config


def _rows(rate: dict[str, float], n_tasks: int = 12, samples: int = 4) -> list[EpisodeRow]:
    rows = []
    for fam, p in rate.items():
        for t in range(n_tasks):
            for s in range(samples):
                ok = (t * samples + s) % 20 < p * 20  # deterministic share p of successes
                rows.append(EpisodeRow(seed=0, task_id=f"{fam}-{t}", domain="coding", family=fam,
                                       unseen=fam == "parsing", sample=s, success=ok, reward=float(ok),
                                       failure_mode="success" if ok else "wrong_answer", turns=1, gen_tokens=10,
                                       sandbox_s=0.1, truncated=False, infra_failure=False))
    return rows


def test_attribution_table_and_verdict(tmp_path):
    cfg = eval_config(load_config("examples/quickstart.toml"), tmp_path, n_tasks=12, samples=4, seeds=1)
    assert "coding/parsing:heldout" in cfg.suites and cfg.trained_families
    rows = {
        "base": _rows({"strings": 0.25, "parsing": 0.0}),
        "sft": _rows({"strings": 0.5, "parsing": 0.0}),
        "sft_rl": _rows({"strings": 0.9, "parsing": 0.0}),
    }
    for name in rows:
        (tmp_path / name).mkdir()
    cfg = cfg.__class__(**{**cfg.__dict__, "trained_families": ("strings",)})
    text, metrics = report(tmp_path, cfg, rows, {"sft": 1.0}, {"base": "b", "sft": "s", "sft_rl": "r"})
    assert "| base model |" in text and "| SFT only |" in text and "| SFT + RL |" in text
    assert "RL added a measurable gain" in text
    assert metrics["rl_vs_sft"]["gain_trained"]["diff"]["value"] > 0.3
    assert (tmp_path / "REPORT.md").is_file() and (tmp_path / "sft_rl" / "report.html").is_file()
    rows["sft_rl"] = rows["sft"]
    text, _ = report(tmp_path, cfg, rows, {}, {"base": "b", "sft": "s", "sft_rl": "r"})
    assert "not established" in text


def test_rl_verdict_needs_interval_and_paired_test():
    from sandgym.experiments.demo import rl_verdict

    assert "measurable gain" in rl_verdict({"diff": {"low": 0.04}, "p_value": 0.01})
    # the long-context run at demo size (docs/results/long_context_quick-2026-12-04/): interval [+0.042, +0.333]
    # but p=0.12 over 24 tasks: not a measured gain
    suggestive = rl_verdict({"diff": {"low": 0.042}, "p_value": 0.122})
    assert "suggestive" in suggestive and "p=0.122" in suggestive and "measurable" not in suggestive
    assert "not established" in rl_verdict({"diff": {"low": 0.0}, "p_value": 0.5})
    assert "not established" in rl_verdict(None)


def test_rerun_with_another_config_is_refused(tmp_path):

    from sandgym.errors import ConfigError
    from sandgym.experiments.demo import check_same_config

    cfg = load_config("examples/quickstart.toml")
    check_same_config(tmp_path, cfg)
    check_same_config(tmp_path, cfg)  # same config: resumes
    other = load_config("examples/quickstart.toml", ["optim.steps=3"])
    with pytest.raises(ConfigError, match="different config"):
        check_same_config(tmp_path, other)


def _tf_rows(recover: float, n_tasks: int = 12, samples: int = 4) -> list[EpisodeRow]:
    """Test-and-fix episodes: every first attempt fails; a share ``recover`` of them is fixed and submitted."""
    from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade

    rows = []
    for t in range(n_tasks):
        for s in range(samples):
            ok = (t * samples + s) % 20 < recover * 20
            o = EpisodeOutcome(task_id=f"strings-{t}", domain="coding", family="strings",
                               grade=Grade(tests_passed=2 * ok, tests_expected=2),
                               actions=Actions(turns=3, submitted=ok, code_actions=3, test_runs=2,
                                               first_test_passed=False, tested_before_submit=ok),
                               truncation=None if ok else "max_turns")
            rows.append(EpisodeRow(seed=0, task_id=o.task_id, domain="coding", family="strings", unseen=False,
                                   sample=s, success=o.success, reward=float(ok), failure_mode=o.failure_mode,
                                   turns=3, gen_tokens=10, sandbox_s=0.1, truncated=not ok, infra_failure=False,
                                   trajectory={"outcome": o.to_dict()}))
    return rows


def test_test_and_fix_track_reports_behaviour_and_rl_change(tmp_path):
    from sandgym.experiments.demo import TRACKS

    cfg = eval_config(load_config(str(TRACKS["test_and_fix"])), tmp_path, n_tasks=12, samples=4, seeds=1)
    cfg = cfg.__class__(**{**cfg.__dict__, "trained_families": ("strings",)})
    rows = {"base": _tf_rows(0.1), "sft": _tf_rows(0.3), "sft_rl": _tf_rows(0.8)}
    for name in rows:
        (tmp_path / name).mkdir()
    text, metrics = report(tmp_path, cfg, rows, {}, {"base": "b", "sft": "s", "sft_rl": "r"})
    assert "| policy | first attempt pass | recovery |" in text and "RL over SFT (paired)" in text
    assert "Behaviour, RL over SFT: recovery +0.458" in text
    assert metrics["sft_rl"]["behaviour"]["recovery"]["value"] > metrics["sft"]["behaviour"]["recovery"]["value"]
    assert "## Behaviour" in (tmp_path / "REPORT.md").read_text()


def test_by_example_track_evaluates_held_out_constants_at_the_trained_level(tmp_path):
    from sandgym.experiments.demo import EVAL_SIZE, TRACKS, runs_tests

    config = load_config(str(TRACKS["test_and_fix_by_example"]))
    assert runs_tests(config.rollout) and config.rollout.code_action == "test" and config.rollout.max_turns >= 3
    cfg = eval_config(config, tmp_path, n_tasks=EVAL_SIZE["test_and_fix_by_example"][0], samples=2, seeds=1)
    assert cfg.suites == ("coding/by_example:heldout", "coding/parsing:heldout")
    assert cfg.difficulty == 1 and cfg.trained_families == ("by_example",)


def test_track_all_refuses_one_config_for_every_track(tmp_path):

    from sandgym.errors import ConfigError
    from sandgym.experiments.demo import main

    with pytest.raises(ConfigError, match="--track all runs each track's own config"):
        main(["--track", "all", "--config", "examples/quickstart.toml", "--out", str(tmp_path)])


def _lc_rows(rate_by_length: dict[int, float], n_tasks: int = 10, samples: int = 2,
             families: tuple[str, str] = ("needle", "aggregation")) -> list[EpisodeRow]:
    """Long-context episodes: per document length, a share of tasks solved (the same task ids for every policy)."""
    rows = []
    for length, p in rate_by_length.items():
        for t in range(n_tasks):
            for s in range(samples):
                ok = t < p * n_tasks
                rows.append(EpisodeRow(seed=0, task_id=f"needle-{t}-t{length}", domain="long_context",
                                       family=families[t % 2 == 0], unseen=t % 2 == 0, sample=s,
                                       success=ok, reward=float(ok), failure_mode="success" if ok else "wrong_answer",
                                       turns=2, gen_tokens=10, sandbox_s=0.1, truncated=False, infra_failure=False,
                                       doc_tokens=length))
    return rows


def test_long_context_track_evaluates_each_length_and_reports_rl_per_length(tmp_path):
    from sandgym.experiments.demo import TRACKS

    cfg = eval_config(load_config(str(TRACKS["long_context"])), tmp_path, n_tasks=15, samples=2, seeds=1)
    assert cfg.suites == tuple(f"long_context:heldout?tokens={n}&placement=file" for n in (1024, 2048, 4096, 8192))
    assert cfg.trained_families == ()  # a domain suite: its unseen families are marked on the tasks
    rows = {"base": _lc_rows({1024: 0.2, 4096: 0.0, 8192: 0.0}), "sft": _lc_rows({1024: 0.6, 4096: 0.2, 8192: 0.2}),
            "sft_rl": _lc_rows({1024: 0.6, 4096: 0.4, 8192: 0.8})}
    for name in rows:
        (tmp_path / name).mkdir()
    text, metrics = report(tmp_path, cfg, rows, {}, {"base": "b", "sft": "s", "sft_rl": "r"})
    assert "| policy | 1K | 4K | 8K | 4K+ |" in text and "| RL over SFT (paired) | +0.000" in text
    assert metrics["rl_vs_sft"]["gain_by_length"]["8K"]["diff"]["low"] > 0
    pooled = metrics["rl_vs_sft"]["gain_by_length_pooled"]  # 4K and 8K together: 20 tasks, (0.2 + 0.6) / 2
    assert list(pooled) == ["4K+"] and pooled["4K+"]["diff"]["value"] == pytest.approx(0.4)
    assert metrics["sft_rl"]["by_length_pooled"]["4K+"]["completion"]["value"] == pytest.approx(0.6)
    assert "Per document length, RL over SFT: 1K +0.000" in text and "8K +0.600" in text and "4K+ +0.400" in text
    assert "## By document length" in (tmp_path / "REPORT.md").read_text()


def test_bug_reports_are_reported_by_repository_size(tmp_path):
    """A repository's bug reports (``repo_locate``: ``doc_tokens`` is the workspace's size) are grouped like documents
    but named for what they are."""
    from sandgym.experiments.demo import TRACKS

    cfg = eval_config(load_config(str(TRACKS["long_context"])), tmp_path, n_tasks=10, samples=2, seeds=1)
    fams = ("repo_locate", "repo_locate")
    rows = {name: _lc_rows({16000: p, 64000: 0.0}, families=fams) for name, p in (("base", 0.0), ("sft", 0.2),
                                                                                  ("sft_rl", 0.4))}
    for name in rows:
        (tmp_path / name).mkdir()
    text, metrics = report(tmp_path, cfg, rows, {}, {"base": "b", "sft": "s", "sft_rl": "r"})
    assert metrics["base"]["length_subject"] == "repository size"
    assert "Per repository size, RL over SFT: 16K +0.200" in text and "document" not in text
    md = (tmp_path / "REPORT.md").read_text()
    assert "## By repository size" in md and "held-out bug reports" in md and "document length" not in md


def test_make_demo_runs_the_tests_as_spec_track_at_its_quick_size():
    from sandgym.experiments.demo import DEFAULT_TRACK, EVAL_SIZE, TRACKS, track_size

    assert DEFAULT_TRACK == "test_and_fix_by_example"  # `make demo` is multi-turn test-and-fix
    size = track_size(DEFAULT_TRACK, full=False)
    config = load_config(str(TRACKS[DEFAULT_TRACK]), list(size.overrides))
    assert config.optim.steps == 6 and config.optim.lr == pytest.approx(1.5e-4)
    assert (size.n_tasks, size.samples, size.unseen_tasks) == (40, 2, 16)
    assert config.rollout.max_turns >= 3 and config.rollout.code_action == "test"
    cfg = eval_config(config, Path("unused"), n_tasks=size.n_tasks, samples=size.samples, seeds=1,
                      unseen_tasks=size.unseen_tasks)
    assert cfg.suites == ("coding/by_example:heldout", "coding/parsing:heldout@16")
    assert [len([t for t in load_tasks(cfg) if t.family == f]) for f in ("by_example", "parsing")] == [40, 16]
    full = track_size(DEFAULT_TRACK, full=True)
    assert (full.overrides, (full.n_tasks, full.samples), full.unseen_tasks) == ((), EVAL_SIZE[DEFAULT_TRACK], None)
    lc = track_size("long_context", full=False)
    assert lc.overrides == ("optim.steps=4",) and (lc.n_tasks, lc.samples) == (10, 1)
    assert track_size("single_turn", full=False).overrides == ()  # no quick size: as configured


def test_long_context_behaviour_table_leaves_out_test_run_columns(tmp_path):
    from sandgym.experiments.demo import TRACKS, behaviour_table, runs_tests

    lc = load_config(str(TRACKS["long_context"]))
    assert not runs_tests(lc.rollout)  # grep, read_file, submit
    assert runs_tests(load_config(str(TRACKS["test_and_fix"])).rollout)
    assert runs_tests(load_config(str(TRACKS["json_tools"])).rollout)  # every tool, run_tests among them
    cfg = eval_config(lc, tmp_path, n_tasks=10, samples=2, seeds=1)
    rows = {"base": _lc_rows({1024: 0.0}), "sft": _lc_rows({1024: 0.3}), "sft_rl": _lc_rows({1024: 0.6})}
    for name in rows:
        (tmp_path / name).mkdir()
    text, metrics = report(tmp_path, cfg, rows, {}, {"base": "b", "sft": "s", "sft_rl": "r"})
    table = behaviour_table(cfg, metrics)
    assert table is not None and "recovery" not in table.markdown() and "verify before submit" not in text
    assert "| policy | submitted | valid call rate | turns |" in table.markdown()


def test_track_all_report_has_each_tracks_rows_and_lists_missing_ones(tmp_path):
    from sandgym.experiments.demo import TRACKS
    from sandgym.experiments.demo_all import tracks_report

    def run(track: str, rows: dict) -> None:
        out = tmp_path / track / "eval"
        cfg = eval_config(load_config(str(TRACKS[track])), out, n_tasks=12, samples=4, seeds=1)
        if track == "test_and_fix":
            cfg = cfg.__class__(**{**cfg.__dict__, "trained_families": ("strings",)})
        for name in rows:
            (out / name).mkdir(parents=True)
        report(out, cfg, rows, {}, {"base": "b", "sft": "s", "sft_rl": "r"})

    run("test_and_fix", {"base": _tf_rows(0.1), "sft": _tf_rows(0.3), "sft_rl": _tf_rows(0.8)})
    run("long_context", {"base": _lc_rows({1024: 0.0}), "sft": _lc_rows({1024: 0.3}),
                         "sft_rl": _lc_rows({1024: 0.6})})
    rep, table = tracks_report(tmp_path, ["long_context", "test_and_fix", "json_tools"])
    lines = table.splitlines()
    assert len([x for x in lines if x.startswith("| test_and_fix |")]) == 4  # base, SFT, SFT+RL, RL over SFT
    tf_rl = next(x for x in lines if x.startswith("| test_and_fix | RL over SFT (paired) |"))
    assert tf_rl.split(" | ")[2].startswith("+0.458 [") and tf_rl.split(" | ")[3] == "n/a"  # no unseen family
    lc_sft = next(x for x in lines if x.startswith("| long_context | SFT only |"))
    assert lc_sft.split(" | ")[2].startswith("0.200 [") and lc_sft.split(" | ")[3].startswith("0.400 [")
    md, _ = rep.write(tmp_path, stem="REPORT")
    text = md.read_text()
    assert "## Not run" in text and str(tmp_path / "json_tools") in text
    assert "long_context/REPORT.html" in text and "json_tools/REPORT.html" not in text


def test_track_rows_leave_test_run_behaviours_out_where_the_agent_cannot_run_tests():
    from sandgym.experiments.demo_all import track_rows

    iv = {"value": 0.5, "low": 0.4, "high": 0.6}
    policy = {"transfer": {"trained": {"completion": iv}, "unseen": {}},
              "behaviour": {"first_attempt_pass": iv, "verify_before_submit": iv, "valid_call_rate": iv}}
    gain = {"diff": iv, "p_value": 0.01}

    def metrics(rollout):
        return {"base": policy, "sft": {**policy, "config": {"rollout": rollout}}, "sft_rl": policy,
                "rl_vs_sft": {"gain_trained": gain, "behaviour_gain": {"verify_before_submit": gain}}}

    lc = track_rows("long_context", metrics({"code_action": None, "tools": ["grep", "read_file", "submit"]}))
    tf = track_rows("test_and_fix", metrics({"code_action": "test", "tools": ["submit"]}))
    # columns: track, policy, trained, unseen, first attempt pass, recovery, verify before submit, valid calls, ...
    assert lc[1][4] == "n/a" and lc[1][6] == "n/a" and lc[3][6] == "n/a" and lc[1][7].startswith("0.500")
    assert tf[1][4].startswith("0.500") and tf[3][6].startswith("+0.500")


def test_long_context_behaviour_table_shows_evidence_found_when_the_tasks_declare_it(tmp_path):
    from dataclasses import replace as dc_replace

    from sandgym.envs.outcome import Actions, EpisodeOutcome
    from sandgym.experiments.demo import TRACKS, behaviour_table

    def with_evidence(rows: list[EpisodeRow], found: int) -> list[EpisodeRow]:
        actions = Actions(turns=2, submitted=True, tool_calls=2, evidence_found=found, evidence_declared=2)
        outcome = EpisodeOutcome(task_id="t", domain="long_context", family="needle", actions=actions)
        return [dc_replace(r, trajectory={"outcome": outcome.to_dict()}) for r in rows]

    cfg = eval_config(load_config(str(TRACKS["long_context"])), tmp_path, n_tasks=10, samples=2, seeds=1)
    rows = {"base": with_evidence(_lc_rows({1024: 0.0}), 0), "sft": with_evidence(_lc_rows({1024: 0.3}), 1),
            "sft_rl": with_evidence(_lc_rows({1024: 0.6}), 2)}
    for name in rows:
        (tmp_path / name).mkdir()
    _, metrics = report(tmp_path, cfg, rows, {}, {"base": "b", "sft": "s", "sft_rl": "r"})
    table = behaviour_table(cfg, metrics)
    assert table is not None and "| turns | evidence found | repeated calls |" in table.markdown()
    assert "| RL over SFT (paired) |" in table.markdown() and "+0.500" in table.markdown()

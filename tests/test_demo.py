"""The demo's attribution report on constructed episodes (the real demo run is recorded in docs/BENCHMARKS.md)."""

from sandgym.evaluate.episodes import EpisodeRow
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


def test_rerun_with_another_config_is_refused(tmp_path):
    import pytest

    from sandgym.errors import ConfigError
    from sandgym.experiments.demo import check_same_config

    cfg = load_config("examples/quickstart.toml")
    check_same_config(tmp_path, cfg)
    check_same_config(tmp_path, cfg)  # same config: resumes
    other = load_config("examples/quickstart.toml", ["optim.steps=3"])
    with pytest.raises(ConfigError, match="different config"):
        check_same_config(tmp_path, other)

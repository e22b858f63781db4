"""Smoke test of bench/vs_trl.py with the tiny random model: one sandgym GRPO step (and, slow, the whole script)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "vs_trl.py"


def _load_bench():
    if str(BENCH.parent) not in sys.path:  # as when run as a script: bench/honest.py is importable
        sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_vs_trl", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_reward() -> None:
    bench = _load_bench()
    assert bench.reward(" 42 ", 42) == 1.5
    assert bench.reward("41", 42) == 0.5
    assert bench.reward("The answer is 42", 42) == 0.0


def test_sandgym_step_runs_and_changes_the_adapter(tiny_model_dir, monkeypatch) -> None:
    bench = _load_bench()
    # The random model never answers with a number: score by the text instead so the group has reward spread.
    monkeypatch.setattr(bench, "reward", lambda text, answer: float(sum(map(ord, text)) % 7))
    cfg = bench.BenchConfig(model=str(tiny_model_dir), group_size=4, max_new_tokens=8, warmup=0, steps=1, threads=1)
    state = bench.sandgym_setup(cfg)
    lora = {n: p.detach().clone() for n, p in state.policy.model.named_parameters() if p.requires_grad}
    out = bench.sandgym_step(state, 0)
    assert out["step_s"] > 0 and out["generate_s"] > 0 and out["learner_s"] > 0
    assert out["ref_s"] > 0  # beta = 0.04 > 0: the adapter-disabled reference pass ran
    assert out["trained_sequences"] == 4  # beta > 0: every sample is trained on, like TRL
    assert 4 <= out["completion_tokens"] <= 32
    changed = [n for n, p in state.policy.model.named_parameters() if p.requires_grad and not p.detach().equal(lora[n])]
    assert changed


def test_sandgym_train_side_runs_the_training_loop(tiny_model_dir) -> None:
    """The side compared with TRL: the step `sandgym train` runs (engine, env, trajectories, learner, logging)."""
    bench = _load_bench()
    cfg = bench.BenchConfig(model=str(tiny_model_dir), group_size=4, max_new_tokens=8, warmup=0, steps=2, threads=1)
    out = bench.run_sandgym_train(cfg)
    assert len(out["steps"]) == 2
    for step in out["steps"]:
        assert step["step_s"] > step["generate_s"] > 0 and 4 <= step["completion_tokens"] <= 32
        assert step["reward_mean"] == 0.0  # the random model never answers with a bare number
    assert out["peak_rss_mb"] > 0


@pytest.mark.slow
def test_whole_script_both_trainers(tiny_model_dir, tmp_path) -> None:
    pytest.importorskip("trl")
    out = tmp_path / "vs_trl.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--model", str(tiny_model_dir), "--group-size", "4", "--max-new-tokens", "8",
         "--warmup", "1", "--steps", "1", "--repeats", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["sandgym"]["median"]["step_s"] > 0 and data["trl"]["median"]["step_s"] > 0
    assert data["sandgym-train"]["median"]["step_s"] > 0 and data["ratio"]["compared"] == "sandgym-train"
    assert data["ratio"]["time_per_step"] > 0 and data["ratio"]["peak_rss"] > 0
    assert data["ratio"]["time_per_step_by_repeat"] == [data["ratio"]["time_per_step"]]
    assert "ratio to TRL" in proc.stdout and "sandgym train loop" in proc.stdout


def test_repeats_alternate_the_order_and_combine_medians() -> None:
    bench = _load_bench()
    sides = ["sandgym-train", "sandgym", "trl"]
    assert [bench.alternating(sides, r) for r in range(3)] == [sides, sides[::-1], sides]
    runs = [{"median": {"step_s": x, "generate_s": x / 2}, "peak_rss_mb": m} for x, m in ((3.0, 10), (1.0, 30), (2.0, 20))]
    out = bench.combine(runs)
    assert out["median"] == {"step_s": 2.0, "generate_s": 1.0} and out["peak_rss_mb"] == 30
    assert out["step_s_by_repeat"] == [3.0, 1.0, 2.0]


def test_the_loop_side_uses_the_system_prompt_the_template_inserts(tiny_model_dir, tmp_path) -> None:
    """TRL renders the bare question with the template (and its default system message); the loop's env must give
    the same one, or the two trainers sample from different prompts (1.52x the tokens, docs/results/vs_trl-2026-12-03.json)."""
    mod = _load_bench()
    import shutil

    plain = shutil.copytree(tiny_model_dir, tmp_path / "plain")
    assert mod.template_system_prompt(str(plain)) == ""  # ChatML without a default
    from transformers import AutoTokenizer

    tok, smol = AutoTokenizer.from_pretrained(plain), tmp_path / "smol"  # a copy: the fixture is shared
    tok.chat_template = (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are SmolLM<|im_end|>\n' }}{% endif %}"
        "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
    shutil.copytree(plain, smol)
    tok.save_pretrained(smol)
    assert mod.template_system_prompt(str(smol)) == "You are SmolLM"

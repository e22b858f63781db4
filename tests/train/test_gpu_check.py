"""bench/gpu_check.py's CPU path: the tiny preset runs a GRPO step, reports every figure and trains the adapter."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.py"


def _load_bench():
    if str(BENCH.parent) not in sys.path:  # as when run as a script: bench/honest.py is importable
        sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_gpu_check", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_tiny_preset_on_cpu_reports_every_figure_and_trains_the_adapter(tmp_path, capsys) -> None:
    bench = _load_bench()
    out = tmp_path / "gpu.json"
    rc = bench.main(["--preset", "tiny", "--device", "cpu", "--steps", "1", "--warmup", "0", "--group", "4",
                     "--prompt-tokens", "8", "--new-tokens", "4", "--threads", "1", "--out", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["device"].startswith("CPU") and data["machine"]["torch"] and data["machine"]["transformers"]
    assert data["model"]["dtype"] == "float32" and data["model"]["adapter_parameters"] > 0
    assert data["steps_run"] == data["steps_measured"] == 1 and not data["stopped"]
    step = data["median"]
    for key in ("step_s", "generate_s", "reference_s", "learner_s", "generated_tok_per_s", "trained_tok_per_s",
                "peak_memory_mb"):
        assert step[key] > 0, key
    assert step["generated_tokens"] == 4 * 4  # no stop tokens: every completion has exactly --new-tokens tokens
    assert step["trained_tokens"] == 4 * (8 + 4)
    assert step["reward_std"] > 0  # the group has reward spread, so the advantages are not all zero
    assert data["adapter_delta_norm"] > 0
    printed = capsys.readouterr().out
    assert "| per step |" in printed and "load at start" in printed and "load at end" in printed
    assert json.loads(next(line for line in printed.splitlines() if line.startswith("{")))["device"] == data["device"]


def test_offline_tokenizer_fallback_and_vocab_cover(monkeypatch) -> None:
    import torch

    import sandgym.agents.models as models
    from sandgym.errors import ModelNotAvailableError

    bench = _load_bench()

    def missing(name):
        raise ModelNotAvailableError("no wheel")

    monkeypatch.setattr(models, "resolve_model", missing)
    tok, name = bench.load_tokenizer()
    assert "built offline" in name and tok.pad_token_id is not None and tok.eos_token_id is not None
    model = bench.build_model("tiny", tok, torch.device("cpu"), torch.float32, seed=0)
    assert model.config.vocab_size >= len(tok)
    assert bench.reward([2, 3, 4, 5]) == 0.5

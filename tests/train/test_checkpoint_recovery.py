"""Resume after damage: a corrupted latest checkpoint, torn JSONL tails and leftover temp directories."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from sandgym.train.checkpoint import (
    TrainerState,
    adapter_problem,
    remove_stale_tmp,
    resume_checkpoint,
    save_checkpoint,
)
from sandgym.train.logger import MetricsLogger, read_jsonl
from tests.train.test_loop import toy_overrides


class _FakeModel:
    """Writes what ``PeftModel.save_pretrained`` writes: adapter_config.json and adapter_model.safetensors."""

    def save_pretrained(self, path: str) -> None:
        from safetensors.torch import save_file

        Path(path).mkdir(parents=True, exist_ok=True)
        Path(path, "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
        save_file({"w": torch.zeros(64)}, str(Path(path, "adapter_model.safetensors")))


def _state(step: int) -> TrainerState:
    return TrainerState(step=step, optimizer={}, rng={}, domains={}, extra={})


def _ckpt(run: Path, step: int) -> Path:
    return save_checkpoint(run, _FakeModel(), _state(step), keep_last=10)


DAMAGE = {
    "truncated safetensors": lambda c: (c / "adapter_model.safetensors").write_bytes(
        (c / "adapter_model.safetensors").read_bytes()[:100]),
    "empty safetensors": lambda c: (c / "adapter_model.safetensors").write_bytes(b""),
    "missing safetensors": lambda c: (c / "adapter_model.safetensors").unlink(),
    "corrupted adapter_config": lambda c: (c / "adapter_config.json").write_text('{"peft_type": "LO'),
    "binary adapter_config": lambda c: (c / "adapter_config.json").write_bytes(b"\xff\xfe\x00"),
    "corrupted trainer_state": lambda c: (c / "trainer_state.pt").write_bytes(b"not a pickle"),
    "truncated trainer_state": lambda c: (c / "trainer_state.pt").write_bytes(
        (c / "trainer_state.pt").read_bytes()[:20]),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_resume_falls_back_to_the_newest_valid_checkpoint(tmp_path: Path, caplog, damage: str) -> None:
    for step in (2, 4, 6):
        _ckpt(tmp_path, step)
    DAMAGE[damage](tmp_path / "checkpoints" / "step-000006")
    with caplog.at_level("WARNING", logger="sandgym"):
        ckpt, state = resume_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.name == "step-000004" and state is not None and state.step == 4
    assert "step-000006 is damaged" in caplog.text and "resuming from step-000004" in caplog.text
    assert (tmp_path / "checkpoints" / "step-000006.corrupt").is_dir()  # kept for inspection, not listed
    assert resume_checkpoint(tmp_path)[0] == ckpt


def test_no_valid_checkpoint_resumes_from_the_start(tmp_path: Path) -> None:
    c = _ckpt(tmp_path, 2)
    DAMAGE["empty safetensors"](c)
    assert resume_checkpoint(tmp_path) == (None, None)


def test_adapter_problem_names_the_file(tmp_path: Path) -> None:
    c = _ckpt(tmp_path, 2)
    assert adapter_problem(c) is None
    DAMAGE["truncated safetensors"](c)
    assert "adapter_model.safetensors is truncated" in str(adapter_problem(c))


def test_leftover_tmp_dirs_are_removed_at_save_and_resume(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    dead = root / ".tmp-step-000004-999999999"  # no such pid
    mine = root / f".tmp-step-000002-{os.getpid()}"
    alive_pid = os.getppid()
    alive = root / f".tmp-step-000002-{alive_pid}"  # a live process may still be writing it
    for d in (dead, mine, alive):
        d.mkdir(parents=True)
        (d / "adapter_model.safetensors").write_bytes(b"x")
    _ckpt(tmp_path, 6)
    assert not dead.exists() and not mine.exists() and alive.exists()
    dead.mkdir()
    resume_checkpoint(tmp_path)
    assert not dead.exists()
    assert remove_stale_tmp(tmp_path / "nothing") == []


@pytest.mark.parametrize("name", ["metrics.jsonl", "trajectories.jsonl"])
def test_torn_last_jsonl_line_is_tolerated_on_resume(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text('{"step": 1, "x": 1}\n{"step": 2, "x": 2}\n{"step": 3, "x": 3}\n{"step": 4, "x"')
    MetricsLogger(tmp_path, tensorboard=False, keep_up_to_step=3)
    assert [r["step"] for r in read_jsonl(path)] == [1, 2, 3]
    assert path.read_text().endswith("}\n")


def test_read_jsonl_skips_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2, "lo\xe2\x82')
    assert read_jsonl(path) == [{"step": 1}]


def test_train_resume_after_corruption_end_to_end(tiny_model_dir, tmp_path: Path, capsys, caplog) -> None:
    from sandgym.cli import main

    run = tmp_path / "run"
    sets = toy_overrides(tiny_model_dir, run, **{"optim.steps": 4, "checkpoint.every": 2})
    assert main(["train", *[a for s in sets for a in ("--set", s)]]) == 0
    ckpts = run / "checkpoints"
    DAMAGE["truncated safetensors"](ckpts / "step-000004")
    (ckpts / ".tmp-step-000003-999999999").mkdir()
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 5, "loss"')
    with (run / "trajectories.jsonl").open("a") as f:
        f.write('{"step": 5, "mess')
    capsys.readouterr()
    with caplog.at_level("INFO", logger="sandgym"):
        assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    assert "step-000004 is damaged" in caplog.text and "resuming from step-000002" in caplog.text
    assert "truncated" in caplog.text and "torn" in caplog.text
    assert "resumed from step 2" in out.out
    assert [m["step"] for m in read_jsonl(run / "metrics.jsonl")] == [1, 2, 3, 4]
    assert (ckpts / "step-000004" / "adapter_model.safetensors").is_file()
    assert not (ckpts / ".tmp-step-000003-999999999").exists()

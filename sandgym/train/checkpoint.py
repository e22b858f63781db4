"""Checkpoints: a PEFT adapter directory plus the trainer state, written atomically; keep the last N.

Layout: ``RUN_DIR/checkpoints/step-000010/`` holds ``adapter_config.json`` + ``adapter_model.safetensors``
(``PeftModel.from_pretrained`` loads it) and ``trainer_state.pt`` (step, optimiser, RNG states, domain
statistics). A checkpoint is written to a temporary directory and renamed into place, so a run killed at any
moment leaves either the previous checkpoint or the new one, never a half-written one.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

_STEP_DIR = re.compile(r"^step-(\d{6,})$")


@dataclass(frozen=True)
class TrainerState:
    step: int
    optimizer: dict[str, Any]
    rng: dict[str, Any]
    domains: dict[str, Any]
    extra: dict[str, Any]


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(run_dir: Path, model: Any, state: TrainerState, keep_last: int) -> Path:
    """Write ``checkpoints/step-N`` atomically and prune older ones beyond ``keep_last``."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{state.step:06d}"
    tmp = root / f".tmp-step-{state.step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    torch.save(vars(state), tmp / "trainer_state.pt")
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found) if (p / "trainer_state.pt").is_file()]


def latest_checkpoint(run_dir: Path) -> Path | None:
    ckpts = list_checkpoints(run_dir)
    return ckpts[-1] if ckpts else None


def load_trainer_state(ckpt: Path) -> TrainerState:
    data = torch.load(Path(ckpt) / "trainer_state.pt", weights_only=False)
    return TrainerState(**data)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""Checkpoints: a PEFT adapter directory plus the trainer state, written atomically; keep the last N.

Layout: ``RUN_DIR/checkpoints/step-000010/`` holds ``adapter_config.json`` + ``adapter_model.safetensors``
(``PeftModel.from_pretrained`` loads it) and ``trainer_state.pt`` (step, optimiser, RNG states, domain
statistics). A checkpoint is written to a temporary directory and renamed into place, so a run killed at any
moment leaves either the previous checkpoint or the new one, never a half-written one. A crash leaves at most a
``.tmp-step-*`` directory, removed at the next save or resume. A checkpoint damaged afterwards (a full disk, a
copy cut short) is renamed ``step-N.corrupt`` on resume, which continues from the newest valid one.

Finding checkpoints and checking adapter files (read-only, shared with evaluation) live in
:mod:`sandgym.rollout.checkpoints`; the names stay importable from here.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sandgym.rollout.checkpoints import (
    adapter_problem,
    latest_checkpoint,
    list_checkpoints,
    newest_valid_checkpoint,
    safetensors_problem,
)

_TMP_DIR = re.compile(r"^\.tmp-step-\d+-(\d+)$")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerState:
    step: int
    optimizer: dict[str, Any]
    rng: dict[str, Any]
    domains: dict[str, Any]
    extra: dict[str, Any]


def rng_state() -> dict[str, Any]:
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(run_dir: Path, model: Any, state: TrainerState, keep_last: int) -> Path:
    """Write ``checkpoints/step-N`` atomically and prune older ones beyond ``keep_last``."""
    import torch

    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{state.step:06d}"
    tmp = root / f".tmp-step-{state.step:06d}-{os.getpid()}"
    remove_stale_tmp(run_dir)
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


def load_trainer_state(ckpt: Path) -> TrainerState:
    import torch

    data = torch.load(Path(ckpt) / "trainer_state.pt", weights_only=False)
    return TrainerState(**data)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_tmp(run_dir: Path) -> list[Path]:
    """Remove ``.tmp-step-*`` directories left by a crashed save (this process's own, and those of processes
    that no longer run); returns what was removed."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    removed = []
    for p in root.iterdir():
        m = _TMP_DIR.match(p.name)
        if m is None:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or not _pid_alive(pid):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def checkpoint_problem(ckpt: Path) -> tuple[str | None, TrainerState | None]:
    """(why ``ckpt`` cannot be resumed from, None) or (None, its trainer state)."""
    problem = adapter_problem(ckpt)
    if problem is not None:
        return problem, None
    try:
        return None, load_trainer_state(ckpt)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a damaged file
        return f"{Path(ckpt) / 'trainer_state.pt'} cannot be loaded ({type(exc).__name__}: {exc})"[:500], None


def resume_checkpoint(run_dir: Path) -> tuple[Path | None, TrainerState | None]:
    """The newest checkpoint of ``run_dir`` that loads, and its state; (None, None) when there is none.

    Leftover ``.tmp-step-*`` directories are removed. Each damaged newer checkpoint is renamed
    ``step-N.corrupt`` (kept for inspection, never listed again) with a warning that says why and which
    checkpoint the run continues from.
    """
    for p in remove_stale_tmp(run_dir):
        log.info("removed %s, left by a save that did not finish", p)
    skipped: list[tuple[Path, str]] = []
    found: tuple[Path | None, TrainerState | None] = (None, None)
    for ckpt in reversed(list_checkpoints(run_dir)):
        problem, state = checkpoint_problem(ckpt)
        if problem is None:
            found = (ckpt, state)
            break
        skipped.append((ckpt, problem))
    for ckpt, problem in skipped:
        aside = ckpt.with_name(ckpt.name + ".corrupt")
        shutil.rmtree(aside, ignore_errors=True)
        try:
            os.replace(ckpt, aside)
        except OSError:
            aside = ckpt
        target = f"from {found[0].name}" if found[0] is not None else "from the start (no valid checkpoint left)"
        log.warning("checkpoint %s is damaged: %s; moved it to %s and resuming %s", ckpt.name, problem,
                    aside.name, target)
    return found


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "TrainerState", "adapter_problem", "checkpoint_problem", "latest_checkpoint", "list_checkpoints",
    "load_trainer_state", "newest_valid_checkpoint", "remove_stale_tmp", "resume_checkpoint", "rng_state",
    "safetensors_problem", "save_checkpoint", "set_rng_state",
]

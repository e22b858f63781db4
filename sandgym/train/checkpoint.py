"""Checkpoints: a PEFT adapter directory plus the trainer state, written atomically; keep the last N.

Layout: ``RUN_DIR/checkpoints/step-000010/`` holds ``adapter_config.json`` + ``adapter_model.safetensors``
(``PeftModel.from_pretrained`` loads it) and ``trainer_state.pt`` (step, optimiser, RNG states, domain
statistics). A checkpoint is written to a temporary directory and renamed into place, so a run killed at any
moment leaves either the previous checkpoint or the new one, never a half-written one. A crash leaves at most a
``.tmp-step-*`` directory, removed at the next save or resume. A checkpoint damaged afterwards (a full disk, a
copy cut short) is renamed ``step-N.corrupt`` on resume, which continues from the newest valid one.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_STEP_DIR = re.compile(r"^step-(\d{6,})$")
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
    import numpy as np
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
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


def adapter_problem(adapter_dir: Path) -> str | None:
    """Why the PEFT adapter in ``adapter_dir`` cannot be loaded (None when it looks whole).

    Checks ``adapter_config.json`` parses to an object and ``adapter_model.safetensors`` has a readable header
    whose tensors fit in the file, without loading any weights.
    """
    adapter_dir = Path(adapter_dir)
    config = adapter_dir / "adapter_config.json"
    try:
        data = json.loads(config.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return f"{config} is missing"
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return f"{config} is not valid JSON ({exc})"
    if not isinstance(data, dict):
        return f"{config} is not a JSON object"
    weights = adapter_dir / "adapter_model.safetensors"
    if not weights.is_file():
        if (adapter_dir / "adapter_model.bin").is_file():
            return None
        return f"{weights} is missing"
    return safetensors_problem(weights)


def safetensors_problem(path: Path) -> str | None:
    """Why the safetensors file at ``path`` is damaged (empty, truncated, bad header), or None."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{path} is truncated ({size} bytes; a safetensors file starts with an 8-byte header size)"
            n = int.from_bytes(head, "little")
            if n > size - 8:
                return f"{path} is truncated ({size} bytes, its header alone needs {n + 8})"
            header = json.loads(f.read(n).decode("utf-8"))
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    except ValueError as exc:
        return f"{path} has a damaged header ({exc})"
    if not isinstance(header, dict):
        return f"{path} has a damaged header (not a JSON object)"
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(x, int) for x in offsets)):
            return f"{path} has a damaged header (tensor {name!r} has no data_offsets)"
        end = max(end, offsets[1])
    if 8 + n + end > size:
        return f"{path} is truncated ({size} bytes, its tensors need {8 + n + end})"
    return None


def checkpoint_problem(ckpt: Path) -> tuple[str | None, TrainerState | None]:
    """(why ``ckpt`` cannot be resumed from, None) or (None, its trainer state)."""
    problem = adapter_problem(ckpt)
    if problem is not None:
        return problem, None
    try:
        return None, load_trainer_state(ckpt)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a damaged file
        return f"{Path(ckpt) / 'trainer_state.pt'} cannot be loaded ({type(exc).__name__}: {exc})"[:500], None


def newest_valid_checkpoint(run_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest checkpoint whose adapter files are whole (weights are not loaded), and the newer damaged ones
    with why; read-only, for evaluation."""
    skipped: list[tuple[Path, str]] = []
    for ckpt in reversed(list_checkpoints(run_dir)):
        problem = adapter_problem(ckpt)
        if problem is None:
            return ckpt, skipped
        skipped.append((ckpt, problem))
    return None, skipped


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

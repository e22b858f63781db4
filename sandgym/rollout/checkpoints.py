"""Run-directory and checkpoint discovery, read-only (training writes checkpoints, evaluation reads them).

``RUN_DIR/checkpoints/step-000010/`` holds a PEFT adapter (``adapter_config.json`` +
``adapter_model.safetensors``) and ``trainer_state.pt``; see :mod:`sandgym.train.checkpoint` for how they are
written. Nothing heavy is imported: a damaged adapter is reported without loading any weights.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_STEP_DIR = re.compile(r"^step-(\d{6,})$")


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


__all__ = ["adapter_problem", "latest_checkpoint", "list_checkpoints", "newest_valid_checkpoint",
           "safetensors_problem"]

"""``DIR/sweep.json`` of a sweep: its schema, reading and atomic writing (shared by the sweep and its report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError

SCHEMA = "sandgym.sweep/v1"


def load_sweep(out: str | Path) -> dict[str, Any]:
    path = Path(out) / "sweep.json"
    if not path.exists():
        raise ConfigError(f"{path} does not exist; run `sandgym sweep CONFIG --out {out}` first")
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)


__all__ = ["SCHEMA", "load_sweep", "write_json"]

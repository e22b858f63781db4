"""``sandgym eval compare DIR ...``: several evaluations side by side (from their ``metrics.json``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError


def load_metrics(d: str | Path) -> dict[str, Any]:
    path = Path(d) / "metrics.json"
    if not path.is_file():
        raise ConfigError(f"{str(d)!r} has no metrics.json; pass directories written by `sandgym eval --out DIR`")
    return json.loads(path.read_text(encoding="utf-8"))


def _fmt(x: dict[str, float] | None) -> str:
    return "n/a" if not x else f"{x['value']:.3f} [{x['low']:.3f}, {x['high']:.3f}]"


def compare_table(dirs: Sequence[str | Path]) -> str:
    """A markdown table: one row per evaluation."""
    header = "| evaluation | policy | completion | trained | unseen | pass@1 | mean reward |\n|---|---|---|---|---|---|---|"
    rows = []
    for d in dirs:
        m = load_metrics(d)
        ov, tr = m["overall"], m["transfer"]
        rows.append(
            f"| {d} | {m.get('policy', {}).get('spec', '?')} | {_fmt(ov.get('completion'))} | "
            f"{_fmt(tr['trained'].get('completion'))} | {_fmt(tr['unseen'].get('completion'))} | "
            f"{_fmt(ov.get('pass_at_k', {}).get('1'))} | {_fmt(ov.get('reward'))} |"
        )
    return "\n".join([header, *rows])

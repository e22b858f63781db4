"""``sandgym eval compare DIR ...``: several evaluations side by side (from their ``metrics.json``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError
from sandgym.evaluate.report_writer import Table, format_interval


def load_metrics(d: str | Path) -> dict[str, Any]:
    path = Path(d) / "metrics.json"
    if not path.is_file():
        raise ConfigError(f"{str(d)!r} has no metrics.json; pass directories written by `sandgym eval --out DIR`")
    return json.loads(path.read_text(encoding="utf-8"))


def compare_table(dirs: Sequence[str | Path]) -> str:
    """A markdown table: one row per evaluation."""
    rows = []
    for d in dirs:
        m = load_metrics(d)
        ov, tr = m["overall"], m["transfer"]
        rows.append((str(d), str(m.get("policy", {}).get("spec", "?")), format_interval(ov.get("completion")),
                     format_interval(tr["trained"].get("completion")), format_interval(tr["unseen"].get("completion")),
                     format_interval(ov.get("pass_at_k", {}).get("1")), format_interval(ov.get("reward"))))
    return Table(("evaluation", "policy", "completion", "trained", "unseen", "pass@1", "mean reward"),
                 tuple(rows)).markdown()

"""What every bench prints besides its figures: the machine's load, and the spread of repeats."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence


def load_line(when: str) -> str:
    """``load at start: 1.23 (1/5/15 min: 1.23 0.98 0.75), 2 CPUs``."""
    one, five, fifteen = os.getloadavg()
    return f"load at {when}: {one:.2f} (1/5/15 min: {one:.2f} {five:.2f} {fifteen:.2f}), {os.cpu_count()} CPUs"


def spread(xs: Sequence[float], fmt: str = ".1f") -> str:
    """``median (min-max, n=K)`` of repeated measurements."""
    if not xs:
        return "-"
    return f"{format(statistics.median(xs), fmt)} ({format(min(xs), fmt)}-{format(max(xs), fmt)}, n={len(xs)})"

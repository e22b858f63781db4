"""The progress bar of rollouts (training steps, evaluation episodes): tqdm on stderr."""

from __future__ import annotations

import sys
from typing import Any


def progress(total: int, initial: int = 0, desc: str = "") -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, file=sys.stderr, dynamic_ncols=True)


__all__ = ["progress"]

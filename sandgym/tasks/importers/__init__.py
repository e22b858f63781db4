"""Importers for formats people already have: HumanEval-style and MBPP-style JSONL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sandgym.errors import TaskError
from sandgym.tasks.importers.humaneval import import_humaneval
from sandgym.tasks.importers.mbpp import import_mbpp
from sandgym.tasks.importers.verify import ReferenceCheck, check_reference, verify_references
from sandgym.tasks.task import Task

IMPORTERS: dict[str, Callable[..., list[Task]]] = {"humaneval": import_humaneval, "mbpp": import_mbpp}


def import_file(fmt: str, path: str | Path, *, split: str = "heldout") -> list[Task]:
    """Import ``path`` in format ``fmt`` ('humaneval' or 'mbpp')."""
    if fmt not in IMPORTERS:
        raise TaskError(f"unknown import format {fmt!r}; use one of {sorted(IMPORTERS)}")
    if split not in ("train", "heldout"):
        raise TaskError(f"split={split!r} is not one of ('train', 'heldout')")
    return IMPORTERS[fmt](path, split=split)


__all__ = ["IMPORTERS", "ReferenceCheck", "check_reference", "import_file", "import_humaneval", "import_mbpp",
           "verify_references"]

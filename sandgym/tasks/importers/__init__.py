"""Importers for formats people already have: HumanEval-style and MBPP-style JSONL, reasoning-gym entries."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

from sandgym.errors import TaskError
from sandgym.tasks.importers.common import check_visible
from sandgym.tasks.importers.humaneval import import_humaneval
from sandgym.tasks.importers.mbpp import import_mbpp
from sandgym.tasks.importers.reasoning_gym import import_reasoning_gym
from sandgym.tasks.importers.verify import ReferenceCheck, check_reference, verify_references
from sandgym.tasks.task import Task

IMPORTERS: dict[str, Callable[..., list[Task]]] = {"humaneval": import_humaneval, "mbpp": import_mbpp,
                                                   "reasoning_gym": import_reasoning_gym}
"""Format -> importer ``(path, *, split) -> list[Task]``. Layers above tasks add theirs with ``register_importer``
(``import sandgym.interop`` adds ``harbor``), so tasks never imports upward."""


def register_importer(fmt: str, importer: Callable[..., list[Task]]) -> None:
    """Make ``import_file(fmt, ...)`` and ``sandgym tasks import --format fmt`` use ``importer``."""
    IMPORTERS[fmt] = importer


def import_file(fmt: str, path: str | Path, *, split: str = "heldout", visible: int = 0) -> list[Task]:
    """Import ``path`` in format ``fmt`` ('humaneval', 'mbpp', or one added by ``register_importer``); ``visible``:
    how many of each record's asserts to ship as visible tests too (the formats with asserts: humaneval, mbpp)."""
    if fmt not in IMPORTERS:
        hint = " ('harbor' is added by `import sandgym.interop`)" if "harbor" not in IMPORTERS else ""
        raise TaskError(f"unknown import format {fmt!r}; use one of {sorted(IMPORTERS)}{hint}")
    if split not in ("train", "heldout"):
        raise TaskError(f"split={split!r} is not one of ('train', 'heldout')")
    check_visible(visible)
    if not visible:
        return IMPORTERS[fmt](path, split=split)
    params = inspect.signature(IMPORTERS[fmt]).parameters
    if "visible" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise TaskError(f"--visible {visible}: format {fmt!r} has no asserts to show; drop --visible (it applies to "
                        "humaneval and mbpp)")
    return IMPORTERS[fmt](path, split=split, visible=visible)


__all__ = ["IMPORTERS", "ReferenceCheck", "check_reference", "import_file", "import_humaneval", "import_mbpp",
           "import_reasoning_gym", "register_importer", "verify_references"]

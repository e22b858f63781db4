"""Shared helpers of the importers: reading JSONL records with precise problems, and the Problem-raising path."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.load import iter_jsonl
from sandgym.tasks.task import VISIBLE_NOTE
from sandgym.tasks.validate import Problem

_SAFE = re.compile(r"[^A-Za-z0-9_.\-/]+")


def read_records(path: Path, problems: list[Problem]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; bad lines become problems."""

    if not path.exists():
        problems.append(Problem(str(path), None, "", "no such file", "check the path of the JSONL file to import"))
        return
    for number, data in iter_jsonl(path, problems):
        if not isinstance(data, dict):
            problems.append(Problem(str(path), number, "", "a record must be a JSON object",
                                    "write one object per line"))
            continue
        yield number, data


def require(data: dict[str, Any], fields: dict[str, type | tuple[type, ...]], file: str, line: int,
            fmt: str, problems: list[Problem]) -> bool:
    """Check that ``fields`` exist with the right types; add a problem per mismatch. True when all are fine."""
    ok = True
    for name, tp in fields.items():
        if name not in data:
            problems.append(Problem(file, line, name, f"missing field of the {fmt} format",
                                    f"add {name!r} (or import with the right --format)"))
            ok = False
        elif not isinstance(data[name], tp):
            want = tp.__name__ if isinstance(tp, type) else " or ".join(t.__name__ for t in tp)
            problems.append(Problem(file, line, name, f"expected {want}, got {type(data[name]).__name__}",
                                    f"make {name!r} a {want}"))
            ok = False
    return ok


def task_id(prefix: str, raw: Any) -> str:
    """A readable task id from the source's own id (e.g. 'HumanEval/0' -> 'humaneval/HumanEval/0')."""
    text = _SAFE.sub("-", str(raw)).strip("-") or "task"
    return f"{prefix}/{text}"


def check_visible(visible: int) -> None:
    """``visible`` (asserts shipped as visible tests) must be a count >= 0."""
    if isinstance(visible, bool) or not isinstance(visible, int) or visible < 0:
        raise TaskError(f"--visible {visible!r}: give how many of each record's asserts to ship as visible tests "
                        "(an int >= 0; 0 ships none)")


__all__ = ["VISIBLE_NOTE", "check_visible", "read_records", "require", "task_id"]

"""Write a task as a task folder: ``task.toml`` plus ``files/``, ``tests/``, ``visible_tests/``, ``traps/`` and
``reference/`` sub-folders (the layout ``load_folder`` reads). TOML has no null, so null values are left out."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.task import Task

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key, ensure_ascii=False)


def toml_value(value: Any, *, multiline: bool = False) -> str:
    """A TOML literal for a JSON-like value (strings, numbers, booleans, lists, mappings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return {True: "inf", False: "-inf"}[value > 0] if math.isinf(value) else "nan"
        return repr(value)
    if isinstance(value, str):
        plain = all(c in "\n\t" or c >= " " for c in value) and "\x7f" not in value
        if multiline and "\n" in value and "'''" not in value and plain and not value.endswith("'"):
            return "'''\n" + value + "'''"
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, Mapping):
        items = ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items() if v is not None)
        return "{" + items + "}"
    raise TaskError(f"cannot write {type(value).__name__} value {value!r:.60} to TOML; use JSON-like metadata")


def _table(name: str, values: Mapping[str, Any]) -> list[str]:
    lines = [f"[{name}]"]
    lines += [f"{toml_key(k)} = {toml_value(v, multiline=True)}" for k, v in values.items() if v is not None]
    return lines


def _write_tree(root: Path, files: Mapping[str, str | bytes]) -> None:
    for rel, text in files.items():
        target = root / rel
        if root.resolve() not in target.resolve().parents:
            raise TaskError(f"file name {rel!r} leaves the task folder; use a relative path inside the workspace")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))


def write_folder(task: Task, folder: Path) -> Path:
    """Write ``task`` under ``folder`` (created; existing files with the same names are overwritten)."""
    folder.mkdir(parents=True, exist_ok=True)
    top = {"id": task.id, "domain": task.domain, "family": task.family, "split": task.split,
           "difficulty": task.difficulty, "unseen": task.unseen, "prompt": task.prompt}
    if task.requirements:
        top["requirements"] = list(task.requirements)
    lines = [f"{k} = {toml_value(v, multiline=True)}" for k, v in top.items()]
    v = task.verifier
    lines += ["", *_table("verifier", {"kind": v.kind, "expected_tests": v.expected_tests or None,
                                       "expected_traps": v.expected_traps or None, "answer": v.answer,
                                       "matcher": v.matcher, "script": v.script, "host": v.host,
                                       "isolation": None if v.isolation == "process" else v.isolation})]
    if task.reference is not None:
        lines += ["", *_table("reference", {"answer": task.reference.answer})]
    lines += ["", *_table("limits", {k: getattr(task.limits, k) for k in type(task.limits).__dataclass_fields__})]
    if task.metadata:
        lines += ["", *_table("metadata", task.metadata)]
    (folder / "task.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _write_tree(folder / "files", task.workspace_files)  # binary files as they are (read back as binary data)
    _write_tree(folder / "tests", v.hidden_files)
    _write_tree(folder / "visible_tests", task.visible_tests)
    _write_tree(folder / "traps", v.traps)
    if task.reference is not None:
        _write_tree(folder / "reference", task.reference.files)
    return folder

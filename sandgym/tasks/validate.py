"""Check task data against the ``Task`` schema and report every problem (file, line, field, message, fix).

The schema is derived from the dataclasses in ``task.py`` (field names, types, required fields), so optional
fields added there are accepted here without changes.
"""

from __future__ import annotations

import configparser
import dataclasses
import difflib
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.task import (
    HOST_VERIFIER_NAME,
    Reference,
    Task,
    TaskLimits,
    Verifier,
    build_task,
    limit_error,
    requirement_error,
)

NESTED: dict[str, type] = {"verifier": Verifier, "reference": Reference, "limits": TaskLimits}
TEXT_MAPPINGS = ("files", "visible_tests", "tests", "traps")
"""Fields that map a relative file name to file text."""




@dataclass(frozen=True)
class Problem:
    """One thing wrong with a task file, precise enough to fix without reading the code."""

    file: str
    line: int | None
    """1-based line of the JSONL record or TOML key (None when unknown, e.g. a missing file)."""
    field: str
    """Dotted field name, e.g. ``verifier.expected_tests`` ('' for the whole record)."""
    message: str
    fix: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        name = f" {self.field}:" if self.field else ""
        return f"{where}:{name} {self.message} (fix: {self.fix})"


def raise_problems(problems: list[Problem]) -> None:
    """Raise one TaskError listing every problem (no-op for an empty list)."""
    if problems:
        lines = "\n  ".join(str(p) for p in problems)
        raise TaskError(f"{len(problems)} problem(s) in task data:\n  {lines}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _required(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is not None and issubclass(origin, Mapping):
        return "object"
    if dataclasses.is_dataclass(tp):
        return "object"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, getattr(tp, "__name__", str(tp)))


def type_error(value: Any, tp: Any) -> str | None:
    """None when ``value`` (parsed JSON/TOML) fits ``tp``, else a short description of the mismatch."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return None
    if origin is typing.Literal:
        return None if value in typing.get_args(tp) else f"{value!r} is not one of {type_name(tp)}"
    if origin in (typing.Union, types.UnionType):
        return None if any(type_error(value, a) is None for a in typing.get_args(tp)) else \
            f"expected {type_name(tp)}, got {_json_type(value)} {value!r:.60}"
    if tp is type(None):
        return None if value is None else f"expected null, got {_json_type(value)}"
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        if not isinstance(value, Mapping):
            return f"expected an object, got {_json_type(value)} {value!r:.60}"
        key_t, val_t = typing.get_args(tp) or (Any, Any)
        for k, v in value.items():
            err = type_error(k, key_t) or type_error(v, val_t)
            if err:
                return f"entry {k!r}: {err}"
        return None
    if dataclasses.is_dataclass(tp):
        return None if isinstance(value, Mapping) else f"expected an object, got {_json_type(value)}"
    if tp is bool:
        return None if isinstance(value, bool) else f"expected a boolean, got {_json_type(value)} {value!r:.60}"
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"expected an integer, got {_json_type(value)} {value!r:.60}"
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else f"expected a number, got {_json_type(value)} {value!r:.60}"
    if tp is str:
        return None if isinstance(value, str) else f"expected a string, got {_json_type(value)} {value!r:.60}"
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__)


Locate = Callable[[str], "int | None"]
"""Maps a dotted field name to the line where it is written (folder tasks); None when unknown."""


def check_record(data: Any, *, file: str, line: int | None, locate: Locate | None = None) -> list[Problem]:
    """Every schema problem of one task record (a parsed JSON object or TOML document)."""

    def where(name: str) -> int | None:
        return (locate(name) if locate else None) or line

    if not isinstance(data, Mapping):
        return [Problem(file, line, "", f"a task must be a JSON object, got {_json_type(data)}",
                        "write one object per line: {\"id\": ..., \"domain\": ..., ...}")]
    problems = _check_fields(data, Task, "", file, where)
    for name, cls in NESTED.items():
        value = data.get(name)
        if isinstance(value, Mapping):
            problems += _check_fields(value, cls, name + ".", file, where)
    if not problems:
        problems += _semantic(data, file, where)
    return problems


def _check_fields(data: Mapping[str, Any], cls: type, prefix: str, file: str,
                  where: Callable[[str], int | None]) -> list[Problem]:
    hints = _hints(cls)
    problems = []
    for key in data:
        if key not in hints:
            close = difflib.get_close_matches(str(key), list(hints), n=1)
            fix = f"did you mean '{prefix}{close[0]}'? rename it" if close else \
                f"remove it; {cls.__name__} fields are {', '.join(hints)}"
            problems.append(Problem(file, where(prefix + str(key)), prefix + str(key), f"unknown field {key!r}", fix))
    for key in _required(cls):
        if key not in data:
            problems.append(Problem(file, where(prefix.rstrip(".")), prefix + key, "missing required field",
                                    f"add {prefix}{key} ({type_name(hints[key])})"))
    for key, value in data.items():
        if key in hints:
            err = type_error(value, hints[key])
            if err:
                problems.append(Problem(file, where(prefix + key), prefix + key, err,
                                        f"give {prefix}{key} a value of type {type_name(hints[key])}"))
            elif key in TEXT_MAPPINGS and isinstance(value, Mapping):
                problems += _check_paths(value, prefix + key, file, where, tests=key in ("tests", "traps"))
    return problems


def _check_paths(files: Mapping[str, Any], name: str, file: str, where: Callable[[str], int | None], *,
                 tests: bool) -> list[Problem]:
    out = []
    for path in files:
        parts = str(path).replace("\\", "/").split("/")
        if str(path).startswith("/") or ".." in parts or not path:
            out.append(Problem(file, where(name), name, f"file name {path!r} is absolute or leaves the workspace",
                               "use a relative path inside the workspace, e.g. 'src/app.py'"))
        elif tests and parts[-1] == "pytest.ini" and len(parts) > 1:
            out.append(Problem(file, where(name), name, f"hidden file {path!r}: a pytest.ini below the root",
                               "move it to the root of the hidden files ('pytest.ini'): the grader runs with it"))
        elif tests and parts == ["pytest.ini"] and not _is_pytest_ini(files[path]):
            out.append(Problem(file, where(name), name, "hidden file 'pytest.ini' has no [pytest] section",
                               "start it with a '[pytest]' line, e.g. '[pytest]\\nfilterwarnings = error'"))
    names = [str(p).replace("\\", "/").split("/")[-1] for p in files]
    if tests and files and not any(n.endswith(".py") and (n.startswith("test_") or n.endswith("_test.py"))
                                   for n in names):
        out.append(Problem(file, where(name), name, f"no test file among {sorted(map(str, files))[:5]}",
                           "hidden tests need at least one test_*.py (or *_test.py); conftest.py, helper modules "
                           "and data files next to it only support it"))
    return out


def _is_pytest_ini(text: Any) -> bool:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(str(text))
    except configparser.Error:
        return False
    return parser.has_section("pytest")


def _semantic(data: Mapping[str, Any], file: str, where: Callable[[str], int | None]) -> list[Problem]:
    v = data["verifier"]
    out = []

    def add(name: str, message: str, fix: str) -> None:
        out.append(Problem(file, where(name), name, message, fix))

    if not str(data["id"]).strip():
        add("id", "task id is empty", "give every task a unique id such as 'mysuite/task-001'")
    if not str(data["prompt"]).strip():
        add("prompt", "prompt is empty", "say what the agent must do")
    reqs = data.get("requirements", [])
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        add("requirements", f"expected a list of strings, got {_json_type(reqs)}",
            "write requirements = [\"attrs>=23\", ...] (pip specifiers)")
    else:
        for req in reqs:
            why = requirement_error(req)
            if why:
                add("requirements", f"requirement {req!r} {why}", "give one plain pip specifier per item")
    checked = [("difficulty", data.get("difficulty"))]
    if isinstance(data.get("limits"), Mapping):
        checked += [(f"limits.{k}", v) for k, v in data["limits"].items()]
    for name, value in checked:
        bad = limit_error(name.rpartition(".")[2], value)
        if bad is not None:
            add(name, *bad)
    kind = v["kind"]
    if kind == "tests":
        if not v.get("tests"):
            add("verifier.tests", "kind 'tests' needs hidden test files", "add verifier.tests: {name.py: source}")
        if v.get("expected_tests", 0) <= 0:
            add("verifier.expected_tests", f"is {v.get('expected_tests', 0)}; kind 'tests' needs > 0",
                "set it to the number of test cases the hidden tests contain")
    elif kind == "match" and v.get("answer") is None:
        add("verifier.answer", "kind 'match' needs the expected answer", "add verifier.answer (a string)")
    elif kind == "script" and not v.get("script"):
        add("verifier.script", "kind 'script' needs a check script", "add Python that prints {\"score\": x}")
    elif kind == "host" and not HOST_VERIFIER_NAME.match(str(v.get("host") or "")):
        add("verifier.host", f"kind 'host' needs a host-side verifier name 'name@vN', got {v.get('host')!r}",
            "name a registered host-side verifier (`sandgym rewards list`), e.g. host = \"mypkg.answer@v1\"")
    if not out:
        try:
            build_task(data)
        except (TaskError, TypeError, ValueError) as exc:
            add("", str(exc), "correct the field named in the message")
    return out


def duplicate_ids(records: list[tuple[str, int | None, str]]) -> list[Problem]:
    """Problems for task ids used more than once; ``records`` are (file, line, id)."""
    seen: dict[str, tuple[str, int | None]] = {}
    out = []
    for file, line, tid in records:
        if tid in seen:
            first = seen[tid]
            out.append(Problem(file, line, "id", f"duplicate task id {tid!r} (first at {first[0]}:{first[1]})",
                               "make every task id unique"))
        else:
            seen[tid] = (file, line)
    return out



"""Load and save tasks: JSONL (one task per line), task folders, and Hugging Face ``datasets``.

JSONL records mirror the dataclasses (nested ``verifier``, ``reference`` and ``limits`` objects). A task folder
holds ``task.toml`` (the same fields; ``[verifier]``, ``[reference]``, ``[limits]``, ``[metadata]`` tables) plus
``files/`` (starting workspace), ``tests/`` (hidden tests), and optionally ``visible_tests/``, ``traps/``,
``reference/`` (reference files) and ``prompt.md``. Every problem is reported with file, line, field and fix.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.folder import write_folder
from sandgym.tasks.task import Task, build_task, encode_data
from sandgym.tasks.validate import Problem, check_record, duplicate_ids, raise_problems

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

FOLDER_DIRS = {"files": "files", "tests": "verifier.tests", "visible_tests": "visible_tests",
               "traps": "verifier.traps", "reference": "reference.files"}
"""Sub-folder of a task folder -> the field its files fill."""
BINARY_FIELDS = {"files": "data_files", "tests": "verifier.data"}
"""Folders whose non-UTF-8 files are binary data (base64 in the record) rather than a problem."""


def task_to_dict(task: Task) -> dict[str, Any]:
    """The JSON-ready record of a task (inverse of ``task_from_dict``)."""

    def plain(obj: Any) -> Any:
        if isinstance(obj, Mapping):
            return {str(k): plain(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [plain(v) for v in obj]
        return obj

    out: dict[str, Any] = {}
    for name in Task.__dataclass_fields__:
        value = getattr(task, name)
        if name in ("verifier", "reference", "limits") and value is not None:
            value = {k: getattr(value, k) for k in type(value).__dataclass_fields__}
        out[name] = plain(value)
    return out


def task_from_dict(data: Mapping[str, Any], *, file: str = "<dict>", line: int | None = None,
                   check: bool = True) -> Task:
    """Build a Task from a parsed record; TaskError lists every problem when ``check`` (the default)."""
    if check:
        raise_problems(check_record(data, file=file, line=line))
    return build_task(data)


def _build(data: Mapping[str, Any], file: str, line: int | None, problems: list[Problem], tasks: list[Task],
           ids: list[tuple[str, int | None, str]], locate: Any = None) -> None:
    found = check_record(data, file=file, line=line, locate=locate)
    if found:
        problems += found
        return
    tasks.append(task_from_dict(data, file=file, line=line, check=False))
    ids.append((file, line, tasks[-1].id))


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start} cannot be decoded)"


def read_text(path: Path, field: str = "") -> tuple[str | None, list[Problem]]:
    """The UTF-8 text of a task file, or None and a problem naming the file (unreadable, not UTF-8)."""
    try:
        return path.read_bytes().decode("utf-8"), []
    except UnicodeDecodeError as exc:
        return None, [Problem(str(path), None, field, f"file is {_not_utf8(exc)}",
                              "task files must be UTF-8 text; re-encode it (e.g. iconv -t utf-8) or remove it")]
    except OSError as exc:
        return None, [Problem(str(path), None, field, f"cannot read the file: {exc.strerror or exc}",
                              "check that it exists and is readable")]


def json_error(exc: ValueError) -> str:
    """``invalid JSON: <what> at column N`` for a JSON error (no doubled "at": "starting at at column")."""
    if isinstance(exc, json.JSONDecodeError):
        msg = re.sub(r"\s+at$", "", exc.msg)
        return f"invalid JSON: {msg} at column {exc.colno}"
    return f"invalid JSON: {exc}"


def iter_jsonl(path: Path, problems: list[Problem]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of a JSONL file; every bad line (not UTF-8, not
    JSON) and an unreadable file become problems naming the file and line."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        what = "is a folder, not a file" if path.is_dir() else f"cannot be read: {exc.strerror or exc}"
        problems.append(Problem(file, None, "", what, "check the path; give a .jsonl file"))
        return
    if b"\0" in raw[:8192]:
        problems.append(Problem(file, None, "", "is a binary file (it holds NUL bytes), not JSONL text",
                                "give a UTF-8 .jsonl file with one JSON object per line"))
        return
    for number, line_bytes in enumerate(raw.splitlines(), start=1):
        try:
            text = line_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem(file, number, "", f"line is {_not_utf8(exc)}",
                                    "save the file as UTF-8 (e.g. iconv -t utf-8), or remove the line"))
            continue
        if not text.strip():
            continue
        try:
            yield number, json.loads(text)
        except (RecursionError, ValueError) as exc:  # JSONDecodeError, nested too deep, integer too long
            err = exc if isinstance(exc, ValueError) else ValueError("nested too deeply")
            problems.append(Problem(file, number, "", json_error(err),
                                    "write exactly one complete JSON object on this line"))


def collect_jsonl(path: Path) -> tuple[list[Task], list[Problem]]:
    """Tasks and problems of a JSONL file (one JSON object per line; blank lines are skipped)."""
    tasks: list[Task] = []
    problems: list[Problem] = []
    ids: list[tuple[str, int | None, str]] = []
    file = str(path)
    for number, data in iter_jsonl(path, problems):
        _build(data, file, number, problems, tasks, ids)
    return tasks, problems + duplicate_ids(ids)


def toml_locator(text: str) -> Any:
    """A function mapping a dotted field name to its line in a TOML text (tables and ``key =`` lines)."""
    lines: dict[str, int] = {}
    section = ""
    in_string = False
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.count('"""') % 2 == 1 or stripped.count("'''") % 2 == 1:
            was = in_string
            in_string = not in_string
            if was:
                continue
        elif in_string:
            continue
        header = re.match(r"^\[([A-Za-z0-9_.\-]+)\]", stripped)
        if header:
            section = header.group(1) + "."
            lines.setdefault(header.group(1), number)
            continue
        key = re.match(r"^([A-Za-z0-9_\-]+|\"[^\"]+\")\s*=", stripped)
        if key:
            lines.setdefault(section + key.group(1).strip('"'), number)

    def locate(name: str) -> int | None:
        while name:
            if name in lines:
                return lines[name]
            name = name.rpartition(".")[0]
        return None

    return locate


def _symlink_problem(path: Path, folder: Path, field: str) -> Problem | None:
    """A problem when ``path`` is a symlink that dangles, loops or resolves outside ``folder`` (None otherwise).

    A symlink to a host file (say /etc/shadow) would copy that file into the sandbox workspace, where the agent
    and anyone reading the trajectories could read it.
    """
    if not path.is_symlink():
        return None
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return Problem(str(path), None, field, f"symlink to {os.readlink(path)!r} is dangling or loops",
                       "replace the symlink with the file itself")
    if not target.is_relative_to(folder.resolve()):
        return Problem(str(path), None, field, f"symlink resolves to {str(target)!r}, outside the task folder",
                       "replace the symlink with a copy of the file; task files may only link inside the folder")
    return None


def _read_tree(root: Path, folder: Path, field: str, problems: list[Problem],
               binary: dict[str, bytes] | None = None) -> dict[str, str]:
    """Text of every file under ``root`` by relative path; symlinks are followed only inside ``folder``. With
    ``binary``, files that are not UTF-8 text go there as bytes instead of being a problem."""
    out: dict[str, str] = {}
    stack = [root]
    while stack:  # iterative, and symlinked directories are never walked into
        current = stack.pop()
        try:
            entries = sorted(current.iterdir())
        except OSError as exc:
            problems.append(Problem(str(current), None, field, f"cannot list the folder: {exc.strerror or exc}",
                                    "make it readable"))
            continue
        for p in entries:
            if p.name == "__pycache__":
                continue
            bad = _symlink_problem(p, folder, field)
            if bad is not None:
                problems.append(bad)
                continue
            if p.is_dir():
                if p.is_symlink():
                    problems.append(Problem(str(p), None, field, "symlink to a directory",
                                            "replace it with a real directory holding the files"))
                else:
                    stack.append(p)
                continue
            if not p.is_file():
                continue
            if binary is not None:
                try:
                    raw = p.read_bytes()
                    if b"\0" in raw:
                        raise UnicodeDecodeError("utf-8", raw, raw.index(b"\0"), len(raw), "NUL byte: binary")
                    out[p.relative_to(root).as_posix()] = raw.decode("utf-8")
                except UnicodeDecodeError:
                    binary[p.relative_to(root).as_posix()] = raw
                except OSError as exc:
                    problems.append(Problem(str(p), None, field, f"cannot read the file: {exc.strerror or exc}",
                                            "check that it exists and is readable"))
                continue
            text, found = read_text(p, field)
            problems += found
            if text is not None:
                out[p.relative_to(root).as_posix()] = text
    return dict(sorted(out.items()))


def folder_record(folder: Path) -> tuple[dict[str, Any] | None, list[Problem], Any]:
    """The task record of a folder (task.toml merged with its sub-folders), problems and a line locator."""
    toml_path = folder / "task.toml"
    file = str(toml_path)
    if not toml_path.is_file():
        return None, [Problem(str(folder), None, "", "no task.toml in this folder",
                              "add task.toml (see docs/TASKS.md) or point at a folder that has one")], None
    bad = _symlink_problem(toml_path, folder, "")
    if bad is not None:
        return None, [bad], None
    text, problems = read_text(toml_path)
    if text is None:
        return None, problems, None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        return None, [Problem(file, int(m.group(1)) if m else None, "", f"invalid TOML: {exc}",
                              "fix the TOML syntax at that line")], None
    locate = toml_locator(text)
    prompt_md = folder / "prompt.md"
    if "prompt" not in data and (prompt_md.is_file() or prompt_md.is_symlink()):
        bad = _symlink_problem(prompt_md, folder, "prompt")
        prompt, found_problems = (None, [bad]) if bad is not None else read_text(prompt_md, "prompt")
        problems += found_problems
        if prompt is None:
            return None, problems, None
        data["prompt"] = prompt
    for sub, field in FOLDER_DIRS.items():
        if (folder / sub).is_symlink():
            problems.append(Problem(str(folder / sub), None, field, "is a symlink",
                                    f"make {sub}/ a real directory inside the task folder"))
            continue
        if not (folder / sub).is_dir():
            continue
        binary: dict[str, bytes] | None = {} if sub in BINARY_FIELDS else None
        found = _read_tree(folder / sub, folder, field, problems, binary)
        if binary:  # binary workspace files and test fixtures, as the record stores them (base64)
            bhead, _, bkey = BINARY_FIELDS[sub].rpartition(".")
            btarget = data.setdefault(bhead, {}) if bhead else data
            if isinstance(btarget, dict):
                btarget[bkey] = {**encode_data(binary), **(btarget.get(bkey) or {})}
        head, _, key = field.rpartition(".")
        target = data.setdefault(head, {}) if head else data
        if not isinstance(target, dict):
            continue  # the type problem is reported by check_record
        existing = target.setdefault(key, {})
        if not isinstance(existing, dict):
            continue
        for name in sorted(set(found) & set(existing)):
            problems.append(Problem(file, locate(field), field, f"{name!r} is given both in task.toml and in {sub}/",
                                    f"keep only one of them (delete it from task.toml or from {sub}/)"))
        existing.update(found)
    verifier = data.get("verifier")
    if isinstance(verifier, dict):
        for files_key, count_key in (("tests", "expected_tests"), ("traps", "expected_traps")):
            tests = verifier.get(files_key)
            if count_key not in verifier and isinstance(tests, dict) and tests:
                verifier[count_key] = sum(len(re.findall(r"^\s*def test_", str(s), re.M)) for s in tests.values())
    return data, problems, locate


def collect_folder(folder: Path) -> tuple[list[Task], list[Problem]]:
    """Tasks and problems of one task folder."""
    data, problems, locate = folder_record(folder)
    tasks: list[Task] = []
    if data is not None:
        _build(data, str(folder / "task.toml"), None, problems, tasks, [], locate)
    return tasks, problems


def collect_path(path: Path) -> tuple[list[Task], list[Problem]]:
    """Tasks and problems of a JSONL file, a task folder, or a directory of task folders and JSONL files."""
    if not path.exists():
        return [], [Problem(str(path), None, "", "no such file or folder", "check the path")]
    if path.is_file():
        if path.suffix not in (".jsonl", ".json") and path.name != "task.toml":
            return [], [Problem(str(path), None, "", f"unsupported task file type {path.suffix!r}",
                                "use a .jsonl file (one task per line) or a folder with task.toml")]
        return collect_folder(path.parent) if path.name == "task.toml" else collect_jsonl(path)
    if (path / "task.toml").is_file():
        return collect_folder(path)
    tasks: list[Task] = []
    problems: list[Problem] = []
    for child in sorted(path.iterdir()):
        if (child.is_dir() and (child / "task.toml").is_file()) or child.suffix == ".jsonl":
            t, p = collect_path(child)
            tasks += t
            problems += p
    if not tasks and not problems:
        problems.append(Problem(str(path), None, "", "no tasks found (no task.toml, no sub-folders with one, no "
                                ".jsonl files)", "point at a .jsonl file or a task folder"))
    problems += duplicate_ids([(str(path), None, t.id) for t in tasks])
    return tasks, problems


def _load(collected: tuple[list[Task], list[Problem]]) -> list[Task]:
    tasks, problems = collected
    raise_problems(problems)
    return tasks


def load_jsonl(path: str | Path) -> list[Task]:
    """Tasks of a JSONL file; TaskError lists every problem with file, line, field and fix."""
    return _load(collect_jsonl(Path(path)))


def load_folder(path: str | Path) -> list[Task]:
    """The task of a task folder (a one-element list); TaskError lists every problem."""
    return _load(collect_folder(Path(path)))


def load_path(path: str | Path) -> list[Task]:
    """Tasks of a JSONL file, a task folder or a directory of them; TaskError lists every problem."""
    return _load(collect_path(Path(path)))


def save_jsonl(tasks: Iterable[Task], path: str | Path) -> Path:
    """Write tasks as JSONL (round-trips through ``load_jsonl``); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for task in tasks:
            fh.write(json.dumps(task_to_dict(task), ensure_ascii=False) + "\n")
    return out


def save_folder(task: Task, folder: str | Path) -> Path:
    """Write one task as a task folder (round-trips through ``load_folder``); returns the folder."""

    return write_folder(task, Path(folder))


def load_hf(source: str, *, split: str = "train", data_files: Any = None, **kwargs: Any) -> list[Task]:
    """Tasks from Hugging Face ``datasets``: a ``save_to_disk`` folder, local data files, or a hub id.

    Rows use the JSONL schema. Arrow stores objects with differing keys as one struct, so in mapping fields
    (``files``, ``verifier.tests``, ``metadata``, ...) keys whose value is null are dropped, and a mapping field
    may also be a JSON string. Nothing is downloaded unless ``source`` is a hub id.
    """
    import datasets

    path = Path(source)
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()
                          or (path / "state.json").exists()):
        ds: Any = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise TaskError(f"{source}: no split {split!r}; it has {list(ds)}; pass split=one of them")
            ds = ds[split]
    elif data_files is not None or path.is_file():
        files = data_files if data_files is not None else str(path)
        first = files if isinstance(files, str) else next(iter(files.values() if isinstance(files, dict) else files))
        builder = "parquet" if str(first).endswith(".parquet") else "json"
        ds = datasets.load_dataset(builder, data_files=files, split=split, **kwargs)
    else:
        ds = datasets.load_dataset(source, split=split, **kwargs)
    tasks: list[Task] = []
    problems: list[Problem] = []
    ids: list[tuple[str, int | None, str]] = []
    for row_number, row in enumerate(ds, start=1):
        _build(_from_arrow(row), f"{source}[{split}] row", row_number, problems, tasks, ids)
    raise_problems(problems + duplicate_ids(ids))
    return tasks


_MAPPING_FIELDS = ("files", "visible_tests", "metadata", "verifier.tests", "verifier.traps", "reference.files")


def _from_arrow(row: Mapping[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in row.items() if v is not None or k in ("reference",)}
    for name in ("verifier", "reference", "limits"):
        if isinstance(data.get(name), dict):
            data[name] = {k: v for k, v in data[name].items() if v is not None}
    for dotted in _MAPPING_FIELDS:
        head, _, key = dotted.rpartition(".")
        holder = data.get(head) if head else data
        if not isinstance(holder, dict) or key not in holder:
            continue
        value = holder[key]
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                continue
        if isinstance(value, dict):
            holder[key] = {k: v for k, v in value.items() if v is not None}
    return data


def validate_path(path: str | Path) -> list[Problem]:
    """Every problem in a JSONL file, a task folder or a directory of them (empty list: all good)."""
    _, problems = collect_path(Path(path))
    return problems

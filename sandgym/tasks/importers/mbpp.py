"""Import MBPP-style JSONL (``task_id``, ``text``, ``code``, ``test_list``; optional ``test_setup_code`` and
``challenge_test_list``). One hidden test per assert, so ``expected_tests`` is the number of asserts; with
``visible=N`` the first N asserts (never all: one at least stays hidden only) are also visible tests
(``test_visible.py``, after the same setup code)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sandgym.pysyntax as pysyntax
from sandgym.tasks.importers.common import VISIBLE_NOTE, check_visible, read_records, require, task_id
from sandgym.tasks.task import Reference, Task, Verifier
from sandgym.tasks.validate import Problem, raise_problems

FIELDS: dict[str, type | tuple[type, ...]] = {"task_id": (str, int), "text": str, "code": str, "test_list": list}
_MODULES = ("math", "re", "heapq", "collections", "itertools", "sys", "cmath", "bisect", "operator")


def defined_names(code: str) -> list[str]:
    """Top-level functions and classes defined by ``code`` (in order)."""
    tree = pysyntax.parse(code)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def entry_point(code: str, tests: list[str]) -> str | None:
    """The defined function the tests call first (None when no defined name is used by the tests)."""
    joined = "\n".join(tests)
    used = [(joined.find(name + "("), name) for name in defined_names(code)
            if re.search(rf"\b{re.escape(name)}\s*\(", joined)]
    return min(used)[1] if used else None


def mbpp_tests(code: str, tests: list[str], setup: str = "") -> str:
    """The hidden test module: one test per assert, after ``test_setup_code`` (run in the test module, as MBPP's
    harness runs it before the asserts); the solution's names that the asserts or the setup use are imported."""
    joined = "\n".join([*tests, setup])
    names = [n for n in defined_names(code) if re.search(rf"\b{re.escape(n)}\b", joined)]
    imports = [f"import {m}" for m in _MODULES if re.search(rf"\b{m}\.", joined)]
    lines = [*imports, *([f"from solution import {', '.join(names)}"] if names else []), ""]
    if setup.strip():
        lines += [setup.strip(), ""]
    for i, t in enumerate(tests):
        lines += ["", f"def test_{i}():", *("    " + ln for ln in t.strip().splitlines()), ""]
    return "\n".join(lines).rstrip() + "\n"


def signature(code: str, name: str) -> str:
    for node in pysyntax.parse(code).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return f"def {name}({ast.unparse(node.args)}):"
    return f"def {name}(*args):"


def from_record(data: dict, *, split: str = "heldout", family: str = "mbpp", domain: str = "coding",
                entry: str, visible: int = 0) -> Task:
    """One MBPP record as a Task (fields already checked); ``visible``: how many of its asserts are also visible."""
    code = data["code"].replace("\r\n", "\n").expandtabs(4)
    tests = [str(t) for t in data["test_list"]]
    sig = signature(code, entry)
    prompt = (f"{data['text'].strip()}\nWrite `solution.py` defining `{sig[4:-1]}`. "
              f"It should pass tests like:\n{tests[0]}")
    setup = data.get("test_setup_code") or ""
    shown = tests[: min(visible, len(tests) - 1)]  # at least one assert stays hidden only
    if shown:
        prompt += f"\n{VISIBLE_NOTE}"
    return Task(
        id=task_id(family, data["task_id"]), domain=domain, family=family, split=split,  # type: ignore[arg-type]
        prompt=prompt,
        verifier=Verifier(kind="tests", tests={f"test_{entry}.py": mbpp_tests(code, tests, setup)},
                          expected_tests=len(tests)),
        files={"solution.py": f"{sig}\n    raise NotImplementedError\n"},
        visible_tests={"test_visible.py": mbpp_tests(code, shown, setup)} if shown else {},
        reference=Reference(files={"solution.py": code.rstrip() + "\n"}),
        metadata={"entry_file": "solution.py", "function": entry, "source_id": str(data["task_id"]),
                  "format": "mbpp"},
    )


def import_mbpp(path: str | Path, *, split: str = "heldout", family: str = "mbpp",
                domain: str = "coding", visible: int = 0) -> list[Task]:
    """Tasks from an MBPP-style JSONL file; TaskError lists every bad record (file, line, field, fix).
    ``visible``: the first that many asserts of each record are also visible tests."""
    file = Path(path)
    check_visible(visible)
    problems: list[Problem] = []
    tasks = []
    for line, data in read_records(file, problems):
        if not require(data, FIELDS, str(file), line, "MBPP", problems):
            continue
        if not data["test_list"] or not all(isinstance(t, str) for t in data["test_list"]):
            problems.append(Problem(str(file), line, "test_list", "must be a non-empty list of assert strings",
                                    "list the asserts, e.g. [\"assert f(1) == 2\"]"))
            continue
        try:
            entry = entry_point(data["code"].replace("\r\n", "\n").expandtabs(4), data["test_list"])
        except SyntaxError as exc:
            problems.append(Problem(str(file), line, "code", f"reference code does not parse: {exc.msg}",
                                    "fix the Python in 'code'"))
            continue
        if entry is None:
            problems.append(Problem(str(file), line, "test_list", "the tests call no function defined in 'code'",
                                    "make the asserts call the function that 'code' defines"))
            continue
        tasks.append(from_record(data, split=split, family=family, domain=domain, entry=entry, visible=visible))
    raise_problems(problems)
    return tasks

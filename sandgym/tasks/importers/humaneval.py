"""Import HumanEval-style JSONL (``task_id``, ``prompt``, ``canonical_solution``, ``test``, ``entry_point``).

The agent writes ``solution.py``; the hidden tests ``from solution import <entry_point>``. When the ``check``
function is a plain list of asserts, each assert becomes its own test (so ``expected_tests`` counts them);
otherwise one test calls ``check(<entry_point>)``. With ``visible=N`` the first N of those asserts that call the
function are also shipped as visible tests (``test_visible.py`` in the workspace, what ``run_tests`` and the
``"test"`` code action run), as the generated coding families ship theirs; at least one assert stays hidden only, and
a record whose ``check`` is not a plain list of asserts gets none.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sandgym.pysyntax as pysyntax
from sandgym.tasks.importers.common import VISIBLE_NOTE, check_visible, read_records, require, task_id
from sandgym.tasks.task import Reference, Task, Verifier
from sandgym.tasks.validate import Problem, raise_problems

FIELDS: dict[str, type | tuple[type, ...]] = {
    "task_id": (str, int), "prompt": str, "canonical_solution": str, "test": str, "entry_point": str}


def check_asserts(test: str) -> tuple[str, list[str]] | None:
    """``check``'s parameter and the source of each of its asserts when ``check`` is only asserts (plus a
    docstring/pass), else None."""
    try:
        tree = pysyntax.parse(test)
    except SyntaxError:
        return None
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None or len(check.args.args) != 1:
        return None
    body = [n for n in check.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    body = [n for n in body if not isinstance(n, ast.Pass)]
    if not body or not all(isinstance(n, ast.Assert) for n in body):
        return None
    srcs = [ast.get_source_segment(test, node) for node in body]
    return None if any(s is None for s in srcs) else (check.args.args[0].arg, [str(s) for s in srcs])


def split_check(test: str, entry_point: str) -> list[str]:
    """The bodies of per-assert tests when ``check`` is only asserts (plus a docstring/pass), else []."""
    found = check_asserts(test)
    return [f"    {found[0]} = {entry_point}\n    {src}\n" for src in found[1]] if found else []


def visible_checks(test: str, entry_point: str, n: int) -> list[str]:
    """Bodies of the first ``n`` asserts that call the function (``assert True, ...`` placeholders skipped), and
    never all of those: at least one stays hidden only."""
    found = check_asserts(test)
    if not found:
        return []
    arg, srcs = found
    calls = [src for src in srcs if re.search(rf"\b{re.escape(arg)}\b", src)]
    return [f"    {arg} = {entry_point}\n    {src}\n" for src in calls[: min(n, len(calls) - 1)]]


def test_definitions(test: str) -> str:
    """The test module's imports, constants and helper definitions: no ``check`` (it holds every hidden assert)
    and no top-level statement (a trailing ``check(f)`` call, a stray assert)."""
    tree = pysyntax.parse(test)
    keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign))
            or (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name != "check")]
    return "\n\n".join(seg for n in keep if (seg := ast.get_source_segment(test, n, padded=True)))


def prompt_helpers(prompt: str, entry_point: str) -> str:
    """The prompt's imports and top-level definitions other than ``entry_point`` (e.g. ``poly`` of HumanEval/32,
    ``encode_cyclic`` of /38): HumanEval's own harness runs the tests in the program's namespace, where they are
    defined, so the test module carries them (a trusted copy: the agent cannot change what the tests call)."""
    try:
        tree = pysyntax.parse(prompt)
    except SyntaxError:
        return ""
    keep = [n for n in tree.body
            if isinstance(n, (ast.Import, ast.ImportFrom))
            or (isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.name != entry_point)]
    parts = [ast.get_source_segment(prompt, n, padded=True) for n in keep]
    return "\n\n".join(p for p in parts if p).strip()


def humaneval_tests(test: str, entry_point: str, prompt: str = "", *, first: int | None = None) -> tuple[str, int]:
    """A pytest file for one record and its number of test cases (with the prompt's helpers, see above); ``first``:
    the visible file, up to that many asserts (:func:`visible_checks`; ``("", 0)`` when there are none)."""
    helpers = prompt_helpers(prompt, entry_point)
    parts = split_check(test, entry_point)
    if first is not None:  # visible: without ``check``'s source, which holds every hidden assert
        parts, test = visible_checks(test, entry_point, first), test_definitions(test)
        if not parts:
            return "", 0
    head = (f"{helpers}\n\n\n" if helpers else "") + f"from solution import {entry_point}\n\n{test.rstrip()}\n"
    if parts:
        body = "".join(f"\n\ndef test_{entry_point}_{i}():\n{p}" for i, p in enumerate(parts))
        return head + body, len(parts)
    return head + f"\n\ndef test_check():\n    check({entry_point})\n", 1


def from_record(data: dict, *, split: str = "heldout", family: str = "humaneval", domain: str = "coding",
                visible: int = 0) -> Task:
    """One HumanEval record as a Task (the record is assumed to have the fields of ``FIELDS``); ``visible``: how many
    of its asserts are also visible tests."""
    entry, prompt = data["entry_point"], data["prompt"]
    tests, n = humaneval_tests(data["test"], entry, prompt)
    shown, n_shown = humaneval_tests(data["test"], entry, prompt, first=visible) if visible > 0 else ("", 0)
    text = (f"Complete the function `{entry}` and save the whole program in `solution.py` (the file already "
            f"holds the signature and docstring):\n\n```python\n{prompt.rstrip()}\n```")
    if n_shown:
        text += f"\n{VISIBLE_NOTE}"
    return Task(
        id=task_id(family, data["task_id"]), domain=domain, family=family, split=split,  # type: ignore[arg-type]
        prompt=text,
        verifier=Verifier(kind="tests", tests={f"test_{entry}.py": tests}, expected_tests=n),
        files={"solution.py": prompt.rstrip("\n") + "\n    raise NotImplementedError\n"},
        visible_tests={"test_visible.py": shown} if n_shown else {},
        reference=Reference(files={"solution.py": prompt + data["canonical_solution"]}),
        metadata={"entry_file": "solution.py", "function": entry, "source_id": str(data["task_id"]),
                  "format": "humaneval"},
    )


def import_humaneval(path: str | Path, *, split: str = "heldout", family: str = "humaneval",
                     domain: str = "coding", visible: int = 0) -> list[Task]:
    """Tasks from a HumanEval-style JSONL file; TaskError lists every bad record (file, line, field, fix).
    ``visible``: the first that many asserts of each record are also visible tests."""
    file = Path(path)
    check_visible(visible)
    problems: list[Problem] = []
    tasks = []
    for line, data in read_records(file, problems):
        if require(data, FIELDS, str(file), line, "HumanEval", problems):
            if not data["entry_point"].isidentifier():
                problems.append(Problem(str(file), line, "entry_point", f"{data['entry_point']!r} is not a name",
                                        "set it to the name of the function to implement"))
                continue
            tasks.append(from_record(data, split=split, family=family, domain=domain, visible=visible))
    raise_problems(problems)
    return tasks

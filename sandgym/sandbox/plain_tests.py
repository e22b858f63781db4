"""Which hidden test files the worker may run without pytest: plain ``def test_*():`` functions and nothing else.

Decided on the host from the files' syntax (the task author's files, trusted). A plain file holds only imports,
assignments, docstrings and function definitions without decorators; its tests are the module-level functions
named ``test*`` that take no parameters and are neither generators nor coroutines. For such files a pytest run
does nothing but import the module and call each test, so the worker does exactly that (``worker_plain.py``):
same outcomes (an exception in a test fails it; one at import is a collection error of the file), none of pytest's
start-up, collection and assertion rewriting. Anything else (fixtures, parametrize, marks, classes, conftest.py,
module-level code beyond assignments) runs under pytest as before.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

import sandgym.pysyntax as pysyntax

_ALLOWED = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef)


def plain_test_file(source: str) -> bool:
    """Whether ``source`` is a plain test module (see the module docstring)."""
    try:
        tree = pysyntax.parse(source)
    except (SyntaxError, ValueError):
        return False  # pytest reports the collection error
    tests = 0
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring or stray constant
        if not isinstance(node, _ALLOWED):
            return False
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] == "pytest" for m in modules):
                return False  # pytest's helpers (raises, approx, fixtures) behave like pytest only under pytest
            if any((a.asname or a.name).startswith("test") for a in node.names):
                return False  # an imported test* name would be collected by pytest too
        if isinstance(node, ast.FunctionDef):
            if node.decorator_list:
                return False
            if node.name.startswith("test"):
                a = node.args
                if a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
                    return False  # fixtures
                if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node)):
                    return False
                tests += 1
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and (t.id.startswith("test") or t.id.startswith("pytest"))
                   for t in targets):
                return False  # a test bound by assignment, or pytest's module-level hooks (pytestmark, ...)
    return tests > 0


def plain_test_files(files: Mapping[str, str | bytes]) -> bool:
    """Whether every file of a hidden-test set is a plain test module or a non-test helper (no conftest.py)."""
    for name, source in files.items():
        base = name.rsplit("/", 1)[-1]
        if base in ("conftest.py", "pytest.ini") or "/" in name:  # their own settings: pytest applies them
            return False
        if base.endswith(".py") and (base.startswith("test_") or base.endswith("_test.py")):
            if not isinstance(source, str) or not plain_test_file(source):
                return False
        elif base.endswith(".py"):
            return False  # a helper module: pytest's rootdir import rules decide what it shadows
    return True

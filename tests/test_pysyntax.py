"""Every in-process ``ast.parse`` goes through the thread-safe :mod:`sandgym.pysyntax` (CPython gh-106905)."""

from __future__ import annotations

import pathlib
import re

import sandgym
from sandgym import pysyntax

# These modules run as the sandbox's own single-threaded subprocess, never on the learner's grading threads.
_SUBPROCESS_ONLY = {"pysyntax.py", "sandbox/repl.py", "sandbox/worker_plain.py"}


def test_no_bare_ast_parse_outside_the_sandbox_subprocess() -> None:
    root = pathlib.Path(sandgym.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if str(path.relative_to(root)) not in _SUBPROCESS_ONLY and re.search(r"\bast\.parse\(", path.read_text())
    ]
    assert offenders == [], f"use sandgym.pysyntax.parse (thread-safe) instead of ast.parse in {offenders}"


def test_parse_returns_the_same_tree_as_ast_parse() -> None:
    import ast

    source = "def f(x):\n    return [y for y in x if y]\n"
    assert ast.dump(pysyntax.parse(source, "t.py")) == ast.dump(ast.parse(source, "t.py"))

"""``ast.parse`` that is safe to call from several threads at once.

CPython 3.11 keeps the AST constructor's recursion depth in state shared by all threads; two threads converting a
tree at the same time can fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython issue
gh-106905, seen here when rollout workers graded episodes in parallel). Every ``ast.parse`` in sandgym goes through
:func:`parse`, which holds one process-wide lock while the tree is built. Parsing a task file takes microseconds, so
the lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.Module:
    """``ast.parse(source, filename, mode)`` under the process-wide parse lock."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)  # type: ignore[return-value]

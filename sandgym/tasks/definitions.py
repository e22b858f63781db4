"""One definition of a module, read or replaced by name: what a task that asks for a single function uses.

A repository task of the lower rungs (``repo_complete``, ``repo_fix``: docs/PRIVATE_DATA.md) asks for one function
or method, not a file. The agent's code block is the definition; the env splices it into the module in place of
the one it names (:func:`splice_definition`, the ``write_definition`` code action of ``sandgym.envs.definitions``), so the rest of the
module stays as it was and the repository's tests grade it. Pure text in, text out: nothing here runs code.

>>> src = "import os\\n\\nclass A:\\n    def f(self):\\n        return 1\\n"
>>> print(splice_definition(src, "A.f", "def f(self):\\n    return 2"), end="")
import os
<BLANKLINE>
class A:
    def f(self):
        return 2
>>> print(definition_source(src, "A.f"), end="")
def f(self):
    return 1
"""

from __future__ import annotations

import ast
import textwrap

__all__ = ["DefinitionError", "definition_source", "definition_span", "splice_definition"]


class DefinitionError(ValueError):
    """A code block or module without the definition asked for; the message says what to send instead."""

Node = ast.FunctionDef | ast.AsyncFunctionDef


def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise DefinitionError(f"{what} does not parse: {exc.msg} (line {exc.lineno}); send the whole definition in one "
                        "```python block") from exc


def _find(tree: ast.Module, qualname: str) -> Node | None:
    """The module-level function or the method ``Class.name`` named ``qualname``."""
    head, _, name = qualname.rpartition(".")
    body: list[ast.stmt] = tree.body
    if head:
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == head), None)
        if cls is None:
            return None
        body = cls.body
    found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    return found[-1] if found else None


def _any_named(tree: ast.Module, name: str) -> Node | None:
    """The reply's definition of ``name``: at the top level, else the first inside a class."""
    top = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    if top:
        return top[-1]
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
            return n
    return None


def definition_span(source: str, qualname: str) -> tuple[int, int, int]:
    """(first line, last line, indent) of ``qualname``'s definition in ``source``, decorators included (1-based,
    inclusive); LookupError when the module has no such definition."""
    node = _find(_parse(source, "the module"), qualname)
    if node is None:
        raise LookupError(f"no definition {qualname!r} in the module")
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first, node.end_lineno or node.lineno, node.col_offset


def definition_source(source: str, qualname: str) -> str:
    """The text of ``qualname``'s definition (decorators included), dedented to column 0, ending in a newline."""
    first, last, _ = definition_span(source, qualname)
    lines = source.splitlines(keepends=True)[first - 1:last]
    return textwrap.dedent("".join(lines)).rstrip("\n") + "\n"


def splice_definition(source: str, qualname: str, code: str) -> str:
    """``source`` with the definition ``qualname`` replaced by the one of that name in ``code`` (a method may come
    at column 0 or inside its class), re-indented to the original's place. DefinitionError names what is missing."""
    name = qualname.rpartition(".")[2]
    reply = _parse(textwrap.dedent(code), "the code block")
    node = _any_named(reply, name)
    if node is None:
        raise DefinitionError(f"the code block defines no function `{name}`; reply with the whole definition "
                        f"(`def {name}(...):` and its body) in one ```python block")
    block = textwrap.dedent(code).splitlines(keepends=True)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    text = textwrap.dedent("".join(block[start - 1:node.end_lineno or node.lineno]))
    try:
        first, last, indent = definition_span(source, qualname)
    except LookupError as exc:
        raise DefinitionError(f"the module has no definition `{qualname}` to replace") from exc
    new = textwrap.indent(text.rstrip("\n") + "\n", " " * indent, lambda line: bool(line.strip()))
    lines = source.splitlines(keepends=True)
    result = "".join(lines[:first - 1]) + new + "".join(lines[last:])
    _parse(result, "the module with the new definition")
    return result

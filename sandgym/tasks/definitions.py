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

A reply may leave the docstring out: the module's stays.

>>> src = "def g(x):\\n    'Twice x.'\\n    return x + x\\n"
>>> print(definition_source(src, "g", docstring=False), end="")
def g(x):
    return x + x
>>> print(splice_definition(src, "g", "def g(x):\\n    return 2 * x"), end="")
def g(x):
    'Twice x.'
    return 2 * x
"""

from __future__ import annotations

import ast
import textwrap

import sandgym.pysyntax as pysyntax

__all__ = ["DefinitionError", "definition_source", "definition_span", "splice_definition"]


class DefinitionError(ValueError):
    """A code block or module without the definition asked for; the message says what to send instead."""

Node = ast.FunctionDef | ast.AsyncFunctionDef


def _parse(source: str, what: str) -> ast.Module:
    try:
        return pysyntax.parse(source)
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


def _docstring(node: Node) -> tuple[int, int] | None:
    """(first line, last line) of the function's docstring statement (1-based, inclusive), or None."""
    first = node.body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
            and len(node.body) > 1 and first.lineno > node.lineno):
        return first.lineno, first.end_lineno or first.lineno
    return None


def definition_source(source: str, qualname: str, *, docstring: bool = True) -> str:
    """The text of ``qualname``'s definition (decorators included), dedented to column 0, ending in a newline;
    without its docstring when ``docstring`` is False (what a reply needs to give: :func:`splice_definition`
    keeps the module's)."""
    first, last, _ = definition_span(source, qualname)
    lines = source.splitlines(keepends=True)
    doc = None if docstring else _docstring(_find(_parse(source, "the module"), qualname))  # type: ignore[arg-type]
    if doc is not None:
        lines = lines[:doc[0] - 1] + lines[doc[1]:]
        last -= doc[1] - doc[0] + 1
    return textwrap.dedent("".join(lines[first - 1:last])).rstrip("\n") + "\n"


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
    try:
        first, last, indent = definition_span(source, qualname)
    except LookupError as exc:
        raise DefinitionError(f"the module has no definition `{qualname}` to replace") from exc
    original = _find(_parse(source, "the module"), qualname)
    kept = _docstring(original) if original is not None and _docstring(node) is None else None
    if kept is not None:  # a reply without a docstring keeps the module's
        at = node.body[0].lineno
        pad = block[at - 1][: len(block[at - 1]) - len(block[at - 1].lstrip())]
        doc = textwrap.dedent("".join(source.splitlines(keepends=True)[kept[0] - 1:kept[1]]))
        block[at - 1:at - 1] = [pad + line if line.strip() else line for line in doc.splitlines(keepends=True)]
        node = _any_named(_parse("".join(block), "the code block"), name) or node
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    text = textwrap.dedent("".join(block[start - 1:node.end_lineno or node.lineno]))
    new = textwrap.indent(text.rstrip("\n") + "\n", " " * indent, lambda line: bool(line.strip()))
    lines = source.splitlines(keepends=True)
    result = "".join(lines[:first - 1]) + new + "".join(lines[last:])
    _parse(result, "the module with the new definition")
    return result

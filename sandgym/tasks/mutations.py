"""Source-level edits that turn working code into a task: a removed body (re-implement) or one small bug.

Every edit replaces a span of the original text, so the rest of the file (comments, formatting) is unchanged and
the diff between the starting state and the reference is exactly the task.

>>> src = "def f(a, b):\\n    return a + b\\n"
>>> [m.operator for m in bug_mutations(src, find_targets(src)[0])]
['wrong_operator']
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from dataclasses import dataclass

import sandgym.pysyntax as pysyntax

MUTATION_OPERATORS: tuple[str, ...] = (
    "flip_comparison", "off_by_one", "wrong_operator", "swap_arguments", "negate_condition",
)

_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_ARITH: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult,
}


@dataclass(frozen=True)
class Target:
    """A function or method (of a top-level class) whose body can be removed or mutated."""

    file: str
    qualname: str
    name: str
    lineno: int
    end_lineno: int
    body_lines: int

    @property
    def is_method(self) -> bool:
        return "." in self.qualname


@dataclass(frozen=True)
class Mutation:
    """One edit of ``target``: the mutated file text and what changed (for metadata, never for the prompt)."""

    kind: str
    """``reimplement`` or ``bugfix``."""
    operator: str
    """``remove_body`` or one of MUTATION_OPERATORS."""
    line: int
    before: str
    after: str
    source: str
    """The whole mutated file."""


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def _code_body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def _is_stub(body: list[ast.stmt]) -> bool:
    if not body:
        return True
    if len(body) == 1:
        stmt = body[0]
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            return True
        if isinstance(stmt, ast.Raise) and stmt.exc is not None and "NotImplementedError" in ast.unparse(stmt.exc):
            return True
    return False


def find_targets(source: str, file: str = "<string>") -> list[Target]:
    """Functions and methods with a real multi-line body (not a stub, not a one-liner on the ``def`` line)."""
    try:
        tree = pysyntax.parse(source)
    except SyntaxError:
        return []
    out: list[Target] = []
    for qualname, node in _functions(tree):
        body = _code_body(node)
        if _is_stub(body) or body[0].lineno == node.lineno or node.end_lineno is None:
            continue
        first = _first_line(body[0])
        out.append(Target(file, qualname, node.name, node.lineno, node.end_lineno, node.end_lineno - first + 1))
    return out


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno, *(d.lineno for d in decorators)])


def _node_of(tree: ast.Module, target: Target) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for qualname, node in _functions(tree):
        if qualname == target.qualname and node.lineno == target.lineno:
            return node
    raise LookupError(f"{target.file}: no function {target.qualname} at line {target.lineno}; re-read the file")


def remove_body(source: str, target: Target) -> Mutation:
    """Replace the body (after the docstring) with ``raise NotImplementedError``; signature and docstring stay."""
    node = _node_of(pysyntax.parse(source), target)
    body = _code_body(node)
    lines = source.splitlines(keepends=True)
    start, end = _first_line(body[0]), node.end_lineno or node.lineno
    indent = lines[body[0].lineno - 1][: len(lines[body[0].lineno - 1]) - len(lines[body[0].lineno - 1].lstrip())]
    removed = "".join(lines[start - 1:end])
    new = "".join(lines[: start - 1]) + f"{indent}raise NotImplementedError\n" + "".join(lines[end:])
    return Mutation("reimplement", "remove_body", start, removed, "raise NotImplementedError", new)


# ---- bug mutations ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Site:
    operator: str
    node: ast.AST
    replacement: str


def _segment(lines: list[bytes], node: ast.AST) -> str | None:
    lineno, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    if lineno is None or end != lineno:
        return None  # single-line spans only: precise and easy to review
    return lines[lineno - 1][node.col_offset:node.end_col_offset].decode("utf-8")  # type: ignore[attr-defined]


def _sites(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[bytes]) -> list[_Site]:
    sites: list[_Site] = []
    for stmt in _code_body(node):
        for sub in ast.walk(stmt):
            if isinstance(sub, (ast.If, ast.While, ast.IfExp)):
                test = _segment(lines, sub.test)
                if test is not None:
                    sites.append(_Site("negate_condition", sub.test, f"not ({test})"))
            seg = _segment(lines, sub)
            if seg is None:
                continue
            if isinstance(sub, ast.Compare) and len(sub.ops) == 1 and type(sub.ops[0]) in _FLIP:
                new = ast.Compare(sub.left, [_FLIP[type(sub.ops[0])]()], sub.comparators)
                sites.append(_Site("flip_comparison", sub, ast.unparse(new)))
            elif isinstance(sub, ast.BinOp) and type(sub.op) in _ARITH:
                text = ast.unparse(ast.BinOp(sub.left, _ARITH[type(sub.op)](), sub.right))
                if isinstance(sub.op, (ast.Mult, ast.Pow)):  # the new operator binds less tightly
                    text = f"({text})"
                sites.append(_Site("wrong_operator", sub, text))
            elif isinstance(sub, ast.Constant) and type(sub.value) is int:
                sites.append(_Site("off_by_one", sub, repr(sub.value + 1)))
            elif isinstance(sub, ast.Call):
                if isinstance(sub.func, ast.Name) and sub.func.id == "range" and sub.args \
                        and not isinstance(sub.args[-1], ast.Starred):
                    stop = _segment(lines, sub.args[-1 if len(sub.args) < 3 else 1])
                    if stop is not None:
                        sites.append(_Site("off_by_one", sub.args[-1 if len(sub.args) < 3 else 1], f"({stop}) - 1"))
                args = sub.args
                if len(args) >= 2 and not any(isinstance(a, ast.Starred) for a in args[:2]):
                    a, b = _segment(lines, args[0]), _segment(lines, args[1])
                    if a is not None and b is not None and a != b:
                        swapped = ast.Call(sub.func, [args[1], args[0], *args[2:]], sub.keywords)
                        sites.append(_Site("swap_arguments", sub, ast.unparse(swapped)))
    return sites


def _replace(lines: list[bytes], node: ast.AST, text: str) -> str:
    out = list(lines)
    i = node.lineno - 1  # type: ignore[attr-defined]
    line = out[i]
    out[i] = line[: node.col_offset] + text.encode("utf-8") + line[node.end_col_offset:]  # type: ignore[attr-defined]
    return b"".join(out).decode("utf-8")


def bug_mutations(source: str, target: Target, seed: int = 0) -> list[Mutation]:
    """Every valid one-site mutation of ``target``, in a seeded order (at most one per site)."""
    tree = pysyntax.parse(source)
    node = _node_of(tree, target)
    lines = source.encode("utf-8").splitlines(keepends=True)
    original = ast.dump(tree)
    out: list[Mutation] = []
    for site in _sites(node, lines):
        before = _segment(lines, site.node) or ""
        after = site.replacement
        new = _replace(lines, site.node, after)
        try:
            if ast.dump(pysyntax.parse(new)) == original:
                continue
        except SyntaxError:
            continue
        out.append(Mutation("bugfix", site.operator, site.node.lineno, before, after, new))  # type: ignore[attr-defined]
    rng = random.Random(f"{seed}:{target.file}:{target.qualname}")
    rng.shuffle(out)
    # prefer operator variety: first one of each operator, then the rest
    seen: set[str] = set()
    first = [m for m in out if not (m.operator in seen or seen.add(m.operator))]  # type: ignore[func-returns-value]
    return first + [m for m in out if m not in first]

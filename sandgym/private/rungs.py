"""The ladder's lower rungs: one definition of a repository, in forms a small model can start from.

``sandgym tasks from-repo`` verifies each candidate once (a body removed, or one small bug, that the repository's
tests catch and the reference passes) and can pose it at several rungs, easiest first (:data:`LADDER`):

- ``complete``: the module around the definition is in the prompt, cut to :data:`CONTEXT_TOKENS`, with the
  definition's signature and docstring and its body cut out; the reply's code block is the definition, spliced into
  the module and graded by the repository's tests. One turn. A train definition is also posed with the first third
  and two thirds of its body shown (:data:`PREFIX_CUTS`): more demonstrations from the same verified candidate.
- ``fix``: the definition with one small bug and the failing tests' output in the prompt; each reply's block
  replaces the definition and the tests run again, for up to 3 turns; SUBMIT submits.
- ``find``: a bug report (a failing test's name and what it printed, never the file or the line) in the prompt;
  the reply names the definition to fix (``function`` or ``Class.method``) in a code block, matched against it:
  localisation alone, before the tool-using ``locate`` must also search and edit.
- ``reimplement``, ``bugfix``, ``locate`` (``sandgym.private.fromrepo``): the whole repository, edited with tools.

The split is by source file or top-level definition and is the same at every rung, so no rung trains on a held-out
definition. A train task's prompt never shows a held-out definition's body (a module split by definition holds
both: their bodies are cut out of the context as the target's is), and no prompt shows its own target's body.
"""

from __future__ import annotations

from collections.abc import Callable

from sandgym.sandbox.protocol import TestReport, report_lines
from sandgym.tasks.definitions import definition_source, definition_span
from sandgym.tasks.mutations import Mutation, Target, find_targets, remove_body
from sandgym.tasks.suites.long_context import CHARS_PER_TOKEN

LADDER: tuple[str, ...] = ("complete", "fix", "find", "reimplement", "bugfix", "locate")
"""The task kinds from the easiest form to the hardest (a rung is a kind; its family is ``repo_<kind>``)."""
RUNGS: tuple[str, ...] = ("complete", "fix", "find")
"""The kinds this module poses: one definition, answered with one code block (``find``: its name)."""
TURNS = {"complete": 1, "fix": 3, "find": 1}
"""Model turns each rung's tasks allow (``Task.limits.max_turns``)."""
CONTEXT_TOKENS = 384
"""How much of the module a ``complete`` prompt shows around the definition (tokens, as CHARS_PER_TOKEN counts)."""
PREFIX_CUTS: tuple[float, ...] = (1 / 3, 2 / 3)
"""Extra ``complete`` tasks of a train definition: the body shown up to these shares of its lines."""
GAP = "# ..."
FAILURES_SHOWN = 5
"""Failing tests a ``fix`` prompt lists (the count line says how many failed in all)."""


def without_bodies(source: str, path: str, keep: str, drop: Callable[[Target], bool]) -> str:
    """``source`` with the body of every definition ``drop`` picks (except ``keep``) cut out, as the target's is."""
    while True:
        found = [t for t in find_targets(source, path) if t.qualname != keep and drop(t)]
        if not found:
            return source
        source = remove_body(source, max(found, key=lambda t: t.lineno)).source


def module_context(source: str, first: int, last: int, budget_chars: int) -> str:
    """Lines ``first..last`` (1-based) of ``source``, then lines above and below them in turn while they fit in
    ``budget_chars``, with the module's imports first when they are not already in view; ``# ...`` marks a gap."""
    lines = source.splitlines()
    lo, hi = first - 1, last
    used = sum(len(x) + 1 for x in lines[lo:hi])
    grew = True
    while grew:
        grew = False
        for side in (-1, 1):
            i = lo - 1 if side < 0 else hi
            if 0 <= i < len(lines) and used + len(lines[i]) + 1 <= budget_chars:
                used += len(lines[i]) + 1
                lo, hi = (i, hi) if side < 0 else (lo, i + 1)
                grew = True
    imports = [x for x in lines[:lo] if x.startswith(("import ", "from "))]
    head: list[str] = []
    for x in imports:
        if used + len(x) + 1 > budget_chars * 5 // 4:
            break
        head.append(x)
        used += len(x) + 1
    out = [*head, *([GAP] if lo > 0 else []), *lines[lo:hi], *([GAP] if hi < len(lines) else [])]
    return "\n".join(out)


def body_prefix(original: str, target: Target, share: float) -> list[str]:
    """The first ``share`` of the target's body lines in the original module (at least one line)."""
    lines = original.splitlines()
    start = target.end_lineno - target.body_lines  # 0-based index of the body's first line
    k = max(1, int(target.body_lines * share))
    return lines[start:start + k]


def complete_prompt(target: Target, mutation: Mutation, original: str, heldout: Callable[[Target], bool],
                    share: float = 0.0) -> str:
    """The ``complete`` prompt: the module around the target (its body cut out, or shown up to ``share``)."""
    source = mutation.source
    if share:
        lines = source.splitlines()
        shown = body_prefix(original, target, share)
        end = shown[-1]
        indent = end[: len(end) - len(end.lstrip())] + ("    " if end.rstrip().endswith(":") else "")
        lines[mutation.line - 1:mutation.line] = [*shown, f"{indent}{GAP} (the rest of the body)"]
        source = "\n".join(lines) + "\n"
    source = without_bodies(source, target.file, target.qualname, heldout)
    first, last, _ = definition_span(source, target.qualname)  # DefinitionError: a cut the module cannot parse at
    context = module_context(source, first, last, CONTEXT_TOKENS * CHARS_PER_TOKEN)
    what = f"method `{target.qualname}`" if target.is_method else f"function `{target.name}`"
    cut = ("its body is cut out" if not share else
           f"its body is shown only up to `{GAP} (the rest of the body)`")
    return (f"This is `{target.file}` of a Python project, around the {what}; {cut}:\n\n```python\n{context}\n```\n\n"
            f"Write `{target.name}` so that the project's tests pass: reply with its definition, the `def` line and "
            "the body (its docstring stays as it is), in one ```python block.")


def fix_prompt(target: Target, mutation: Mutation, start: TestReport) -> str:
    """The ``fix`` prompt: the definition with its bug, and the failing test run the bug causes."""
    definition = definition_source(mutation.source, target.qualname, docstring=False).rstrip("\n")
    what = f"method `{target.qualname}`" if target.is_method else f"function `{target.name}`"
    lines = report_lines(start)
    run = "\n".join(lines[:FAILURES_SHOWN + 1] + ([f"... and {len(lines) - FAILURES_SHOWN - 1} more"]
                                                 if len(lines) > FAILURES_SHOWN + 1 else []))
    return (f"A recent change broke the {what} in `{target.file}` of a Python project:\n\n```python\n{definition}\n"
            f"```\n\n(its docstring left out). The project's tests now fail:\n\n```\n{run}\n```\n\nReply with the "
            f"corrected definition of `{target.name}`, the `def` line and the body, in one ```python block: it "
            "replaces the definition (the docstring stays) and the tests run again. When they pass, reply SUBMIT.")


def find_prompt(failing: list[str], report: str) -> str:
    """The ``find`` prompt: the bug report of a ``locate`` task, answered with a name instead of an edit."""
    others = f" ({len(failing) - 1} other test(s) too)" if len(failing) > 1 else ""
    return (f"A user of a Python project reports a bug: since a recent change, the project's test `{failing[0]}` "
            f"fails{others}. What it printed:\n\n```\n{report}\n```\n\nWhich function or method of the project "
            "has the bug? Reply with its name in one ```python block: `name` for a function, `Class.name` for a "
            "method.")

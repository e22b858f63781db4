"""Per-turn credit for a search that shows the question's evidence (``evidence@v1``), pure and versioned.

Long-context tasks declare the document lines a correct answer rests on: ``metadata["evidence"]``, 1-based line
numbers of the workspace file ``metadata["document"]`` (needle: the failed transaction's line; multihop: each
"forwards" note of the chain and the last hop's "stores" note; tracking: the variable's SET and UPDATE lines;
aggregation: the records counted; constraints: the policy and the options). An outcome-only reward ranks a quick
guess above a search that ran out of turns; this term pays the search itself, on the turn it finds the evidence.

Rules of ``evidence@v1`` (one turn; ``calls`` are the tool calls that ran in it, each with its output):

- only what the built-in ``grep`` and ``read_file`` tools returned counts, read from their output formats
  (``grep``: ``PATH:N:TEXT`` lines with PATH the document; ``read_file`` on the document: ``N| TEXT`` lines);
- a shown line counts only when its TEXT is the **pristine** document's line N (the task's own file, not the
  workspace's): rewriting the document, grepping a decoy file or printing guessed lines from code earns nothing,
  and a line the tool did not show (a pattern that matched nothing, a page cut short) is never paid;
- a turn counts only when its calls together show at most :data:`MAX_LINES` lines of the document, so listing the
  whole document, a pattern matching most of it, or many narrow calls paging through it in one turn earn nothing:
  the credit is for a search narrow enough to find the line;
- each evidence line earns ``1 / len(evidence)`` the first time a counted turn shows it; later showings earn
  nothing; an episode's credits therefore sum to (evidence lines found) / (evidence lines declared), in [0, 1].

The term rewards seeing the evidence, not answering: correctness still needs a submitted right answer, and the
term's weight (the reward weights' ``evidence@v1``, default 0.2) stays small next to it. It reads the tools'
output and never runs an agent-written pattern itself. Changing any of this means registering ``evidence@v2``
with golden turn cases (``sandgym/envs/golden/multihop_evidence_turns.json``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sandgym.envs.builtin_tools import GREP_LINE_CHARS

__all__ = ["MAX_LINES", "declared_evidence", "evidence_turn_v1", "shown_lines"]

MAX_LINES = 20
"""A turn whose calls show more lines of the document than this earns no evidence credit."""

_READ_LINE = re.compile(r"^ *(\d+)\| (.*)$")


def declared_evidence(metadata: Mapping[str, Any]) -> int:
    """How many evidence lines the task declares (0: the term does not apply)."""
    return len(metadata.get("evidence") or ()) if metadata.get("document") else 0


def _same(text: str, line: str, *, cut: bool) -> bool:
    """``text`` (as a tool showed it) is the pristine ``line``; ``cut``: the tool may have shortened it."""
    if text == line:
        return True
    return cut and text.endswith(" ...") and line.startswith(text[:-4])


def shown_lines(name: str, arguments: Mapping[str, Any], output: str, document: str,
                pristine: Sequence[str]) -> tuple[int, set[int]]:
    """(how many lines of ``document`` one call's ``output`` shows, the numbers of those that are the pristine
    document's lines). A call that is not a ``grep`` or a ``read_file`` of the document shows none.

    >>> pristine = ["a", "ERROR tx1 E1", "b"]
    >>> shown_lines("grep", {"pattern": "tx1"}, "d.log:2:ERROR tx1 E1", "d.log", pristine)
    (1, {2})
    >>> shown_lines("grep", {"pattern": "tx"}, "d.log:2:ERROR tx1 E9\\nother.log:2:ERROR tx1 E1", "d.log", pristine)
    (1, set())
    >>> shown_lines("read_file", {"path": "./d.log"}, "[d.log: lines 1-2 of 3]\\n1| a\\n2| ERROR tx1 E1", "d.log",
    ...             pristine)
    (2, {1, 2})
    """
    rows: list[tuple[int, str, bool]] = []  # (N, TEXT, may be cut)
    if name == "grep":
        prefix = document + ":"
        for row in output.splitlines():
            number, sep, text = row[len(prefix):].partition(":") if row.startswith(prefix) else ("", "", "")
            if sep and number.isdigit():
                rows.append((int(number), text, len(row) == GREP_LINE_CHARS + 4))
    elif name == "read_file" and isinstance(arguments.get("path"), str) and \
            arguments["path"].removeprefix("./") == document:
        for row in output.splitlines()[1:]:
            m = _READ_LINE.match(row)
            if m:
                rows.append((int(m.group(1)), m.group(2), False))
    real = {n for n, text, cut in rows if 1 <= n <= len(pristine) and _same(text, pristine[n - 1], cut=cut)}
    return len(rows), real


def evidence_turn_v1(calls: Sequence[tuple[str, Mapping[str, Any], str]], metadata: Mapping[str, Any],
                     files: Mapping[str, str], decided: Mapping[int, bool]) -> tuple[float, dict[int, bool]]:
    """Credit of one turn: ``1/len(evidence)`` per evidence line it first shows, if its calls show few enough lines
    of the document (module doc). ``calls``: ``(tool name, arguments, output)`` of each call that ran.

    >>> meta = {"document": "d.log", "evidence": [2, 4]}
    >>> files = {"d.log": "a\\nERROR tx1 E1\\nb\\nERROR tx2 E2\\n"}
    >>> evidence_turn_v1([("grep", {"pattern": "tx2"}, "d.log:4:ERROR tx2 E2")], meta, files, {})
    (0.5, {4: True})
    >>> evidence_turn_v1([("grep", {"pattern": "tx2"}, "d.log:4:ERROR tx2 E2")], meta, files, {4: True})
    (0.0, {})
    """
    total = declared_evidence(metadata)
    document = str(metadata.get("document", ""))
    text = files.get(document)
    if not total or text is None:
        return 0.0, {}
    pristine = text.splitlines()
    shown, real = 0, set[int]()
    for name, arguments, output in calls:
        count, lines = shown_lines(name, arguments, output, document, pristine)
        shown, real = shown + count, real | lines
    if shown > MAX_LINES:
        return 0.0, {}
    evidence = {int(n) for n in metadata["evidence"]}
    new = {n: True for n in sorted(real & evidence) if n not in decided}
    return len(new) / total, new

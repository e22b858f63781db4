"""Per-turn credit for a search that shows the question's evidence (``evidence@v1``), pure and versioned.

Long-context tasks declare the document lines a correct answer rests on: ``metadata["evidence"]``, 1-based line
numbers of the workspace file ``metadata["document"]`` (needle: the failed transaction's line; multihop: each
"forwards" note of the chain and the last hop's "stores" note; tracking: the variable's SET and UPDATE lines;
aggregation: the records counted; constraints: the policy and the options). An outcome-only reward ranks a quick
guess above a search that ran out of turns; this term pays the search itself, on the turn it finds the evidence.

Rules of ``evidence@v1`` (one turn; ``calls`` are the tool calls that ran in it):

- only ``grep`` and ``read_file`` calls on the document count (``grep``'s path is the document or a folder holding
  it); what a call showed is recomputed from the task's **pristine** document, never read from the observation, so
  rewriting the workspace file or printing guessed lines from code earns nothing;
- a turn counts only when its calls together show at most :data:`MAX_LINES` lines of the document (``grep``: every
  line it matches; ``read_file``: its line range), so listing the whole document, a pattern matching most of it,
  or many narrow calls paging through it in one turn earn nothing: the credit is for a search narrow enough to
  find the line;
- each evidence line earns ``1 / len(evidence)`` the first time a counted call shows it; later showings earn
  nothing; an episode's credits therefore sum to (evidence lines found) / (evidence lines declared), in [0, 1].
- ``grep`` patterns are matched here as Python regular expressions (``fixed_strings``: plain substrings;
  ``ignore_case`` honoured); a pattern Python cannot compile, or one that takes longer than
  :data:`PATTERN_BUDGET_S` over the document, earns nothing.

The term rewards seeing the evidence, not answering: correctness still needs a submitted right answer, and the
term's weight (the reward weights' ``evidence@v1``, default 0.2) stays small next to it. Changing any of this means
registering ``evidence@v2`` with golden turn cases (``sandgym/envs/golden/multihop_evidence_turns.json``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import regex

from sandgym.envs.builtin_tools import READ_PAGE_LINES

__all__ = ["MAX_LINES", "PATTERN_BUDGET_S", "declared_evidence", "evidence_turn_v1", "shown_lines"]

MAX_LINES = 20
"""A turn whose calls show more lines of the document than this earns no evidence credit."""
PATTERN_BUDGET_S = 0.5
"""Time one grep pattern may take over the document here (the agent writes it: a pattern that backtracks
catastrophically earns nothing instead of stalling the env)."""


def declared_evidence(metadata: Mapping[str, Any]) -> int:
    """How many evidence lines the task declares (0: the term does not apply)."""
    return len(metadata.get("evidence") or ()) if metadata.get("document") else 0


def _covers(path: Any, document: str, *, folders: bool) -> bool:
    """True when ``path`` names the document (or, with ``folders``, a folder holding it)."""
    if not isinstance(path, str):
        return False
    path = path.strip().removeprefix("./").rstrip("/")
    if path == document:
        return True
    return folders and (path in ("", ".") or document.startswith(path + "/"))


def _grep_lines(arguments: Mapping[str, Any], lines: Sequence[str]) -> list[int]:
    pattern = arguments.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        return []
    fold = bool(arguments.get("ignore_case", False))
    if arguments.get("fixed_strings", False):
        needle = pattern.lower() if fold else pattern
        return [n for n, line in enumerate(lines, 1) if needle in (line.lower() if fold else line)]
    try:
        rx = regex.compile(pattern, regex.IGNORECASE if fold else 0)
        deadline = time.monotonic() + PATTERN_BUDGET_S
        return [n for n, line in enumerate(lines, 1)
                if rx.search(line, timeout=max(deadline - time.monotonic(), 1e-6))]
    except (regex.error, TimeoutError):
        return []


def _read_lines(arguments: Mapping[str, Any], total: int) -> list[int]:
    try:
        start = int(arguments.get("start_line", 1))
        end = arguments.get("end_line")
        last = min(total, int(end) if end is not None else start + READ_PAGE_LINES - 1)
    except (TypeError, ValueError):
        return []
    return list(range(max(start, 1), last + 1)) if start >= 1 else []


def shown_lines(name: str, arguments: Mapping[str, Any], document: str, text: str) -> list[int]:
    """1-based lines of the pristine document ``text`` (the workspace file ``document``) that one tool call shows;
    [] for a call that does not show the document.

    >>> doc = "a\\nERROR tx1 E1\\nb\\nERROR tx2 E2\\n"
    >>> shown_lines("grep", {"pattern": "tx2", "path": "logs/s.log"}, "logs/s.log", doc)
    [4]
    >>> shown_lines("read_file", {"path": "logs/s.log", "start_line": 2, "end_line": 3}, "logs/s.log", doc)
    [2, 3]
    >>> shown_lines("grep", {"pattern": "tx2", "path": "other.log"}, "logs/s.log", doc)
    []
    """
    lines = text.splitlines()
    if name == "grep" and _covers(arguments.get("path", "."), document, folders=True):
        return _grep_lines(arguments, lines)
    if name == "read_file" and _covers(arguments.get("path"), document, folders=False):
        return _read_lines(arguments, len(lines))
    return []


def evidence_turn_v1(calls: Sequence[tuple[str, Mapping[str, Any]]], metadata: Mapping[str, Any],
                     files: Mapping[str, str], decided: Mapping[int, bool]) -> tuple[float, dict[int, bool]]:
    """Credit of one turn: ``1/len(evidence)`` per evidence line it first shows, if its calls show few enough lines
    of the document (module doc).

    >>> meta = {"document": "d.log", "evidence": [2, 4]}
    >>> files = {"d.log": "a\\nERROR tx1 E1\\nb\\nERROR tx2 E2\\n"}
    >>> evidence_turn_v1([("grep", {"pattern": "tx2", "path": "d.log"})], meta, files, {})
    (0.5, {4: True})
    >>> evidence_turn_v1([("grep", {"pattern": "tx2", "path": "d.log"})], meta, files, {4: True})
    (0.0, {})
    """
    total = declared_evidence(metadata)
    document = str(metadata.get("document", ""))
    text = files.get(document)
    if not total or text is None:
        return 0.0, {}
    evidence = {int(n) for n in metadata["evidence"]}
    shown = {n for name, arguments in calls for n in shown_lines(name, arguments, document, text)}
    if len(shown) > MAX_LINES:
        return 0.0, {}
    new = {n: True for n in sorted(shown & evidence) if n not in decided}
    return len(new) / total, new

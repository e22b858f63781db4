"""The per-turn reward terms ``ToolEnv(turn_rewards=True, turn_term=...)`` can pay, one registry.

A term is pure: ``(turn, decided so far) -> (credit in [0, 1], newly decided)``, where a :class:`Turn` holds what
the agent wrote, the tool calls that ran, the task's metadata and its pristine files. Each term declares how many
items a task offers it (0: the term does not apply to that task) and, optionally, one line for the system prompt.

- ``intermediate@v1`` (``sandgym.envs.intermediate``): stating a tracked variable's checkpoints correctly;
- ``evidence@v1`` (``sandgym.envs.evidence``): a search narrow enough to show the question's evidence lines.

Terms are versioned like rewards: golden turn cases (``"turn_cases"`` in ``sandgym/envs/golden/*.json``: metadata,
optional files, turns as :func:`as_turn` reads them, expected credit per turn) are replayed by ``sandgym rewards
check``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sandgym.envs.evidence import declared_evidence, evidence_turn_v1
from sandgym.envs.intermediate import claim_hint, declares_checkpoints, intermediate_turn_v1
from sandgym.envs.parsing import parse_turn

__all__ = ["TURN_TERMS", "Turn", "TurnTerm", "TurnTermName", "TurnTermSpec", "as_turn", "recorded_calls", "run_turns"]


@dataclass(frozen=True)
class Turn:
    """One agent turn as a per-turn term sees it."""

    text: str
    calls: tuple[tuple[str, Mapping[str, Any], str], ...] = ()
    """``(tool name, arguments, output)`` of each call that ran without error, in order."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    """The task's files as the task defines them (never the workspace's current state)."""


TurnTerm = Callable[[Turn, Mapping[int, bool]], tuple[float, dict[int, bool]]]


@dataclass(frozen=True)
class TurnTermSpec:
    credit: TurnTerm
    items: Callable[[Mapping[str, Any]], int]
    """How many creditable items a task's metadata declares (0: the term does not apply)."""
    hint: Callable[[Mapping[str, Any]], str] | None = None
    """One system-prompt line for a task the term applies to (None: nothing to tell the agent)."""


TurnTermName = Literal["intermediate@v1", "evidence@v1"]
"""The registered names (a config's ``turn_term`` is checked against it when the config loads)."""

TURN_TERMS: dict[str, TurnTermSpec] = {
    "intermediate@v1": TurnTermSpec(
        credit=lambda turn, decided: intermediate_turn_v1(turn.text, turn.metadata, decided),
        items=lambda meta: len(meta["checkpoints"]) if declares_checkpoints(meta) else 0,
        hint=claim_hint,
    ),
    "evidence@v1": TurnTermSpec(
        credit=lambda turn, decided: evidence_turn_v1(turn.calls, turn.metadata, turn.files, decided),
        items=declared_evidence,
    ),
}


def as_turn(turn: str | Mapping[str, Any], metadata: Mapping[str, Any], files: Mapping[str, str]) -> Turn:
    """A golden case's turn: a text (its ``<tool_call>`` JSON calls taken as having run with no output) or
    ``{"text": ..., "calls": [[name, arguments, output], ...]}`` (the calls that ran and what they returned)."""
    if isinstance(turn, str):
        return Turn(turn, tuple((c.name, c.arguments, "") for c in parse_turn(turn).calls), metadata, files)
    calls = tuple((str(name), dict(args), str(output)) for name, args, output in turn.get("calls", ()))
    return Turn(str(turn.get("text", "")), calls, metadata, files)


_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)


def recorded_calls(text: str, observation: str) -> tuple[tuple[str, dict[str, Any], str], ...] | None:
    """The calls that ran in a recorded ``ToolEnv`` turn, with their outputs: the turn text's ``<tool_call>`` calls
    paired with the observation's ``<tool_response>`` blocks (an ``Error:`` block is a call that failed). None when
    they cannot be paired (a call refused before it ran leaves no block), so a study can count such turns apart.

    >>> recorded_calls('<tool_call>{"name": "grep", "arguments": {"pattern": "x"}}</tool_call>',
    ...                '<tool_response>\nd.log:3:x\n</tool_response>')
    (('grep', {'pattern': 'x'}, 'd.log:3:x'),)
    """
    calls, outputs = parse_turn(text).calls, _RESPONSE.findall(observation)
    if len(calls) != len(outputs):
        return None
    return tuple((c.name, dict(c.arguments), out) for c, out in zip(calls, outputs, strict=True)
                 if not out.startswith("Error:"))


def run_turns(term: TurnTerm, turns: Sequence[str | Mapping[str, Any]], metadata: Mapping[str, Any],
              files: Mapping[str, str] | None = None) -> list[float]:
    """Credits of a sequence of turns (each as :func:`as_turn` reads it), threading the decided items (the golden
    check, tests and studies that replay recorded episodes)."""
    decided: dict[int, bool] = {}
    out = []
    for turn in turns:
        credit, new = term(as_turn(turn, metadata, files or {}), decided)
        decided.update(new)
        out.append(float(credit))
    return out

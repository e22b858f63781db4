"""The per-turn reward terms ``ToolEnv(turn_rewards=True, turn_term=...)`` can pay, one registry.

A term is pure: ``(turn, decided so far) -> (credit, newly decided)``, where a :class:`Turn` holds what the agent
wrote, the tool calls that ran, the calls that ran in the episode's earlier turns, the task's metadata and its
pristine files. Each term declares how many items a task offers it (0: the term does not apply to that task) and,
optionally, one line for the system prompt. A turn's credit is in [0, 1] except where a term says otherwise.

- ``intermediate@v1`` (``sandgym.envs.intermediate``): stating a tracked variable's checkpoints correctly;
- ``evidence@v1`` (``sandgym.envs.evidence``): a search narrow enough to show the question's evidence lines;
- ``evidence_norepeat@v1`` (:func:`evidence_norepeat_turn_v1`): ``evidence@v1``'s credit minus :data:`REPEAT_COST`
  per call that repeats one already run in the episode (same tool, arguments and output), so its credit can be
  negative (in ``[-REPEAT_COST * calls in the turn, 1]``). Why: after RL with ``evidence@v1`` the policy found every
  evidence line of multihop long-context tasks, then re-ran the same grep turn after turn until its turn budget ran
  out instead of submitting; a repeat shows nothing new, and now it costs.

Terms are versioned like rewards: golden turn cases (``"turn_cases"`` in ``sandgym/envs/golden/*.json``: metadata,
optional files, turns as :func:`as_turn` reads them, expected credit per turn) are replayed by ``sandgym rewards
check``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sandgym.envs.evidence import declared_evidence, evidence_turn_v1
from sandgym.envs.intermediate import claim_hint, declares_checkpoints, intermediate_turn_v1
from sandgym.envs.parsing import parse_turn

__all__ = ["REPEAT_COST", "TURN_TERMS", "Turn", "TurnTerm", "TurnTermName", "TurnTermSpec", "as_turn",
           "evidence_norepeat_turn_v1", "recorded_calls", "repeated_calls", "run_turns"]

Call = tuple[str, Mapping[str, Any], str]
"""``(tool name, arguments, output)`` of one call that ran without error."""


@dataclass(frozen=True)
class Turn:
    """One agent turn as a per-turn term sees it."""

    text: str
    calls: tuple[tuple[str, Mapping[str, Any], str], ...] = ()
    """``(tool name, arguments, output)`` of each call that ran without error, in order."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    """The task's files as the task defines them (never the workspace's current state)."""
    earlier: tuple[Call, ...] = ()
    """The calls that ran (as in ``calls``) in this episode's earlier turns, in order."""


TurnTerm = Callable[[Turn, Mapping[int, bool]], tuple[float, dict[int, bool]]]


@dataclass(frozen=True)
class TurnTermSpec:
    credit: TurnTerm
    items: Callable[[Mapping[str, Any]], int]
    """How many creditable items a task's metadata declares (0: the term does not apply)."""
    hint: Callable[[Mapping[str, Any]], str] | None = None
    """One system-prompt line for a task the term applies to (None: nothing to tell the agent)."""


REPEAT_COST = 0.25
"""What ``evidence_norepeat@v1`` charges, in credit units (before the term's weight), for each call that repeats a
call already run in the episode."""


def _call_key(call: Call) -> tuple[str, str, str]:
    name, arguments, output = call
    try:
        args = json.dumps(arguments, sort_keys=True, default=repr)
    except (TypeError, ValueError):  # keys that cannot be sorted: never from a parsed JSON call
        args = repr(arguments)
    return str(name), args, str(output)


def repeated_calls(calls: Sequence[Call], earlier: Sequence[Call] = ()) -> int:
    """How many of ``calls`` repeat a call that ran before them in the episode (in ``earlier`` or earlier in
    ``calls``): the same tool name, the same arguments (compared as canonical JSON) and the same output.

    >>> grep = ("grep", {"pattern": "x", "path": "d.log"}, "d.log:3:x")
    >>> repeated_calls([grep], [("grep", {"path": "d.log", "pattern": "x"}, "d.log:3:x")])
    1
    >>> repeated_calls([grep, grep, ("grep", grep[1], "d.log:4:x")])
    1
    """
    seen = {_call_key(c) for c in earlier}
    repeats = 0
    for c in calls:
        key = _call_key(c)
        if key in seen:
            repeats += 1
        seen.add(key)
    return repeats


def evidence_norepeat_turn_v1(calls: Sequence[Call], earlier: Sequence[Call], metadata: Mapping[str, Any],
                              files: Mapping[str, str], decided: Mapping[int, bool]) -> tuple[float, dict[int, bool]]:
    """Credit of one turn under ``evidence_norepeat@v1``: ``evidence@v1``'s credit (same rules, same decided lines)
    minus :data:`REPEAT_COST` per call of the turn that repeats one already run in the episode
    (:func:`repeated_calls`). Only on a task ``evidence@v1`` applies to (one declaring evidence lines); elsewhere it
    is ``evidence@v1``'s (0.0). The credit is in ``[-REPEAT_COST * len(calls), 1]`` and never above ``evidence@v1``'s.

    >>> meta, files = {"document": "d.log", "evidence": [2]}, {"d.log": "a\\nERROR tx1 E1\\n"}
    >>> grep = ("grep", {"pattern": "tx1"}, "d.log:2:ERROR tx1 E1")
    >>> evidence_norepeat_turn_v1([grep], [], meta, files, {})
    (1.0, {2: True})
    >>> evidence_norepeat_turn_v1([grep], [grep], meta, files, {2: True})
    (-0.25, {})
    """
    credit, new = evidence_turn_v1(calls, metadata, files, decided)
    if not declared_evidence(metadata):
        return credit, new
    return credit - REPEAT_COST * repeated_calls(calls, earlier), new


TurnTermName = Literal["intermediate@v1", "evidence@v1", "evidence_norepeat@v1"]
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
    "evidence_norepeat@v1": TurnTermSpec(
        credit=lambda turn, decided: evidence_norepeat_turn_v1(turn.calls, turn.earlier, turn.metadata, turn.files,
                                                               decided),
        items=declared_evidence,
    ),
}


def as_turn(turn: str | Mapping[str, Any], metadata: Mapping[str, Any], files: Mapping[str, str],
            earlier: Sequence[Call] = ()) -> Turn:
    """A golden case's turn: a text (its ``<tool_call>`` JSON calls taken as having run with no output) or
    ``{"text": ..., "calls": [[name, arguments, output], ...]}`` (the calls that ran and what they returned);
    ``earlier``: the calls that ran in the episode's earlier turns."""
    if isinstance(turn, str):
        calls: tuple[Call, ...] = tuple((c.name, c.arguments, "") for c in parse_turn(turn).calls)
        return Turn(turn, calls, metadata, files, tuple(earlier))
    calls = tuple((str(name), dict(args), str(output)) for name, args, output in turn.get("calls", ()))
    return Turn(str(turn.get("text", "")), calls, metadata, files, tuple(earlier))


_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)


def recorded_calls(text: str, observation: str) -> tuple[tuple[str, dict[str, Any], str], ...] | None:
    """The calls that ran in a recorded ``ToolEnv`` turn, with their outputs: the turn text's ``<tool_call>`` calls
    paired with the observation's ``<tool_response>`` blocks (an ``Error:`` block is a call that failed). None when
    they cannot be paired (a call refused before it ran leaves no block), so a study can count such turns apart.

    >>> recorded_calls('<tool_call>{"name": "grep", "arguments": {"pattern": "x"}}</tool_call>',
    ...                '<tool_response>\\nd.log:3:x\\n</tool_response>')
    (('grep', {'pattern': 'x'}, 'd.log:3:x'),)
    """
    calls, outputs = parse_turn(text).calls, _RESPONSE.findall(observation)
    if len(calls) != len(outputs):
        return None
    return tuple((c.name, dict(c.arguments), out) for c, out in zip(calls, outputs, strict=True)
                 if not out.startswith("Error:"))


def run_turns(term: TurnTerm, turns: Sequence[str | Mapping[str, Any]], metadata: Mapping[str, Any],
              files: Mapping[str, str] | None = None) -> list[float]:
    """Credits of a sequence of turns (each as :func:`as_turn` reads it), threading the decided items and the calls
    that ran in earlier turns (the golden check, tests and studies that replay recorded episodes)."""
    decided: dict[int, bool] = {}
    earlier: list[Call] = []
    out = []
    for turn in turns:
        t = as_turn(turn, metadata, files or {}, earlier)
        credit, new = term(t, decided)
        decided.update(new)
        earlier.extend(t.calls)
        out.append(float(credit))
    return out

"""Parse one model turn into tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

The Hermes/Qwen convention; several calls per turn are allowed. Parsing never raises: every problem becomes a
``ParseError`` whose ``kind`` is counted for rewards and failure modes and whose ``message`` is shown to the agent.
A fenced ```` ```python ```` block in a turn without ``<tool_call>`` is a *code action* (see ``ToolEnv``'s
``code_action``), because small models write code blocks long before they write JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ToolCall",
    "ParseError",
    "ParsedTurn",
    "ErrorKind",
    "FORMAT_EXAMPLE",
    "parse_turn",
    "extract_code_blocks",
]

ErrorKind = Literal["malformed", "unknown_tool", "bad_args", "no_call"]

FORMAT_EXAMPLE = '<tool_call>{"name": "read_file", "arguments": {"path": "solution.py"}}</tool_call>'

_CALL_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FENCE_RE = re.compile(r"```(?:python|py|python3)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ToolCall:
    """One parsed call. ``code_action`` marks calls made from a fenced code block rather than JSON."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    code_action: bool = False


@dataclass(frozen=True)
class ParseError:
    """Why (part of) a turn could not be turned into a valid call; ``message`` is what the agent sees."""

    kind: ErrorKind
    message: str
    raw: str = ""


@dataclass(frozen=True)
class ParsedTurn:
    """The calls of one turn, in order, and the errors met while parsing it."""

    calls: tuple[ToolCall, ...] = ()
    errors: tuple[ParseError, ...] = ()
    code_blocks: tuple[str, ...] = ()

    @property
    def has_call_markup(self) -> bool:
        return bool(self.calls) or any(e.kind == "malformed" for e in self.errors)


def _format_help() -> str:
    return f"Write each tool call as {FORMAT_EXAMPLE}"


MAX_JSON_DEPTH = 64
"""Deepest ``[``/``{`` nesting a tool call may use. Deeper JSON (``[[[[...``) would make ``json.loads`` (or any
later ``json.dumps`` of the arguments) raise RecursionError, so it is a malformed call, checked before parsing."""

_JSON_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')


def _json_depth(raw: str, limit: int = MAX_JSON_DEPTH) -> int:
    """Deepest bracket nesting of ``raw`` outside JSON strings; stops counting once past ``limit``."""
    depth = deepest = 0
    for m in _JSON_TOKEN_RE.finditer(raw):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif tok in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _loads(raw: str) -> Any:
    """``json.loads`` that never recurses deeply: too-deep input raises ``ValueError``, as does bad JSON."""
    if _json_depth(raw) > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw)
    except RecursionError as exc:  # defence in depth; _json_depth should have caught it
        raise ValueError("JSON nested too deeply") from exc


def _parse_one(body: str) -> ToolCall | ParseError:
    raw = body.strip()
    if not raw:
        return ParseError("malformed", f"Empty <tool_call></tool_call>. {_format_help()}", raw)
    try:
        obj = _loads(raw)
    except json.JSONDecodeError as exc:
        return ParseError(
            "malformed",
            f"Tool call is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}). {_format_help()}",
            raw,
        )
    except ValueError as exc:
        return ParseError("malformed", f"Tool call is not valid JSON ({exc}). {_format_help()}", raw)
    if not isinstance(obj, dict):
        return ParseError(
            "malformed", f"Tool call must be a JSON object, got {type(obj).__name__}. {_format_help()}", raw
        )
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ParseError("malformed", f'Tool call has no "name" string. {_format_help()}', raw)
    args: Any = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI style: arguments as a JSON-encoded string
        try:
            args = _loads(args) if args.strip() else {}
        except ValueError:  # JSONDecodeError included
            return ParseError(
                "malformed", f'"arguments" of {name} is a string that is not JSON. {_format_help()}', raw
            )
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ParseError(
            "malformed",
            f'"arguments" of {name} must be a JSON object, got {type(args).__name__}. {_format_help()}',
            raw,
        )
    return ToolCall(name=name, arguments=args, raw=raw)


def extract_code_blocks(text: str) -> list[str]:
    """Fenced ```` ```python ```` blocks in ``text`` (an unclosed last fence runs to the end of the text)."""
    return [m.group(1).rstrip() for m in _FENCE_RE.finditer(text) if m.group(1).strip()]


def parse_turn(text: str) -> ParsedTurn:
    """Split a model turn into JSON tool calls (in order) and malformed-call errors.

    An unclosed ``<tool_call>`` at the end of the turn (generation stopped at a stop token) is parsed up to the
    end of the text. Tool names and arguments are checked later against the tool set, not here.

    >>> parse_turn('<tool_call>{"name": "submit", "arguments": {"answer": "42"}}</tool_call>').calls[0].name
    'submit'
    >>> parse_turn("<tool_call>{oops}</tool_call>").errors[0].kind
    'malformed'
    """
    calls: list[ToolCall] = []
    errors: list[ParseError] = []
    for match in _CALL_RE.finditer(text):
        parsed = _parse_one(match.group(1))
        if isinstance(parsed, ToolCall):
            calls.append(parsed)
        else:
            errors.append(parsed)
    blocks = tuple(extract_code_blocks(text)) if not calls and not errors else ()
    return ParsedTurn(calls=tuple(calls), errors=tuple(errors), code_blocks=blocks)


CODE_BLOCK_STOP = "\n```\n"
"""Closing fence of a python block followed by a newline: the turn is over once the block is complete."""


def stop_strings_for(code_action: str | None) -> tuple[str, ...]:
    """Strings that end a model turn for this env setting: a finished tool call, and for code actions the
    closing fence of the block (so a model that keeps writing after its code does not run out of tokens)."""
    stops = ("</tool_call>",)
    return (*stops, CODE_BLOCK_STOP) if code_action in ("python", "submit", "test") else stops

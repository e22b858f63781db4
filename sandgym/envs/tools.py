"""Typed Python functions as tools: JSON schema from the signature and docstring, checked dispatch.

A tool is a plain function with type hints and a Google-style docstring. Its first parameter may be a
``ToolContext`` (the episode's sandbox, task and runtime counters); it is not part of the schema. The schema is the
OpenAI function format, usable as ``tools=`` of a chat template and rendered into the system prompt.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from sandgym.envs.context import ToolContext
from sandgym.envs.parsing import FORMAT_EXAMPLE, ParseError, ToolCall
from sandgym.errors import SandboxError, SandgymError

if typing.TYPE_CHECKING:
    from sandgym.envs.context import ToolContext

__all__ = ["Tool", "ToolError", "ToolResult", "ToolSet", "tool", "truncate"]

ResultKind = Literal["malformed", "unknown_tool", "bad_args", "no_call", "tool_error"]


class ToolError(SandgymError):
    """A tool could not do what was asked (missing file, ambiguous edit, ...): shown to the agent, counted."""


@dataclass(frozen=True)
class ToolResult:
    """What one call returned: ``content`` is shown to the agent; ``error_kind`` is None when ``ok``."""

    name: str
    content: str
    ok: bool = True
    error_kind: ResultKind | None = None


_PY_TO_JSON = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def _json_type(annotation: Any) -> tuple[dict[str, Any], bool]:
    """(JSON schema of a type hint, whether None is allowed)."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(members) < len(typing.get_args(annotation))
        schema, _ = _json_type(members[0]) if len(members) == 1 else ({}, False)
        return schema, nullable
    if origin is Literal:
        values = list(typing.get_args(annotation))
        return {"type": _PY_TO_JSON.get(type(values[0]), "string"), "enum": values}, False
    if origin in (list, tuple, set) or annotation in (list, tuple):
        args = typing.get_args(annotation)
        items = _json_type(args[0])[0] if args else {}
        return ({"type": "array", "items": items} if items else {"type": "array"}), False
    if origin is dict or annotation is dict:
        return {"type": "object"}, False
    if annotation in _PY_TO_JSON:
        return {"type": _PY_TO_JSON[annotation]}, False
    raise TypeError(f"tool parameter type {annotation!r} has no JSON schema; use str, int, float, bool, list or dict")


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {arg: description}) from a Google-style docstring."""
    doc = inspect.cleandoc(doc or "")
    head, _, rest = doc.partition("\nArgs:")
    description = " ".join(head.split("\n\n")[0].split())
    args: dict[str, str] = {}
    current: str | None = None
    for line in rest.splitlines():
        if line.strip() and not line.startswith((" ", "\t")):
            break  # next section (Returns:, Raises:, ...)
        m = re.match(r"\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
        if m and (current is None or len(line) - len(line.lstrip()) <= 8):
            current = m.group(1)
            args[current] = m.group(2).strip()
        elif current and line.strip():
            args[current] += " " + line.strip()
    return description, args


@dataclass(frozen=True)
class Tool:
    """A callable exposed to the agent, with its derived JSON schema."""

    name: str
    fn: Callable[..., str]
    description: str
    parameters: Mapping[str, Any]
    takes_context: bool = False
    hints: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_function(cls, fn: Callable[..., str], name: str | None = None) -> Tool:
        """Derive the schema from ``fn``'s signature (types, defaults) and docstring (``Args:`` section)."""

        hints = typing.get_type_hints(fn, localns={"ToolContext": ToolContext})
        description, arg_docs = _docstring_parts(fn.__doc__ or "")
        if not description:
            raise TypeError(f"tool {fn.__name__} has no docstring; the first line is what the agent reads")
        properties: dict[str, Any] = {}
        required: list[str] = []
        takes_context = False
        param_hints: dict[str, Any] = {}
        for i, (pname, param) in enumerate(inspect.signature(fn).parameters.items()):
            hint = hints.get(pname, str)
            if i == 0 and hint is ToolContext:
                takes_context = True
                continue
            schema, _nullable = _json_type(hint)
            if pname in arg_docs:
                schema = {**schema, "description": arg_docs[pname]}
            properties[pname] = schema
            param_hints[pname] = hint
            if param.default is inspect.Parameter.empty:
                required.append(pname)
        parameters = {"type": "object", "properties": properties, "required": required}
        return cls(name or fn.__name__, fn, description, parameters, takes_context, param_hints)

    @property
    def schema(self) -> dict[str, Any]:
        """OpenAI function-calling format (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }

    def check_arguments(self, arguments: Mapping[str, Any]) -> str | None:
        """None when ``arguments`` fit the schema, else a message naming each bad argument and the fix."""
        props: Mapping[str, Any] = self.parameters["properties"]
        problems: list[str] = []
        for key in arguments:
            if key not in props:
                close = difflib.get_close_matches(key, list(props), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(f"unknown argument {key!r}{hint}")
        for key in self.parameters["required"]:
            if key not in arguments:
                problems.append(f"missing required argument {key!r} ({props[key].get('type', 'any')})")
        for key, value in arguments.items():
            if key in props and not _fits(value, props[key], self.hints.get(key)):
                want = props[key].get("type", "any")
                enum = props[key].get("enum")
                want = f"one of {enum}" if enum else want
                problems.append(f"argument {key!r} must be {want}, got {type(value).__name__} {value!r:.40}")
        if not problems:
            return None
        sig = ", ".join(f'"{k}": <{v.get("type", "any")}>' for k, v in props.items())
        return f"Bad arguments for {self.name}: {'; '.join(problems)}. Expected arguments: {{{sig}}}"


def _fits(value: Any, schema: Mapping[str, Any], hint: Any) -> bool:
    if value is None:
        return hint is not None and type(None) in typing.get_args(hint)
    if "enum" in schema:
        return value in schema["enum"]
    kind = schema.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def tool(fn: Callable[..., str]) -> Tool:
    """Decorator: turn a typed, documented function into a ``Tool``."""
    return Tool.from_function(fn)


def truncate(text: str, limit: int) -> str:
    """Cap ``text`` at ``limit`` characters, keeping head and tail, with a note saying how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    note = f"\n... [truncated: {len(text) - limit} of {len(text)} characters omitted] ...\n"
    keep = max(limit - len(note), 0)
    head = keep * 2 // 3
    return text[:head] + note + text[len(text) - (keep - head) :] if keep > head else text[:head] + note


class ToolSet:
    """The tools of an environment: schemas for the prompt, validation and dispatch of calls."""

    def __init__(self, tools: Iterable[Tool | Callable[..., str]]) -> None:
        self.tools: dict[str, Tool] = {}
        for t in tools:
            t = t if isinstance(t, Tool) else Tool.from_function(t)
            if t.name in self.tools:
                raise ValueError(f"duplicate tool name {t.name!r}; give each tool a unique name")
            self.tools[t.name] = t

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """Fresh JSON schemas, for ``tools=`` of chat templates."""
        return [json.loads(json.dumps(t.schema)) for t in self.tools.values()]

    def render(self) -> str:
        """The ``<tools>`` block of the system prompt: one compact JSON schema per line."""
        lines = [json.dumps(t.schema["function"], separators=(",", ":")) for t in self.tools.values()]
        return "<tools>\n" + "\n".join(lines) + "\n</tools>"

    def check(self, call: ToolCall) -> ParseError | None:
        """An ``unknown_tool`` or ``bad_args`` error for ``call``, or None when it can run."""
        if call.name not in self.tools:
            close = difflib.get_close_matches(call.name, self.names, n=1, cutoff=0.5)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            return ParseError(
                "unknown_tool",
                f"Unknown tool {call.name!r}.{hint} Available tools: {', '.join(self.names)}. "
                f"Example: {FORMAT_EXAMPLE}",
                call.raw,
            )
        problem = self.tools[call.name].check_arguments(call.arguments)
        return ParseError("bad_args", problem, call.raw) if problem else None

    def call(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        """Run a checked call. ``ToolError``/``ValueError``/``OSError`` become error results; ``SandboxError`` raises.

        The content is capped at the task's ``max_observation_chars``.
        """

        error = self.check(call)
        if error is not None:
            return ToolResult(call.name, error.message, ok=False, error_kind=error.kind)
        t = self.tools[call.name]
        limit = ctx.max_observation_chars
        try:
            out = t.fn(ctx, **call.arguments) if t.takes_context else t.fn(**call.arguments)
        except SandboxError:
            raise
        except FileNotFoundError as exc:
            name = exc.filename or (exc.args[0] if exc.args else "?")
            return ToolResult(t.name, f"Error: file not found: {name}. Use list_files to see the workspace.",
                              ok=False, error_kind="tool_error")
        except Exception as exc:  # ToolError, ValueError, OSError, or a bug in a plugin tool: never raise
            msg = str(exc) if isinstance(exc, (ToolError, ValueError, OSError)) else f"{type(exc).__name__}: {exc}"
            return ToolResult(t.name, truncate(f"Error: {msg}", limit), ok=False, error_kind="tool_error")
        return ToolResult(t.name, truncate(str(out), limit))

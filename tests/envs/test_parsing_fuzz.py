"""Fuzzing agent text: ``parse_turn`` never raises and ``ToolEnv.step`` never turns agent text into an infra failure.

Agent text is untrusted input; an exception here used to let an agent get any episode dropped from training as
"infra" (deeply nested JSON made ``json.loads`` raise RecursionError). Hypothesis runs derandomized, so the
examples are the same on every run.
"""

from __future__ import annotations

import json

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sandgym.envs.parsing import MAX_JSON_DEPTH, ParsedTurn, parse_turn  # noqa: E402
from sandgym.envs.tool_env import ToolEnv  # noqa: E402
from sandgym.sandbox.protocol import ExecResult  # noqa: E402
from sandgym.sandbox.protocol import TestReport as Report  # noqa: E402
from tests.fake_sandbox import FakeSandbox  # noqa: E402


class QuickSandbox(FakeSandbox):
    """The fake sandbox with instant grading: the fuzz exercises the env's handling of text, not pytest."""

    def run_tests(self, tests, *, expected, timeout=None):  # type: ignore[no-untyped-def]
        return Report(expected, (), ExecResult(1, "", ""), report_found=True)

    def run_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        return ExecResult(0, code[:100], "")

    def exec(self, cmd, *, timeout=None, env=None, stdin=None):  # type: ignore[no-untyped-def]
        self._tick()
        return ExecResult(0, str(cmd)[:100], "")

TOOL_NAMES = ["read_file", "write_file", "list_files", "edit_file", "grep", "submit", "python", "bash", "nope", ""]
FRAGMENTS = [
    "<tool_call>", "</tool_call>", "<tool_call>{", "{", "}", "[", "]", '"', "\\", '\\"', ":", ",", "null", "1e999",
    "```python\n", "```\n", "```", '"name"', '"arguments"', '"parameters"', "\ud83d\ude00", "\x00", "\n", "9" * 5000,
    '{"name": "read_file", "arguments": {"path": "../../etc/passwd"}}', '"\\ud800"', "\u202e", "NaN", "-Infinity",
]


@st.composite
def tool_call_json(draw: st.DrawFn) -> str:
    """A well-formed or almost well-formed tool call body."""
    args = draw(st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
        max_leaves=8,
    ))
    if draw(st.booleans()):
        keys = draw(st.sampled_from([["path"], ["path", "content"], ["answer"], ["code"], ["command"], []]))
        args = {k: draw(st.text(max_size=20) | st.integers()) for k in keys}
    body = json.dumps({"name": draw(st.sampled_from(TOOL_NAMES)), "arguments": args})
    if draw(st.booleans()):  # arguments as an encoded string, OpenAI style
        body = json.dumps({"name": draw(st.sampled_from(TOOL_NAMES)), "arguments": json.dumps(args)})
    cut = draw(st.integers(0, len(body)))
    return body if draw(st.booleans()) else body[:cut]


def nested(depth: int, opener: str) -> str:
    return opener * depth


agent_text = st.lists(
    st.sampled_from(FRAGMENTS)
    | st.text(max_size=40)
    | tool_call_json().map(lambda b: f"<tool_call>{b}</tool_call>")
    | st.builds(nested, st.integers(MAX_JSON_DEPTH - 2, 3000), st.sampled_from(["[", "{", '{"a":', "[{"])),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(agent_text)
def test_parse_turn_never_raises(text: str) -> None:
    parsed = parse_turn(text)
    assert isinstance(parsed, ParsedTurn)
    for call in parsed.calls:
        json.dumps(call.arguments)  # whatever it parsed can be logged (no RecursionError later)


@pytest.mark.parametrize("opener", ["[", "{\"a\":", "[{\"a\":"])
@pytest.mark.parametrize("where", ["body", "arguments", "string arguments"])
def test_deeply_nested_json_is_a_malformed_call(opener: str, where: str) -> None:
    deep = opener * 100_000
    body = {"body": deep,
            "arguments": '{"name": "read_file", "arguments": ' + deep,
            "string arguments": '{"name": "read_file", "arguments": ' + json.dumps(deep) + "}"}[where]
    parsed = parse_turn(f"<tool_call>{body}</tool_call>")
    assert not parsed.calls and parsed.errors[0].kind == "malformed"
    assert "<tool_call>" in parsed.errors[0].message


def test_nesting_up_to_the_limit_still_parses() -> None:
    args = {"path": "a.py"}
    value: object = 1
    for _ in range(MAX_JSON_DEPTH - 3):
        value = [value]
    args["extra"] = value  # type: ignore[assignment]
    parsed = parse_turn("<tool_call>" + json.dumps({"name": "read_file", "arguments": args}) + "</tool_call>")
    assert parsed.calls and parsed.calls[0].arguments["path"] == "a.py"


def test_huge_integer_is_a_malformed_call_not_a_value_error() -> None:
    parsed = parse_turn('<tool_call>{"name": "read_file", "arguments": {"start_line": ' + "9" * 5000 + "}}</tool_call>")
    assert not parsed.calls and parsed.errors[0].kind == "malformed"


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(agent_text, min_size=1, max_size=3))
def test_tool_env_step_never_reports_infra_failure_for_agent_text(turns: list[str]) -> None:
    env = ToolEnv(sandbox_factory=lambda task: QuickSandbox(), code_action="submit", max_turns=3)
    try:
        env.reset(options={"task": "demo/add"})
        for text in turns:
            _, _, terminated, truncated, info = env.step(text)
            assert "error" not in info or "internal error" not in str(info["error"]), info.get("error")
            if "outcome" in info:
                assert not info["outcome"].infra_failure, info.get("error")
            if terminated or truncated:
                break
    finally:
        env.close()

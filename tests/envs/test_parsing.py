"""Turn parsing and tool-call validation: every malformed input is an observation and a count, never a raise."""

from __future__ import annotations

import pytest

from sandgym.envs.builtin_tools import BUILTIN_TOOLS
from sandgym.envs.parsing import parse_turn
from sandgym.envs.tool_env import ToolEnv
from sandgym.envs.tools import ToolSet

TOOLS = ToolSet(BUILTIN_TOOLS)


def test_several_calls_in_one_turn_keep_their_order() -> None:
    text = ('I will look.\n<tool_call>{"name": "list_files", "arguments": {}}</tool_call>\n'
            '<tool_call>{"name": "read_file", "arguments": {"path": "a.py", "start_line": 3}}</tool_call>')
    parsed = parse_turn(text)
    assert [c.name for c in parsed.calls] == ["list_files", "read_file"]
    assert parsed.calls[1].arguments == {"path": "a.py", "start_line": 3}
    assert not parsed.errors


def test_unclosed_call_and_string_arguments_are_accepted() -> None:
    parsed = parse_turn('<tool_call>{"name": "submit", "arguments": "{\\"answer\\": \\"7\\"}"}')
    assert parsed.calls[0].arguments == {"answer": "7"}


@pytest.mark.parametrize("body", ["{oops}", "[1, 2]", '{"arguments": {}}', '{"name": "x", "arguments": 3}', ""])
def test_malformed_calls_are_errors_with_the_expected_format(body: str) -> None:
    parsed = parse_turn(f"<tool_call>{body}</tool_call>")
    assert not parsed.calls
    assert parsed.errors[0].kind == "malformed"
    assert "<tool_call>" in parsed.errors[0].message


def test_unknown_tool_suggests_the_closest_name() -> None:
    error = TOOLS.check(parse_turn('<tool_call>{"name": "red_file", "arguments": {}}</tool_call>').calls[0])
    assert error is not None and error.kind == "unknown_tool"
    assert "Did you mean 'read_file'" in error.message


@pytest.mark.parametrize(
    "args, needle",
    [({}, "missing required argument 'path'"), ({"path": 3}, "'path' must be string"),
     ({"path": "a", "start_line": "2"}, "'start_line' must be integer"), ({"path": "a", "strat_line": 2},
                                                                          "did you mean 'start_line'"),
     ({"path": "a", "start_line": True}, "'start_line' must be integer")],
)
def test_bad_arguments_name_the_argument_and_the_fix(args: dict, needle: str) -> None:
    from sandgym.envs.parsing import ToolCall

    error = TOOLS.check(ToolCall("read_file", args))
    assert error is not None and error.kind == "bad_args"
    assert needle in error.message and "Expected arguments" in error.message


def test_schema_comes_from_signature_and_docstring() -> None:
    schema = TOOLS.tools["read_file"].schema["function"]
    props = schema["parameters"]["properties"]
    assert schema["parameters"]["required"] == ["path"]
    assert props["start_line"]["type"] == "integer"
    assert props["end_line"] == {"type": "integer", "description": props["end_line"]["description"]}
    assert "1-based" in props["start_line"]["description"]
    assert all(s["type"] == "function" for s in TOOLS.schemas)


def _env(factory, **kw) -> ToolEnv:
    env = ToolEnv(sandbox_factory=factory, **kw)
    env.reset(options={"task": "demo/add"})
    return env


def test_env_counts_each_error_kind_and_never_raises(fake_factory) -> None:
    env = _env(fake_factory, max_turns=8)
    turns = [
        "<tool_call>{bad json</tool_call>",
        '<tool_call>{"name": "lst_files", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "read_file", "arguments": {"path": 1}}</tool_call>',
        "Just prose, no call.",
        '<tool_call>{"name": "read_file", "arguments": {"path": "missing.py"}}</tool_call>',
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>',
    ]
    observations = []
    for text in turns:
        obs, reward, terminated, truncated, info = env.step(text)
        observations.append(obs)
    assert "not valid JSON" in observations[0]
    assert "Did you mean 'list_files'" in observations[1]
    assert "must be string" in observations[2]
    assert "No tool call found" in observations[3]
    assert "file not found" in observations[4]
    assert terminated and not truncated
    a = info["outcome"].actions
    assert (a.malformed_calls, a.unknown_tools, a.bad_args, a.no_call_turns, a.tool_errors) == (1, 1, 1, 1, 1)
    assert a.tool_calls == 2 and a.turns == 6
    assert info["reward_components"]["format@v1"] == pytest.approx(-4 / 6)


def test_step_info_carries_calls_errors_and_messages(fake_factory) -> None:
    env = _env(fake_factory)
    _, _, _, _, info = env.step('<tool_call>{"name": "list_files", "arguments": {}}</tool_call><tool_call>{x}</tool_call>')
    assert [c.name for c in info["tool_calls"]] == ["list_files"]
    assert [e.kind for e in info["parse_errors"]] == ["malformed"]
    assert [m["role"] for m in info["messages"]] == ["tool", "user"]
    assert info["messages"][0]["name"] == "list_files" and "solution.py" in info["messages"][0]["content"]


def test_code_action_python_runs_the_block(fake_factory) -> None:
    env = _env(fake_factory, code_action="python")
    obs, _, terminated, _, info = env.step("Let me compute.\n```python\nprint(6 * 7)\n```")
    assert "42" in obs and not terminated
    assert info["tool_calls"][0].code_action


def test_code_action_submit_writes_entry_file_and_grades(fake_factory) -> None:
    from sandgym.envs.rewards import RewardConfig

    # a loaded machine can stretch the sandbox's wall time past the runtime reward's latency budget: not under test
    env = _env(fake_factory, code_action="submit", reward_config=RewardConfig(latency_budget_s=1e6))
    code = "```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```"
    _, reward, terminated, _, info = env.step(code)
    assert terminated and reward == pytest.approx(1.0)
    assert info["outcome"].actions.code_actions == 1 and info["outcome"].actions.tool_calls == 0


def test_code_action_none_counts_a_no_call_turn(fake_factory) -> None:
    env = _env(fake_factory, code_action=None)
    obs, _, _, _, info = env.step("```python\nprint(1)\n```")
    assert "No tool call found" in obs
    assert [e.kind for e in info["parse_errors"]] == ["no_call"]

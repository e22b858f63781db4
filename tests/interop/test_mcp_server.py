"""``sandgym mcp``: a sandgym env's tools as an MCP server, driven with the real ``mcp`` client: in memory (the
package's in-process transport) for the episodes, and once over stdio against the command itself."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.lowlevel")
import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from sandgym.errors import ConfigError  # noqa: E402
from sandgym.interop.mcp_server import make_server  # noqa: E402
from tests.interop.tasks_fixture import ADD_ONE, write_suite  # noqa: E402

ENV_TOOLS = ["python", "bash", "read_file", "write_file", "edit_file", "list_files", "grep", "run_tests", "submit"]


def play(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    """(tool names listed, each call's result) of one MCP session."""

    async def session() -> tuple[list[str], list[Any]]:
        async with Client(server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(session)


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def test_reset_tools_and_submit_over_an_mcp_session(tmp_path: Path):
    server = make_server("sandgym/Coding-v0", {"tasks": str(write_suite(tmp_path / "tasks.jsonl"))})
    oracle = ADD_ONE.reference.files["solution.py"]
    names, results = play(server, [
        ("write_file", {"path": "solution.py", "content": oracle}),  # before reset
        ("reset", {"task_id": "demo/nope"}),
        ("reset", {"task_id": ADD_ONE.id}),
        ("read_file", {"path": "missing.py"}),
        ("write_file", {"path": "solution.py", "content": oracle}),
        ("submit", {}),
        ("reset", {"seed": 1}),
        ("submit", {}),  # noop
    ])
    early, unknown, reset, missing, wrote, solved, _, noop = results
    assert names == [*ENV_TOOLS, "reset"]
    assert early.is_error and "call reset first" in text(early)
    assert unknown.is_error and "'demo/nope' is not among this server's 1 tasks" in text(unknown)
    assert text(reset).startswith(ADD_ONE.prompt) and reset.structured_content["task_id"] == ADD_ONE.id
    assert reset.structured_content["max_turns"] == ADD_ONE.limits.max_turns and not reset.is_error
    assert missing.is_error and "file not found: missing.py" in text(missing)
    assert not wrote.is_error and "Wrote 2 lines to solution.py" in text(wrote)
    assert solved.structured_content["reward_components"]["correctness@v1"] == 1.0
    assert solved.structured_content["failure_mode"] == "success" and solved.structured_content["reward"] >= 1.0
    assert "episode over: reward" in text(solved)
    assert noop.structured_content["reward_components"]["correctness@v1"] == 0.0
    assert noop.structured_content["failure_mode"] == "wrong_answer"


def test_the_command_serves_over_stdio(tmp_path: Path):
    suite = write_suite(tmp_path / "tasks.jsonl")
    command = StdioServerParameters(command=sys.executable, cwd=str(Path(__file__).parents[2]),
                                    args=["-m", "sandgym", "mcp", "sandgym/Coding-v0", "--tasks", str(suite)])
    names, (reset,) = play(command, [("reset", {})])  # the episodes themselves: the test above
    assert names == [*ENV_TOOLS, "reset"] and reset.structured_content["task_id"] == ADD_ONE.id
    assert text(reset).startswith(ADD_ONE.prompt)


def test_an_env_it_cannot_serve_fails_before_serving():
    import gymnasium as gym

    with pytest.raises(gym.error.Error):
        make_server("sandgym/Nope-v0")
    with pytest.raises(ConfigError, match="not a parameter"):
        make_server("sandgym/Coding-v0", {"no_such_kwarg": 1})


def test_cli_registers_mcp():
    from sandgym.cli import build_parser

    args = build_parser().parse_args(["mcp", "sandgym/Coding-v0", "--tasks", "x.jsonl", "--task-seed", "3"])
    assert args.env_id == "sandgym/Coding-v0" and args.tasks == "x.jsonl" and args.task_seed == 3

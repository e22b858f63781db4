"""MCP servers in: a task's stdio MCP server (the real ``mcp`` package's ``MCPServer``) runs inside the local
sandbox, its tools join the agent's, calls are routed to it, and it is stopped before grading.

The server imports ``mcp``, so the sandbox needs it: a task declares ``requirements = ["mcp"]`` and the sandbox
builds it into the task's environment (``sandgym.sandbox.pyenv``, which needs pip's index or a wheelhouse). Offline,
these tests copy ``mcp`` and the distributions it requires from this interpreter's own site-packages into a directory
the sandbox's user can reach, wherever the clone lives (a 0700 home or ``mktemp -d`` directory included), and mount
that as the environment (same Python version as the sandbox's interpreter); nothing else differs from a real
episode."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("mcp.server.mcpserver")

from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

from sandgym.envs.mcp_tools import McpServer, parse_servers  # noqa: E402
from sandgym.envs.tool_env import ToolEnv  # noqa: E402
from sandgym.errors import ConfigError  # noqa: E402
from sandgym.rollout.spec import RolloutSpec  # noqa: E402
from sandgym.sandbox.bwrap_host import RUNTIME_BASE  # noqa: E402
from sandgym.sandbox.local import LocalSandbox  # noqa: E402
from sandgym.sandbox.protocol import Limits  # noqa: E402
from sandgym.tasks.task import Task, Verifier  # noqa: E402
from tests.interop.tasks_fixture import ADD_ONE  # noqa: E402

SERVER = '''
import os
import threading
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("calc")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def fail(why: str) -> str:
    """Always fails, saying why."""
    raise ToolError(why)


@app.tool()
def heartbeat() -> str:
    """Rewrite heartbeat.txt in the workspace every 10 ms for as long as this server runs."""
    def beat():
        n = 0
        while True:
            n += 1
            with open("heartbeat.tmp", "w") as f:
                f.write(str(n))
            os.replace("heartbeat.tmp", "heartbeat.txt")
            time.sleep(0.01)

    threading.Thread(target=beat, daemon=True).start()
    return "beating"


if __name__ == "__main__":
    app.run()
'''

CHECK = '''
import json, os, time

def beat():
    return open("heartbeat.txt").read() if os.path.exists("heartbeat.txt") else ""

first = beat()
time.sleep(0.5)
still = first != "" and beat() == first  # the server wrote it, and nothing writes it while this runs
print(json.dumps({"score": float(open("answer.txt").read().strip() == "42" and still)}))
'''
"""Scores 1 only for the answer 42 with the server's heartbeat stopped: had the server outlived the episode into
grading, its heartbeat would still be changing."""

TASK = Task(
    id="demo/mcp-add", domain="coding", family="demo", split="train",
    prompt="Add 2 and 40 with the add tool and submit the sum.",
    files={"calc_server.py": SERVER},
    verifier=Verifier(kind="script", script=CHECK),
    requirements=("mcp",),
    metadata={"mcp_servers": [McpServer("calc", ("python3", "calc_server.py")).to_dict()]},
)


def _closure(name: str) -> list[metadata.Distribution]:
    """``name``'s distribution and every one it requires here (markers evaluated without extras)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [name]
    while todo:
        key = canonicalize_name(todo.pop())
        if key in seen:
            continue
        try:
            dist = seen[key] = metadata.distribution(key)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency not installed here
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


@functools.cache
def mcp_env() -> str:
    """``mcp`` and what it requires, copied from this interpreter's packages under the sandbox runtime's directory
    (mode 0755 on the way): the clone's own ``.venv`` may sit in a directory the sandbox's user cannot enter."""
    dists = _closure("mcp")
    key = hashlib.sha256(repr(sorted((d.metadata["Name"], d.version) for d in dists)).encode()).hexdigest()[:16]
    dest = RUNTIME_BASE / "test-envs" / f"mcp-{key}"
    if not (dest / ".complete").is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.parent.chmod(0o755)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=dest.parent))
        for dist in dists:
            for f in dist.files or []:
                if f.parts and f.parts[0] != "..":  # scripts installed outside site-packages are not imported
                    target = tmp / f
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(f.locate(), target)  # type: ignore[arg-type]
        for d in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
            d.chmod(0o755)
        (tmp / ".complete").touch()
        with contextlib.suppress(OSError):  # another worker got there first: keep theirs
            tmp.rename(dest)
        shutil.rmtree(tmp, ignore_errors=True)
    return str(dest)


def own_site_packages(task: Task) -> LocalSandbox:
    """The local sandbox with this interpreter's ``mcp`` as the task's environment (see the module docstring)."""
    return LocalSandbox(Limits(timeout_s=task.limits.exec_timeout_s), python_env=mcp_env())


def call(name: str, **arguments: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="mounts this interpreter's packages into the sandbox's "
                    "Python 3.11")
def test_a_tasks_server_tools_join_the_episode_calls_route_to_it_and_it_stops_before_grading():
    env = ToolEnv([TASK], sandbox_factory=own_site_packages, code_action=None)
    try:
        _, info = env.reset(seed=0)
        names = [t["function"]["name"] for t in info["tools"]]
        assert names[-3:] == ["add", "fail", "heartbeat"] and "submit" in names and "python" in names
        assert '"name":"add","description":"Add two integers."' in info["system_prompt"]

        obs, reward, done, _, info = env.step(call("add", a=2, b=40))
        assert obs == "<tool_response>\n42\n</tool_response>" and reward == 0.0 and not done

        obs, _, _, _, info = env.step(call("fail", why="no such thing") + call("add", a="2"))
        assert "Error" in obs and "no such thing" in obs  # the server's error, shown and counted as a tool error
        assert "Bad arguments for add" in obs  # checked against the server's input schema before it is called
        assert info["actions"].tool_errors == 1 and info["actions"].bad_args == 1

        obs, *_ = env.step(call("heartbeat"))
        assert "beating" in obs
        _, reward, done, _, info = env.step(call("submit", answer="42"))
        assert done and info["failure_mode"] == "success" and info["reward_components"]["correctness@v1"] == 1.0
        assert env._mcp is None  # stopped; CHECK above saw its heartbeat stand still while grading ran
    finally:
        env.close()


def test_a_server_that_does_not_start_names_its_command_and_the_fix():
    broken = {"name": "broken", "command": ["python3", "-c", "import sandgym_mcp_missing_pkg"]}
    env = ToolEnv([ADD_ONE], mcp_servers=[broken])
    try:
        with pytest.raises(ConfigError) as exc:
            env.reset(seed=0)
        msg = str(exc.value)
        assert "MCP server 'broken'" in msg and "python3 -c 'import sandgym_mcp_missing_pkg'" in msg
        assert "exited before answering initialize (exit code 1)" in msg and "ModuleNotFoundError" in msg
        assert "Fix: add the missing package to the task's requirements" in msg

    finally:
        env.close()
    missing = replace(ADD_ONE, metadata={"mcp_servers": [{"name": "gone", "command": "no-such-mcp-server"}]})
    env = ToolEnv([missing])
    try:
        with pytest.raises(ConfigError, match=r"(?s)'gone'.*no-such-mcp-server.*cannot start.*must exist"):
            env.reset(seed=0)
    finally:
        env.close()


def test_server_configs_are_checked_where_they_are_written():
    assert parse_servers([{"name": "a", "command": "python3 a.py", "prefix": "a_"}], "x") == (
        McpServer("a", ("python3", "a.py"), prefix="a_"),)
    assert McpServer.from_dict(McpServer("a", ("x",)).to_dict()) == McpServer("a", ("x",))
    with pytest.raises(ConfigError, match=r"mcp_servers\[0\].*unknown: \['cmd'\]"):
        ToolEnv([ADD_ONE], mcp_servers=[{"name": "a", "cmd": "x"}])
    with pytest.raises(ConfigError, match="repeat"):
        parse_servers([{"name": "a", "command": "x"}, {"name": "a", "command": "y"}], "mcp_servers")
    with pytest.raises(ConfigError, match="must be a list"):
        parse_servers({"name": "a", "command": "x"}, "mcp_servers")
    with pytest.raises(ConfigError, match="non-empty command line"):
        McpServer("a", ())

    # the [rollout] table: env_kwargs = {mcp_servers = [{name = "calc", command = ["python3", "calc_server.py"]}]}
    spec = RolloutSpec(env="sandgym/Coding-v0",
                       env_kwargs={"mcp_servers": [{"name": "calc", "command": ["python3", "calc_server.py"]}]})
    env = spec.env_factory()()
    try:
        assert env.unwrapped.mcp_servers == (McpServer("calc", ("python3", "calc_server.py")),)
    finally:
        env.close()

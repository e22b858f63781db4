"""MCP servers as tools of a ``ToolEnv``: stdio servers started inside the episode's sandbox, their tools offered to
the agent beside the built-in ones (docs/INTEROP.md, "MCP servers in").

A server is an :class:`McpServer` (a command line run in the workspace), named by the env (``mcp_servers=``, also
``[rollout] env_kwargs``) or by a task (``task.metadata["mcp_servers"]``, a list of :meth:`McpServer.to_dict`).
At reset, :meth:`McpTools.open` starts every server of the episode in one Python session of the sandbox that keeps
its processes (``sandbox.session(keep_processes=True)``): a small stdlib bridge (:data:`BRIDGE`) runs each server as
a child process and relays newline-delimited JSON-RPC on its stdin/stdout. The host does the ``initialize``
handshake and ``tools/list``, reads the answers as the ``mcp`` package's wire types (``mcp_types``), and makes one
:class:`~sandgym.envs.tools.Tool` per server tool; a call is one ``tools/call`` through the bridge. Nothing of a
server runs on the host. The servers are stopped before the episode is graded (the env closes them, and grading
closes every session of the sandbox), so no server can act on the graded workspace, and a server's answers are
observations only: it cannot submit, end the episode or reward it.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from sandgym.envs.context import ToolContext
from sandgym.envs.tools import Tool, ToolError
from sandgym.errors import ConfigError, SandboxError

__all__ = ["BRIDGE", "McpServer", "McpTools", "parse_servers"]

CLIENT_INFO = {"name": "sandgym", "version": "1"}
CALL_GRACE_S = 5.0
"""The bridge gives up on an answer this long before its Python cell would be killed (which restarts the session
and loses the servers)."""

BRIDGE = r'''
import json as _json, os as _os, select as _select, subprocess as _subprocess, tempfile as _tempfile, time as _time


class _SandgymMcpBridge:
    """One stdio MCP server: newline-delimited JSON-RPC on its stdin/stdout; stderr to a log file."""

    def __init__(self, argv, env):
        fd, self.log = _tempfile.mkstemp(prefix="sandgym-mcp-", suffix=".log")
        self.buf = b""
        self.proc = None
        try:
            self.proc = _subprocess.Popen(argv, stdin=_subprocess.PIPE, stdout=_subprocess.PIPE, stderr=fd,
                                          env=dict(_os.environ, **env))
        finally:
            _os.close(fd)

    def stderr_tail(self, limit=1500):
        with open(self.log, "rb") as f:
            return f.read()[-limit:].decode("utf-8", "replace")

    def dead(self, why):
        code = self.proc.poll()
        if code is None:
            try:
                code = self.proc.wait(timeout=1)
            except _subprocess.TimeoutExpired:
                pass
        return {"error": why, "exit_code": code, "stderr": self.stderr_tail()}

    def send(self, msg):
        self.proc.stdin.write((_json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, msg, timeout):
        """Send ``msg``; for a request (it has an id) wait for the answer with that id (notifications and stale
        answers are skipped; a request of the server's own is refused, a ping answered)."""
        deadline = _time.monotonic() + timeout
        try:
            self.send(msg)
        except OSError:
            return self.dead("exited")
        if "id" not in msg:
            return {"response": None}
        while True:
            while b"\n" not in self.buf:
                left = deadline - _time.monotonic()
                if left <= 0:
                    return {"error": "timeout", "stderr": self.stderr_tail()}
                ready, _, _ = _select.select([self.proc.stdout], [], [], left)
                if ready:
                    chunk = _os.read(self.proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        return self.dead("exited")
                    self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            try:
                m = _json.loads(line)
            except ValueError:
                continue  # not JSON-RPC (a print to stdout): skipped
            if not isinstance(m, dict):
                continue
            if "method" in m:
                if "id" in m:
                    ok = {"result": {}} if m["method"] == "ping" else {
                        "error": {"code": -32601, "message": "sandgym's MCP client does not serve " + m["method"]}}
                    try:
                        self.send(dict({"jsonrpc": "2.0", "id": m["id"]}, **ok))
                    except OSError:
                        pass
                continue
            if m.get("id") == msg["id"]:
                return {"response": m}


_sandgym_mcp = {}


def _sandgym_mcp_start(name, argv, env):
    try:
        _sandgym_mcp[name] = _SandgymMcpBridge(argv, env)
    except OSError as exc:
        return {"error": "cannot start: %s: %s" % (type(exc).__name__, exc)}
    return {"response": None}
'''
"""The in-sandbox side (standard library only), run once per episode in the servers' session."""


@dataclass(frozen=True)
class McpServer:
    """A stdio MCP server run inside the episode's sandbox (its working directory the workspace)."""

    name: str
    """Names the server in errors and logs (letters, digits, ``_``, ``-``)."""
    command: tuple[str, ...]
    """The command line, e.g. ``("python3", "notes_server.py")`` (a string is split like a shell would). It runs
    with the sandbox's interpreter and packages: a Python server using the ``mcp`` package needs it among the
    task's ``requirements``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables of the server process."""
    tools: tuple[str, ...] = ()
    """The server's tools to offer (empty: all)."""
    prefix: str = ""
    """Prepended to each tool's name (e.g. ``"notes_"``), for a server whose tool names clash with the env's."""
    startup_timeout_s: float = 60.0
    """How long the server may take to start and answer ``initialize`` and ``tools/list``."""

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise ConfigError(f"MCP server name {self.name!r} must be letters, digits, '_' or '-', e.g. 'notes'")
        if not self.command or not all(isinstance(a, str) and a for a in self.command):
            raise ConfigError(f"MCP server {self.name!r}: command={self.command!r} must be a non-empty command line, "
                              "e.g. ['python3', 'server.py']")
        if not self.startup_timeout_s > 0:
            raise ConfigError(f"MCP server {self.name!r}: startup_timeout_s={self.startup_timeout_s} must be > 0")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "mcp_servers") -> McpServer:
        """Read one server from its JSON/TOML form (``to_dict``'s); ConfigError names an unknown or bad key."""
        if isinstance(data, McpServer):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: {data!r} must be a table such as "
                              "{name = \"notes\", command = [\"python3\", \"notes_server.py\"]}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown or "name" not in data or "command" not in data:
            raise ConfigError(f"{where}: {dict(data)!r} needs name and command, and takes only {sorted(known)}"
                              + (f" (unknown: {unknown})" if unknown else ""))
        command = data["command"]
        argv = tuple(shlex.split(command)) if isinstance(command, str) else tuple(command)
        try:
            return cls(name=data["name"], command=argv, env=dict(data.get("env", {})),
                       tools=tuple(data.get("tools", ())), prefix=str(data.get("prefix", "")),
                       startup_timeout_s=float(data.get("startup_timeout_s", 60.0)))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (what ``task.metadata["mcp_servers"]`` holds)."""
        return json.loads(json.dumps(asdict(self)))


def parse_servers(value: Any, where: str) -> tuple[McpServer, ...]:
    """``value`` (a list of ``McpServer`` or their dicts; None or empty: none) as servers with distinct names."""
    if not value:
        return ()
    if isinstance(value, (Mapping, str)) or not isinstance(value, Sequence):
        raise ConfigError(f"{where} must be a list of MCP servers, e.g. "
                          "[{name = \"notes\", command = [\"python3\", \"notes_server.py\"]}]; got {value!r:.120}")
    servers = tuple(McpServer.from_dict(v, f"{where}[{i}]") for i, v in enumerate(value))
    names = [s.name for s in servers]
    if len(set(names)) < len(names):
        raise ConfigError(f"{where}: MCP server names {names} repeat; give each server its own name")
    return servers


def _text(result: Any) -> str:
    """What the agent reads of a ``CallToolResult``: its text blocks, a short note for each other block, else the
    structured content as JSON."""
    parts: list[str] = []
    for block in result.content:
        kind = block.type
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            text = getattr(block.resource, "text", None)
            parts.append(text if text is not None else f"[resource {block.resource.uri}: binary]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts) or "[no output]"


def _schema(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """A server tool's input schema as a sandgym tool's parameters (pydantic's ``title`` noise dropped)."""
    schema = {k: v for k, v in input_schema.items() if k != "title"}
    props = {k: {a: b for a, b in v.items() if a != "title"} if isinstance(v, Mapping) else v
             for k, v in dict(schema.get("properties") or {}).items()}
    return {**schema, "type": "object", "properties": props, "required": list(schema.get("required") or [])}


class McpTools:
    """The MCP servers of one episode, running in its sandbox, and their tools (:meth:`open`, then ``tools``)."""

    def __init__(self, session: Any, ctx: ToolContext) -> None:
        self._session = session
        self._ctx = ctx
        self._ids = 0
        self.tools: list[Tool] = []
        self.servers: dict[str, McpServer] = {}

    @classmethod
    def open(cls, ctx: ToolContext, servers: Sequence[McpServer], taken: Sequence[str] = ()) -> McpTools:
        """Start ``servers`` in ``ctx``'s sandbox, handshake and list their tools; ConfigError names a server that
        does not start (its command, its exit code, the end of its stderr) or a tool name already in ``taken``."""
        sandbox = ctx.sandbox
        opener = getattr(sandbox, "session", None)
        try:
            session = opener(keep_processes=True) if opener is not None else None
        except (TypeError, NotImplementedError, ValueError):
            session = None
        if session is None:
            raise ConfigError(f"MCP servers run in a sandbox session that keeps processes; the "
                              f"{type(sandbox).__name__} backend has none. Use the local sandbox (--sandbox local)")
        self = cls(session, ctx)
        try:
            self._cell(BRIDGE, 30.0)
            names = set(taken)
            for server in servers:
                for t in self._start(server):
                    if t.name in names:
                        raise ConfigError(f"MCP server {server.name!r} offers a tool {t.name!r}, a name the env "
                                          f"already has; set the server's prefix (e.g. prefix = \"{server.name}_\") "
                                          "or leave the tool out of its tools list")
                    names.add(t.name)
                    self.tools.append(t)
        except BaseException:
            self.close()
            raise
        return self

    def _cell(self, code: str, timeout: float) -> dict[str, Any]:
        """Run ``code`` in the servers' session; its last stdout line is the bridge's JSON answer."""
        result = self._session.run_code(code, timeout=timeout + CALL_GRACE_S)
        if result.output_truncated:
            raise ToolError("the MCP server's answer is longer than the sandbox's output limit (Limits."
                            "max_output_bytes); ask for less")
        lines = result.stdout.strip().splitlines()
        if result.exit_code != 0 or result.timed_out:
            raise SandboxError(f"the MCP bridge in the sandbox failed (exit {result.exit_code}, timed out "
                               f"{result.timed_out}): {(result.stderr or result.stdout)[-800:]}")
        return json.loads(lines[-1]) if lines else {}

    def _rpc(self, server: str, method: str, params: Mapping[str, Any] | None, timeout: float,
             notify: bool = False) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = dict(params)
        if not notify:
            self._ids += 1
            msg["id"] = self._ids
        payload = json.dumps(msg)
        return self._cell(f"import json\nprint(json.dumps(_sandgym_mcp[{server!r}].request(json.loads({payload!r}), "
                          f"{float(timeout)!r})))", timeout)

    def _start(self, server: McpServer) -> list[Tool]:
        import mcp_types
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

        self.servers[server.name] = server
        t = server.startup_timeout_s
        started = self._cell(f"import json\nprint(json.dumps(_sandgym_mcp_start({server.name!r}, "
                             f"{list(server.command)!r}, {dict(server.env)!r})))", t)
        if "error" in started:
            self._failed(server, "initialize", started)
        init = self._rpc(server.name, "initialize", {"protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
                                                     "clientInfo": CLIENT_INFO}, t)
        info = mcp_types.InitializeResult.model_validate(self._result(server, "initialize", init))
        if info.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise ConfigError(f"MCP server {server.name!r} answered initialize with protocol version "
                              f"{info.protocol_version!r}, which sandgym's client (mcp_types) does not speak "
                              f"({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})")
        self._rpc(server.name, "notifications/initialized", None, t, notify=True)
        offered: list[Any] = []
        cursor: str | None = None
        while True:
            page = mcp_types.ListToolsResult.model_validate(self._result(
                server, "tools/list", self._rpc(server.name, "tools/list", {"cursor": cursor} if cursor else None, t)))
            offered += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        by_name = {spec.name: spec for spec in offered}
        missing = [n for n in server.tools if n not in by_name]
        if missing:
            raise ConfigError(f"MCP server {server.name!r} has no tool(s) {missing}; it offers {sorted(by_name)}")
        chosen = [by_name[n] for n in server.tools] if server.tools else offered
        return [self._tool(server, spec) for spec in chosen]

    def _tool(self, server: McpServer, spec: Any) -> Tool:
        params = _schema(spec.input_schema)
        optional = {k: Any | None for k in params["properties"] if k not in params["required"]}
        description = spec.description or spec.title or f"{spec.name} (MCP server {server.name})"

        def call(**arguments: Any) -> str:
            return self.call(server.name, spec.name, arguments)

        return Tool(server.prefix + spec.name, call, " ".join(description.split()), params, hints=optional)

    def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> str:
        """One ``tools/call``: the result's text, or ToolError (shown to the agent) when the server says it failed."""
        import mcp_types

        if self._session is None:
            raise ToolError(f"the MCP server {server!r} is stopped (the episode is over)")
        answer = self._rpc(server, "tools/call", {"name": tool, "arguments": dict(arguments)},
                           self._ctx.task.limits.exec_timeout_s)
        if "error" in answer:
            why = {"timeout": "did not answer in time", "exited": "exited"}.get(answer["error"], answer["error"])
            raise ToolError(f"the MCP server {server!r} {why}" + (f"; its stderr ends with: {answer['stderr'][-400:]}"
                                                                   if answer.get("stderr") else ""))
        response = answer["response"]
        if "error" in response:
            raise ToolError(f"{tool}: {response['error'].get('message', response['error'])}")
        result = mcp_types.CallToolResult.model_validate(response.get("result", {}))
        text = _text(result)
        if result.is_error:
            raise ToolError(text)
        return text

    def _result(self, server: McpServer, method: str, answer: dict[str, Any]) -> dict[str, Any]:
        if "error" in answer:
            self._failed(server, method, answer)
        response = answer["response"]
        if "error" in response:
            raise ConfigError(f"MCP server {server.name!r} ({shlex.join(server.command)}) refused {method}: "
                              f"{response['error']}")
        return dict(response.get("result") or {})

    def _failed(self, server: McpServer, method: str, answer: Mapping[str, Any]) -> None:
        """Raise the ConfigError for a server that did not start or answer: its command, what happened, its stderr,
        and the likely fix."""
        stderr = str(answer.get("stderr") or "").strip()
        error = str(answer["error"])
        if error.startswith("cannot start"):
            fix = ("the command must exist in the sandbox (PATH /usr/local/bin:/usr/bin:/bin; the working directory "
                   "is the workspace): e.g. ['python3', 'server.py'] with server.py among the task's files")
        elif error == "timeout":
            error = f"did not answer {method} within {server.startup_timeout_s:g} s"
            fix = ("check that it speaks MCP over stdio (JSON-RPC lines on stdout, logs on stderr), or raise "
                   "startup_timeout_s")
        elif "ModuleNotFoundError" in stderr:
            fix = "add the missing package to the task's requirements (Task.requirements, e.g. [\"mcp\"])"
        else:
            fix = "run the command in the sandbox (e.g. with the bash tool) to see why it stops"
        if error == "exited":
            error = f"exited before answering {method}"
        code = answer.get("exit_code")
        raise ConfigError(f"MCP server {server.name!r} (command {shlex.join(server.command)!r}, run in the sandbox) "
                          f"{error}" + (f" (exit code {code})" if code is not None else "")
                          + (f"; its stderr ends with:\n{stderr[-800:]}\n" if stderr else "; ") + f"Fix: {fix}.")

    def close(self) -> None:
        """Stop every server (their session, and with it every process they started). Idempotent."""
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):  # a dead session is already closed
                session.close()

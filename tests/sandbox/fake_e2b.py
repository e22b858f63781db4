"""A loopback fake of E2B's HTTP API that the real ``e2b`` / ``e2b-code-interpreter`` SDKs can drive.

Point the SDK at it with ``E2B_API_URL=E2B_SANDBOX_URL=fake.url`` and ``E2B_API_KEY=fake.api_key``. It speaks the
control plane (``POST /v2/sandboxes``, ``DELETE /sandboxes/{id}``), envd (Connect ``process.Process/Start``,
``filesystem.Filesystem/MakeDir`` and ``ListDir``, ``/files`` up/download, ``/health``) and the code interpreter
(``/execute``, ``/contexts``). Files live in memory per sandbox. Commands are not executed: each gets the reply
scripted for the first pattern (newest first) that ``re.search`` finds in its ``bash -c`` string, which is what a
network-boundary fake is for. Unscripted commands exit 127 with a message saying so.

    with FakeE2B() as fake:
        fake.on_command(r"echo hi", Reply(stdout="hi\\n"))

The one exception is opt-in: ``fake.execute_on_host(folder)`` runs every command for real on this host (NOT
isolated), so that the sandbox conformance suite, which needs real behaviour, can drive the E2B backend.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

__all__ = ["Call", "CellReply", "FakeE2B", "FakeSandbox", "Reply"]


@dataclass(frozen=True)
class Reply:
    """What a scripted command prints and exits with; ``delay_s`` stalls before the end (a slow command)."""

    stdout: str | bytes = ""
    stderr: str | bytes = ""
    exit_code: int = 0
    delay_s: float = 0.0


@dataclass(frozen=True)
class CellReply:
    """What a scripted code-interpreter cell returns; ``error`` is ``(name, value, traceback)``."""

    stdout: str = ""
    stderr: str = ""
    result_text: str | None = None
    error: tuple[str, str, str] | None = None
    delay_s: float = 0.0


@dataclass(frozen=True)
class Call:
    """One command envd was asked to start (``cmd`` is the string after ``bash -l -c``)."""

    cmd: str
    cwd: str
    envs: dict[str, str]
    sandbox_id: str


@dataclass
class FakeSandbox:
    """The fake's record of one sandbox."""

    sandbox_id: str
    template: str
    create_body: dict[str, Any]
    alive: bool = True
    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    calls: list[Call] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)
    contexts: dict[str, int] = field(default_factory=dict)
    """context id -> number of restarts."""


CommandScript = Reply | Callable[[Call], Reply]
CellScript = CellReply | Callable[[str], CellReply]


class FakeE2B:
    """The fake server; ``start()``/``stop()`` or use it as a context manager."""

    def __init__(self, api_key: str = "e2b_test") -> None:
        self.api_key = api_key
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.kills: list[str] = []
        self._commands: list[tuple[re.Pattern[str], CommandScript]] = []
        self._cells: list[tuple[re.Pattern[str], CellScript]] = []
        self._lock = threading.Lock()
        self.create_status: int | None = None
        """Force ``POST /v2/sandboxes`` to answer this status (e.g. 429, 500)."""
        self.on_command(r"^rm -rf ", self._rm)
        handler = type("_Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeE2B:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-e2b", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeE2B:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def on_command(self, pattern: str, reply: CommandScript) -> None:
        """Answer commands matching ``pattern`` (``re.search``) with ``reply``; newer scripts win."""
        self._commands.insert(0, (re.compile(pattern), reply))

    def on_cell(self, pattern: str, reply: CellScript) -> None:
        """Answer code cells matching ``pattern`` with ``reply``; newer scripts win."""
        self._cells.insert(0, (re.compile(pattern), reply))

    @property
    def only(self) -> FakeSandbox:
        """The single sandbox created so far (fails loudly otherwise)."""
        if len(self.sandboxes) != 1:
            raise AssertionError(f"expected exactly one sandbox, have {len(self.sandboxes)}")
        return next(iter(self.sandboxes.values()))

    def command_reply(self, call: Call) -> Reply:
        for pattern, script in self._commands:
            if pattern.search(call.cmd):
                return script(call) if callable(script) else script
        return Reply(stderr=f"fake_e2b: no scripted reply for command: {call.cmd}\n", exit_code=127)

    def cell_reply(self, code: str) -> CellReply:
        for pattern, script in self._cells:
            if pattern.search(code):
                return script(code) if callable(script) else script
        return CellReply(error=("NameError", "unscripted", f"fake_e2b: no scripted reply for cell: {code}"))

    def execute_on_host(self, folder: Path) -> None:
        """Run every command from now on for real, on this host, as this user: NOT isolated, for tests that need
        real behaviour (the conformance suite). Scripts registered afterwards still win.

        Each sandbox gets ``folder/<sandbox id>``, which stands for the VM's ``/``: before a command its files are
        laid out there, the VM's ``/home/user`` and ``/tmp`` in the command are rewritten to that folder, and what
        the command left is read back into the fake. ``python3`` is this interpreter (so pytest is there).
        """
        self.on_command(r"", lambda call: self._run_on_host(Path(folder), call))

    _VM_DIRS = re.compile(r"(?<![\w./-])(/home/user|/tmp)(?![\w.-])")
    """The VM folders commands may name, as whole path components."""

    def _run_on_host(self, folder: Path, call: Call) -> Reply:
        sbx = self.sandboxes[call.sandbox_id]
        root = folder / sbx.sandbox_id
        shutil.rmtree(root, ignore_errors=True)
        for d in sbx.dirs:
            (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for path, data in sbx.files.items():
            (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / path.lstrip("/")).write_bytes(data)

        def host(text: str) -> str:
            return self._VM_DIRS.sub(lambda m: str(root) + m.group(1), text)

        env = {**os.environ, **call.envs, "HOME": host("/home/user")}
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        proc = subprocess.run(["bash", "-c", host(call.cmd)], cwd=host(call.cwd or "/home/user"), env=env,
                              capture_output=True, timeout=300)
        sbx.files.clear()
        sbx.dirs.intersection_update({"/", "/home", "/home/user", "/tmp"})
        for top in ("home", "tmp"):
            for dirpath, _, filenames in os.walk(root / top):
                vm = "/" + Path(dirpath).relative_to(root).as_posix()
                sbx.dirs.add(vm)
                for name in filenames:
                    if os.path.isfile(os.path.join(dirpath, name)):
                        sbx.files[f"{vm}/{name}"] = Path(dirpath, name).read_bytes()
        back = str(root).encode()
        return Reply(stdout=proc.stdout.replace(back, b""), stderr=proc.stderr.replace(back, b""),
                     exit_code=proc.returncode)

    def _rm(self, call: Call) -> Reply:
        sbx = self.sandboxes[call.sandbox_id]
        for target in call.cmd.split()[2:]:
            target = target.strip("'")
            for path in [p for p in sbx.files if p == target or p.startswith(target.rstrip("/") + "/")]:
                del sbx.files[path]
        return Reply()


def _envelope(obj: dict[str, Any], flags: int = 0) -> bytes:
    body = json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(body)) + body


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeE2B
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # without it every call stalls ~40 ms on the delayed ACK

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    # ---- plumbing -----------------------------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
        self.send_response(status)
        if body or status not in (204, 304):
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    def _sandbox(self) -> FakeSandbox | None:
        """The live sandbox this envd/jupyter request addresses, or None after answering 502 like E2B's proxy."""
        sid = self.headers.get("E2b-Sandbox-Id", "")
        sbx = self.fake.sandboxes.get(sid)
        if sbx is None or not sbx.alive:
            self._send(502, f"The sandbox {sid} was not found".encode(), "text/plain")
            return None
        return sbx

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # ---- routes -------------------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urlparse(self.path)
        if url.path == "/health":
            self._send(204)
        elif url.path == "/files":
            sbx = self._sandbox()
            if sbx is None:
                return
            path = parse_qs(url.query).get("path", [""])[0]
            if path not in sbx.files:
                self._json(404, {"code": 404, "message": f"path '{path}' does not exist"})
            else:
                self._send(200, sbx.files[path], "application/octet-stream")
        elif url.path == "/contexts":
            sbx = self._sandbox()
            if sbx is not None:
                self._json(200, [{"id": c, "language": "python", "cwd": "/home/user"} for c in sbx.contexts])
        else:
            self._json(404, {"code": 404, "message": f"fake_e2b: no route GET {url.path}"})

    def do_DELETE(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        self._body()
        if url.path.startswith("/sandboxes/"):
            sid = url.path.rsplit("/", 1)[1]
            sbx = self.fake.sandboxes.get(sid)
            self.fake.kills.append(sid)
            if sbx is None or not sbx.alive:
                self._json(404, {"code": 404, "message": f"sandbox {sid} not found"})
                return
            sbx.alive = False
            self._send(204)
        elif url.path.startswith("/contexts/"):
            sbx = self._sandbox()
            if sbx is not None:
                sbx.contexts.pop(url.path.rsplit("/", 1)[1], None)
                self._send(204)
        else:
            self._json(404, {"code": 404, "message": f"fake_e2b: no route DELETE {url.path}"})

    def do_POST(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        body = self._body()
        routes: dict[str, Callable[[Any, bytes], None]] = {
            "/v2/sandboxes": self._create,
            "/process.Process/Start": self._start,
            "/files": self._upload,
            "/filesystem.Filesystem/MakeDir": self._make_dir,
            "/filesystem.Filesystem/ListDir": self._list_dir,
            "/execute": self._execute,
            "/contexts": self._new_context,
        }
        if url.path in routes:
            routes[url.path](url, body)
        elif url.path.startswith("/contexts/") and url.path.endswith("/restart"):
            sbx = self._sandbox()
            if sbx is not None:
                cid = url.path.split("/")[2]
                sbx.contexts[cid] = sbx.contexts.get(cid, 0) + 1
                self._send(204)
        else:
            self._json(404, {"code": 404, "message": f"fake_e2b: no route POST {url.path}"})

    def _create(self, url: Any, body: bytes) -> None:
        if self.headers.get("X-API-KEY") != self.fake.api_key:
            self._json(401, {"code": 401, "message": "Invalid API key"})
            return
        if self.fake.create_status is not None:
            self._json(
                self.fake.create_status, {"code": self.fake.create_status, "message": "forced by the fake"}
            )
            return
        req = json.loads(body or b"{}")
        sid = "fake" + uuid.uuid4().hex[:12]
        template = req.get("templateID", "base")
        with self.fake._lock:
            self.fake.sandboxes[sid] = FakeSandbox(
                sid, template, req, dirs={"/", "/home", "/home/user", "/tmp"}
            )
        self._json(
            201,
            {
                "templateID": template,
                "sandboxID": sid,
                "clientID": "fakeclient",
                "envdVersion": "0.6.4",
                "envdAccessToken": "fake-token",
            },
        )

    def _start(self, url: Any, body: bytes) -> None:
        sbx = self._sandbox()
        if sbx is None:
            return
        request = json.loads(body[5:])
        process = request.get("process", {})
        args = process.get("args", [])
        call = Call(
            cmd=args[-1] if args else "",
            cwd=process.get("cwd", ""),
            envs=process.get("envs", {}) or {},
            sandbox_id=sbx.sandbox_id,
        )
        sbx.calls.append(call)
        reply = self.fake.command_reply(call)
        self.send_response(200)
        self.send_header("Content-Type", "application/connect+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._chunk(_envelope({"event": {"start": {"pid": 42}}}))
            if reply.delay_s:
                time.sleep(reply.delay_s)
            for stream in ("stdout", "stderr"):  # ``data`` is a protobuf oneof: one stream per event
                if getattr(reply, stream):
                    self._chunk(_envelope({"event": {"data": {stream: _b64(getattr(reply, stream))}}}))
            code = reply.exit_code
            end = {"exitCode": code, "exited": True, "status": f"exit status {code}"}
            self._chunk(_envelope({"event": {"end": end}}))
            self._chunk(_envelope({}, flags=0x02))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout): nothing to tell it

    def _upload(self, url: Any, body: bytes) -> None:
        sbx = self._sandbox()
        if sbx is None:
            return
        ctype = self.headers.get("Content-Type", "")
        items: list[tuple[str, bytes]] = []
        if ctype.startswith("multipart/"):
            msg = BytesParser().parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
            for part in msg.get_payload():
                items.append((part.get_filename(), part.get_payload(decode=True) or b""))
        else:
            items.append((parse_qs(url.query).get("path", [""])[0], body))
        for path, data in items:
            sbx.files[path] = data
            parts = path.split("/")
            sbx.dirs.update("/".join(parts[:i]) or "/" for i in range(1, len(parts)))
        self._json(200, [{"name": p.rsplit("/", 1)[-1], "type": "file", "path": p} for p, _ in items])

    def _make_dir(self, url: Any, body: bytes) -> None:
        sbx = self._sandbox()
        if sbx is None:
            return
        path = json.loads(body or b"{}").get("path", "")
        parts = path.rstrip("/").split("/")
        sbx.dirs.update("/".join(parts[:i]) or "/" for i in range(1, len(parts) + 1))
        self._json(200, {"entry": {"name": parts[-1], "type": "FILE_TYPE_DIRECTORY", "path": path}})

    def _list_dir(self, url: Any, body: bytes) -> None:
        sbx = self._sandbox()
        if sbx is None:
            return
        req = json.loads(body or b"{}")
        root = req.get("path", "").rstrip("/")
        if root not in sbx.dirs:
            self._json(404, {"code": "not_found", "message": f"directory '{root}' does not exist"})
            return
        depth = int(req.get("depth") or 1)
        entries = []
        for kind, paths in (("FILE_TYPE_FILE", sbx.files), ("FILE_TYPE_DIRECTORY", sbx.dirs)):
            for path in paths:
                rel = path[len(root) + 1 :] if path.startswith(root + "/") else None
                if rel and rel.count("/") < depth:
                    entries.append(
                        {
                            "name": rel.rsplit("/", 1)[-1],
                            "type": kind,
                            "path": path,
                            "size": len(sbx.files.get(path, b"")),
                        }
                    )
        self._json(200, {"entries": entries})

    def _execute(self, url: Any, body: bytes) -> None:
        sbx = self._sandbox()
        if sbx is None:
            return
        code = json.loads(body or b"{}").get("code", "")
        sbx.cells.append(code)
        reply = self.fake.cell_reply(code)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        lines: list[dict[str, Any]] = []
        if reply.stdout:
            lines.append({"type": "stdout", "text": reply.stdout, "timestamp": 0})
        if reply.stderr:
            lines.append({"type": "stderr", "text": reply.stderr, "timestamp": 0})
        if reply.result_text is not None:
            lines.append({"type": "result", "text": reply.result_text, "is_main_result": True})
        if reply.error:
            name, value, trace = reply.error
            lines.append({"type": "error", "name": name, "value": value, "traceback": trace})
        lines.append({"type": "number_of_executions", "execution_count": len(sbx.cells)})
        try:
            if reply.delay_s:
                time.sleep(reply.delay_s)
            for line in lines:
                self._chunk(json.dumps(line).encode() + b"\n")
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _new_context(self, url: Any, body: bytes) -> None:
        sbx = self._sandbox()
        if sbx is None:
            return
        req = json.loads(body or b"{}")
        cid = "ctx" + uuid.uuid4().hex[:8]
        sbx.contexts[cid] = 0
        self._json(
            200, {"id": cid, "language": req.get("language", "python"), "cwd": req.get("cwd", "/home/user")}
        )

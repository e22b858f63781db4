"""``WEB``: the web layer of a stack service (``service/web.py`` in the workspace; a fixture the hidden tests restore).

It gives the agent's service what a production service has around its handlers: a threaded HTTP/1.1 server,
structured JSON logs on stdout (the stack's collector reads them) and Prometheus metrics with ``prometheus_client``
on ``GET /metrics`` (the stack's evaluator scrapes them). The agent writes the handlers.
"""

from __future__ import annotations

__all__ = ["WEB"]

WEB = '''"""The service's web layer (a fixture: do not change this file; the hidden tests restore it).

``serve(routes)`` runs a threaded HTTP/1.1 server on 127.0.0.1:$SERVICE_PORT until the process is stopped.
``routes`` maps ``(method, path)`` to ``handler(params, body) -> (status, value)``: ``params`` is the query string
as a dict of strings, ``body`` the request's decoded JSON (None when empty), ``value`` any JSON-serialisable reply.
An exception in a handler answers 500 and logs an ERROR record with its traceback; every request is counted in
the Prometheus metrics served on ``GET /metrics`` and logged as an INFO record.

``log(level, message, **fields)`` writes one structured record to stdout, a JSON line
``{"ts": ..., "level": "INFO" | "WARNING" | "ERROR" | ..., "service": $SERVICE_NAME, "message": ...}``: the log
collector of the stack counts them by level.
"""

import json
import os
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

SERVICE = os.environ.get("SERVICE_NAME", "service")
REQUESTS = Counter("service_requests", "HTTP requests handled", ["route", "status"])
LATENCY = Histogram("service_request_seconds", "Time spent in a handler", ["route"],
                    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0))
_lock = threading.Lock()


def log(level, message, **fields):
    record = {"ts": round(time.time(), 4), "level": level, "service": SERVICE, "message": str(message), **fields}
    line = json.dumps(record, default=str) + "\\n"
    with _lock:
        sys.stdout.write(line)
        sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    routes = {}

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms Nagle/delayed-ACK stall

    def log_message(self, format, *args):  # access records go through log()
        pass

    def _reply(self, status, data, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method):
        start = time.perf_counter()
        url = urlsplit(self.path)
        size = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(size) if size else b""
        if method == "GET" and url.path == "/metrics":
            return self._reply(200, generate_latest(), CONTENT_TYPE_LATEST)
        handler = self.routes.get((method, url.path))
        if handler is None:
            status, value = 404, {"error": f"no route {method} {url.path}"}
        else:
            try:
                status, value = handler(dict(parse_qsl(url.query)), json.loads(raw) if raw else None)
            except Exception as exc:
                log("ERROR", f"{method} {url.path} failed: {exc!r}", traceback=traceback.format_exc(limit=4))
                status, value = 500, {"error": "internal error"}
        data = json.dumps(value).encode()
        elapsed = time.perf_counter() - start
        REQUESTS.labels(url.path, str(status)).inc()
        LATENCY.labels(url.path).observe(elapsed)
        self._reply(status, data, "application/json")
        log("INFO", f"{method} {url.path} {status}", route=url.path, status=status, ms=round(elapsed * 1000, 2))

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")


def serve(routes):
    """Serve ``routes`` on 127.0.0.1:$SERVICE_PORT until the process is stopped."""
    Handler.routes = dict(routes)
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("SERVICE_PORT", "8080"))), Handler)
    server.daemon_threads = True
    log("INFO", "listening", port=server.server_address[1])
    server.serve_forever(poll_interval=0.05)
'''

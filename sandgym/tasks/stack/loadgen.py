"""``LOADGEN``: the load generator of a stack (part of the hidden test file ``harness.py`` fills in).

Keep-alive HTTP/1.1 clients with ``TCP_NODELAY`` (without it, a request whose reply is written in two segments waits
~40 ms for a delayed ACK), each request's latency measured at the client and its reply checked against the
expected status and keys; ``SENT`` counts every request the harness sends (the evaluator compares the service's own
count with it).
"""

from __future__ import annotations

__all__ = ["LOADGEN"]

LOADGEN = '''SENT = [0, threading.Lock()]  # every request the harness sent to the service


class Client:
    """One keep-alive HTTP/1.1 connection; call() returns (status, decoded JSON or None)."""

    def __init__(self, port, timeout):
        self.port, self.timeout, self.sock, self.file = port, timeout, None, None

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = self.file = None

    def call(self, method, path, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        head = "%s %s HTTP/1.1\\r\\nHost: service\\r\\nContent-Length: %d\\r\\n" % (method, path, len(data))
        if data:
            head += "Content-Type: application/json\\r\\n"
        with SENT[1]:
            SENT[0] += 1
        try:
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.file = self.sock.makefile("rb")
            self.sock.sendall(head.encode() + b"\\r\\n" + data)
            status = int(self.file.readline().split(b" ", 2)[1])
            length, close = 0, False
            while True:
                line = self.file.readline()
                if line in (b"\\r\\n", b"\\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
                elif name.strip().lower() == "connection" and value.strip().lower() == "close":
                    close = True
            raw = self.file.read(length) if length else b""
        except (OSError, ValueError, IndexError):
            self.close()
            raise
        if close:
            self.close()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None


def build(req, seq):
    body = req.get("body")
    if req.get("pad"):
        field, size = req["pad"]
        body = dict(body or {})
        body[field] = ("%08d" % seq) * (size // 8)
    return body


def check(req, status, value):
    """Why the reply is wrong, or None."""
    if status != req.get("status", 200):
        return "status %s, expected %s (%r)" % (status, req.get("status", 200), value)
    for key, want in (req.get("expect") or {}).items():
        got = value.get(key) if isinstance(value, dict) else None
        if got != want:
            return "%s=%r, expected %r" % (key, got, want)
    return None
'''

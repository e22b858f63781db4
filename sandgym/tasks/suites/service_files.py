"""Source files of the ``service_queue`` family's workspace: a small service package and its message broker.

Texts use ``@NAME@`` placeholders (filled by ``fill``) so that the Python inside them needs no brace escaping.
``BROKER`` and ``NOTIFY`` are fixtures: the hidden tests run their own copy of the broker and restore ``notify.py``
before they start, so a solution cannot pass by changing either.
"""

from __future__ import annotations

from sandgym.tasks.suites.service_broker import BROKER

__all__ = ["BROKER", "CONFIG", "DB", "HANDLER_REFERENCE", "HANDLER_START", "LOG", "NOTIFY", "QUEUE_CLIENT",
           "WORKER_REFERENCE", "WORKER_SKELETON", "fill"]


def fill(text: str, **values: str) -> str:
    """Replace every ``@KEY@`` of ``text`` by ``values[KEY]``."""
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return text


CONFIG = '''"""Where the service keeps its data and finds the broker (read from the environment on every call)."""

import os

QUEUE = "@QUEUE@"
"""The queue notifications go through."""


def data_dir():
    path = os.environ.get("SERVICE_DATA", "data")
    os.makedirs(path, exist_ok=True)
    return path


def socket_path():
    """The broker's unix socket (started with: python service/broker.py SOCKET LOG)."""
    return os.environ.get("SERVICE_SOCKET", os.path.join(data_dir(), "broker.sock"))


def notify_delay_s():
    return float(os.environ.get("SERVICE_NOTIFY_DELAY", "0.3"))


def idle_exit_s():
    """How long a worker waits on an empty queue before it exits."""
    return float(os.environ.get("SERVICE_IDLE_EXIT", "1.0"))
'''

LOG = '''"""The service log: one line per event, ``LEVEL message``, in <data dir>/service.log."""

import os

from service import config


def log(level, message):
    with open(os.path.join(config.data_dir(), "service.log"), "a") as f:
        f.write(f"{level} {message}\\n")
'''

DB = '''"""The service's database: a JSON file of @ENTITY@ records by id (each save rewrites it atomically)."""

import json
import os

from service import config


def _path():
    return os.path.join(config.data_dir(), "db.json")


def load():
    try:
        with open(_path()) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def save(record_id, record):
    data = load()
    data[record_id] = record
    tmp = _path() + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, _path())


def delete(record_id):
    data = load()
    if data.pop(record_id, None) is not None:
        tmp = _path() + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, _path())
'''

NOTIFY = '''"""The slow notification provider (a fixture: do not change this file; the hidden tests restore it).

``notify(record_id, record)`` takes SERVICE_NOTIFY_DELAY seconds and then sends the notification to the provider,
which the broker at SERVICE_SOCKET plays (op "notify"; the tests read what it received). The provider injects the
tests' faults: "fail" (``notify`` raises NotifyError: nothing was sent, trying again later works) or "crash" (the
whole process dies with exit code 3 before anything is sent).
"""

import json
import os
import socket
import time

from service import config


class NotifyError(RuntimeError):
    """The provider failed; trying again later may work."""


def notify(record_id, record):
    time.sleep(config.notify_delay_s())
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(config.socket_path())
        f = s.makefile("rwb")
        f.write((json.dumps({"op": "notify", "id": record_id, "record": record}) + "\\n").encode())
        f.flush()
        reply = json.loads(f.readline())
    if reply.get("fault") == "crash":
        os._exit(3)
    if not reply.get("ok"):
        raise NotifyError(f"provider unavailable while notifying {record_id}: {reply}")
'''

QUEUE_CLIENT = '''"""A client of the broker (see service/broker.py for the protocol)."""

import json
import socket

from service import config


class QueueError(RuntimeError):
    """The broker refused a request."""


class QueueClient:
    """One connection to the broker. Raises OSError (e.g. ConnectionRefusedError) when it is unreachable."""

    def __init__(self, path=None, timeout=5.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path or config.socket_path())
        self.file = self.sock.makefile("rwb")

    def _call(self, **request):
        self.file.write((json.dumps(request) + "\\n").encode())
        self.file.flush()
        line = self.file.readline()
        if not line:
            raise ConnectionError("the broker closed the connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise QueueError(reply.get("error", "request failed"))
        return reply

    def publish(self, queue, msg):
        """Store msg (JSON-serialisable) in queue; returns its delivery tag once the broker has it on disk."""
        return self._call(op="publish", queue=queue, msg=msg)["tag"]

    def get(self, queue, auto_ack=False):
        """(tag, msg) of the next message, or None when the queue is empty."""
        reply = self._call(op="get", queue=queue, auto_ack=auto_ack)
        return None if reply.get("msg") is None else (reply["tag"], reply["msg"])

    def ack(self, tag):
        self._call(op="ack", tag=tag)

    def nack(self, tag):
        self._call(op="nack", tag=tag)

    def stats(self, queue):
        reply = self._call(op="stats", queue=queue)
        return {"ready": reply["ready"], "unacked": reply["unacked"]}

    def close(self):
        self.file.close()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
'''

HANDLER_START = '''"""Request handling of the @ENTITY@ service."""

from service import db, log
from service.notify import notify


def @HANDLER@(record):
    """Accept a @ENTITY@ record: validate it, save it, notify; returns {"id": <id>, "status": "accepted"}.

    Raises ValueError (and saves nothing) when @RULE@.
    """
    if @INVALID@:
        raise ValueError(f"invalid @ENTITY@: {record!r}")
    record_id = record["@ID@"]
    db.save(record_id, record)
    notify(record_id, record)  # slow: every request waits for the notification to be sent
    log.log("INFO", f"@ENTITY@ {record_id} accepted")
    return {"id": record_id, "status": "accepted"}
'''

HANDLER_REFERENCE = '''"""Request handling of the @ENTITY@ service: save, and queue the notification for the worker."""

from service import config, db, log
from service.queue_client import QueueClient


def @HANDLER@(record):
    """Accept a @ENTITY@ record: validate it, queue its notification, save it; returns {"id": <id>,
    "status": "accepted"} without waiting for the notification.

    Raises ValueError (and saves nothing) when @RULE@; raises OSError (and saves nothing) when the broker is
    unreachable, so an accepted record always has its notification queued.
    """
    if @INVALID@:
        raise ValueError(f"invalid @ENTITY@: {record!r}")
    record_id = record["@ID@"]
    with QueueClient(config.socket_path()) as queue:
        queue.publish(config.QUEUE, {"id": record_id, "record": record})  # on disk at the broker when it returns
    db.save(record_id, record)
    log.log("INFO", f"@ENTITY@ {record_id} accepted")
    return {"id": record_id, "status": "accepted"}
'''

WORKER_REFERENCE = '''"""The notification worker: python -m service.worker (exits after config.idle_exit_s() on an empty queue).

Each message is acknowledged only after its notification is sent (a crash means redelivery), a failed notification
is handed back for a retry, and ids already notified are skipped (duplicate deliveries send nothing twice).
"""

import json
import os
import time

from service import config, log
from service.notify import notify
from service.queue_client import QueueClient


def _processed_path():
    return os.path.join(config.data_dir(), "processed.json")


def processed_ids():
    try:
        with open(_processed_path()) as f:
            return set(json.load(f))
    except FileNotFoundError:
        return set()


def mark_processed(record_id):
    ids = processed_ids() | {record_id}
    tmp = _processed_path() + ".tmp"
    with open(tmp, "w") as f:
        json.dump(sorted(ids), f)
    os.replace(tmp, _processed_path())


def process(queue, tag, msg):
    record_id = msg["id"]
    if record_id in processed_ids():
        log.log("INFO", f"duplicate delivery of {record_id} skipped")
        queue.ack(tag)
        return
    try:
        notify(record_id, msg["record"])
    except Exception as exc:
        log.log("WARNING", f"notify {record_id} failed ({exc}); it will be retried")
        queue.nack(tag)
        return
    mark_processed(record_id)
    queue.ack(tag)
    log.log("INFO", f"notified {record_id}")


def run(idle_exit_s):
    """Consume messages until the queue stayed empty for idle_exit_s seconds; returns how many were handled."""
    handled, idle_since = 0, time.monotonic()
    with QueueClient(config.socket_path()) as queue:
        while True:
            got = queue.get(config.QUEUE)
            if got is None:
                if time.monotonic() - idle_since > idle_exit_s:
                    return handled
                time.sleep(0.02)
                continue
            process(queue, *got)
            handled += 1
            idle_since = time.monotonic()


if __name__ == "__main__":
    run(config.idle_exit_s())
'''

WORKER_SKELETON = '''"""The notification worker: python -m service.worker (exits after config.idle_exit_s() on an empty queue)."""

from service import config
from service.queue_client import QueueClient


def process(queue, tag, msg):
    """Send the notification of one message.

    TODO: acknowledge only after the notification was sent; hand the message back (nack) when notify raises, so it
    is retried; skip (but acknowledge) a message whose id was already notified, remembering notified ids in a file
    under config.data_dir() so that this survives restarts.
    """
    raise NotImplementedError


def run(idle_exit_s):
    """Consume messages from config.QUEUE until the queue stayed empty for idle_exit_s seconds."""
    raise NotImplementedError


if __name__ == "__main__":
    run(config.idle_exit_s())
'''

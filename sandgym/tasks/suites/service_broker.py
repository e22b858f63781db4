"""The broker of the ``service_queue`` family: a persistent, at-least-once message broker on a unix socket.

``BROKER`` is the source of ``service/broker.py`` in the workspace; the hidden tests run their own pristine copy
of it as a subprocess (pure Python, stdlib only), so the queue in the sandbox is a real service, not a mock.
"""

from __future__ import annotations

__all__ = ["BROKER"]

BROKER = '''"""A tiny persistent message broker on a unix socket (one JSON object per line each way).

Run: python broker.py SOCKET_PATH LOG_PATH

Requests and replies:
  {"op": "publish", "queue": q, "msg": m}       -> {"ok": true, "tag": n}   (m is in LOG_PATH before the reply)
  {"op": "get", "queue": q, "auto_ack": false}  -> {"ok": true, "tag": n, "msg": m}, or {"ok": true, "msg": null}
  {"op": "ack", "tag": n}                       -> {"ok": true}   (the message is done for good)
  {"op": "nack", "tag": n}                      -> {"ok": true}   (the message is delivered again later)
  {"op": "stats", "queue": q}                   -> {"ok": true, "ready": r, "unacked": u}
  {"op": "published", "queue": q}               -> {"ok": true, "msgs": [m, ...]}   (every message published)
The notification provider's side (what service/notify.py calls; the tests read and arm it):
  {"op": "notify", "id": i, "record": r}        -> {"ok": true}, or {"ok": false, "fault": "fail" | "crash"}
  {"op": "fault", "kind": "fail" | "crash", "id": i} -> {"ok": true}   (the next notify of i gets that fault)
  {"op": "notified"}                            -> {"ok": true, "ids": [i, ...], "fired": [[kind, i], ...]}
Errors reply {"ok": false, "error": "..."}.

Delivery is at-least-once: a message fetched without auto_ack stays unacknowledged until ack or nack, and when the
connection that fetched it closes first (the consumer crashed) it is delivered again. With auto_ack the message is
removed as it is delivered (nothing redelivers it). After a restart on the same LOG_PATH every published message
that was not acknowledged is ready again.
"""

import json
import os
import socket
import sys
import threading


class Broker:
    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.ready = {}  # queue -> [tag, ...] in delivery order
        self.msgs = {}  # tag -> (queue, msg)
        self.unacked = {}  # tag -> connection id
        self.next_tag = 1
        self.published = {}  # queue -> [msg, ...]
        self.notified, self.faults, self.fired = [], {}, []  # the provider: in memory, for this process's life
        self._replay(log_path)
        self.log = open(log_path, "a")

    def _replay(self, path):
        if not os.path.exists(path):
            return
        published, acked = [], set()
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a torn last line after a crash
                if rec.get("op") == "pub":
                    published.append(rec)
                elif rec.get("op") == "ack":
                    acked.add(rec["tag"])
        for rec in published:
            self.next_tag = max(self.next_tag, rec["tag"] + 1)
            self.published.setdefault(rec["queue"], []).append(rec["msg"])
            if rec["tag"] not in acked:
                self.msgs[rec["tag"]] = (rec["queue"], rec["msg"])
                self.ready.setdefault(rec["queue"], []).append(rec["tag"])

    def _write(self, rec):
        self.log.write(json.dumps(rec) + "\\n")
        self.log.flush()
        os.fsync(self.log.fileno())

    def _ack(self, tag):
        self._write({"op": "ack", "tag": tag})
        del self.msgs[tag]

    def handle(self, req, conn):
        op = req.get("op")
        with self.lock:
            if op == "publish":
                tag, self.next_tag = self.next_tag, self.next_tag + 1
                self._write({"op": "pub", "tag": tag, "queue": req["queue"], "msg": req["msg"]})
                self.msgs[tag] = (req["queue"], req["msg"])
                self.ready.setdefault(req["queue"], []).append(tag)
                self.published.setdefault(req["queue"], []).append(req["msg"])
                return {"ok": True, "tag": tag}
            if op == "published":
                return {"ok": True, "msgs": list(self.published.get(req.get("queue"), []))}
            if op == "notify":
                kind = self.faults.pop(str(req["id"]), None)
                if kind is not None:
                    self.fired.append([kind, req["id"]])
                    return {"ok": False, "fault": kind}
                self.notified.append(req["id"])
                return {"ok": True}
            if op == "fault":
                if req.get("kind") not in ("fail", "crash"):
                    return {"ok": False, "error": "fault kind must be 'fail' or 'crash', not %r" % (req.get("kind"),)}
                self.faults[str(req["id"])] = req["kind"]
                return {"ok": True}
            if op == "notified":
                return {"ok": True, "ids": list(self.notified), "fired": list(self.fired)}
            if op == "get":
                ready = self.ready.get(req.get("queue"), [])
                if not ready:
                    return {"ok": True, "msg": None}
                tag = ready.pop(0)
                msg = self.msgs[tag][1]
                if req.get("auto_ack"):
                    self._ack(tag)
                else:
                    self.unacked[tag] = conn
                return {"ok": True, "tag": tag, "msg": msg}
            if op in ("ack", "nack"):
                tag = req.get("tag")
                if self.unacked.get(tag) != conn:
                    return {"ok": False, "error": "unknown delivery tag %r on this connection" % (tag,)}
                del self.unacked[tag]
                if op == "ack":
                    self._ack(tag)
                else:
                    self.ready[self.msgs[tag][0]].append(tag)
                return {"ok": True}
            if op == "stats":
                q = req.get("queue")
                unacked = sum(1 for t in self.unacked if self.msgs[t][0] == q)
                return {"ok": True, "ready": len(self.ready.get(q, [])), "unacked": unacked}
        return {"ok": False, "error": "unknown op %r" % (op,)}

    def disconnected(self, conn):
        with self.lock:
            for tag in [t for t, c in self.unacked.items() if c == conn]:
                del self.unacked[tag]
                self.ready[self.msgs[tag][0]].insert(0, tag)  # redelivered first

    def serve(self, sock_path):
        if os.path.exists(sock_path):
            os.unlink(sock_path)  # left behind by a killed broker
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(sock_path)
        server.listen(64)
        while True:
            conn, _ = server.accept()
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn):
        cid = id(conn)
        try:
            with conn, conn.makefile("rwb") as f:
                for line in f:
                    try:
                        reply = self.handle(json.loads(line), cid)
                    except (ValueError, KeyError, TypeError) as exc:
                        reply = {"ok": False, "error": "bad request: %s" % exc}
                    f.write((json.dumps(reply) + "\\n").encode())
                    f.flush()
        except OSError:
            pass
        finally:
            self.disconnected(cid)


if __name__ == "__main__":
    Broker(sys.argv[2]).serve(sys.argv[1])
'''

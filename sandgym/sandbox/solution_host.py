"""The solution's process during grading: imports the agent's modules and answers the grader's calls.

Runs INSIDE a sandbox of its own (stdlib only): a bwrap that shares the workspace but never sees the grader's
directory, the hidden tests or the grader's pipes (``LocalSandbox.run_tests`` starts it next to the warm worker).
Pid 1 of that sandbox is this supervisor (non-dumpable, so nothing it forks can ptrace it); it forks one child that
imports the agent's code and serves the grader's requests over the link FIFOs, one JSON line each way
(``wire.py``). When the child dies, the supervisor tells the grader (``{"dead": ...}``) so the grader does not wait
for a reply that will never come, and kills every process the child left.

Nothing here is trusted by the grader: it decodes every reply as plain data (``grader_link.py``).

``zygote`` mode (``CFG["zygote"]``): the same supervisor kept for the sandbox's life, so a grading costs a fork, not
a bwrap and an interpreter. It reads the host's requests on stdin (Python literals, one per line): ``serve`` forks
the child for one grading's link (under ``CFG["links"]``, bound read-only), ``end`` kills that child and everything
it left, ``wipe`` puts this namespace's writable file systems back to their start-up snapshot (``worker_wipe.py``,
between episodes). Replies go to stdout as JSON lines. The child runs the agent's code exactly as in the one-shot
mode; nothing of one grading's child survives into the next (killed, strays killed, the link removed by the host).
"""

import builtins
import os
import select
import sys
import traceback
import warnings

import wire
import worker_wipe
from worker import _dumps, _prctl, _reap_all, _set_limits  # the worker's own helpers (same runtime dir)

CFG: dict = {}
MAX_WARNINGS = 100
"""Warnings sent back per reply (the rest are dropped)."""
_BUILTIN_EXC = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                and issubclass(getattr(builtins, n), BaseException)}


class Server:
    """The child: holds the agent's objects by id and answers one request per line."""

    def __init__(self, rfd, wfd):
        self.rfd, self.wfd = rfd, wfd
        self.objects = {}
        self.ids = {}
        self.buf = b""
        self.n = None  # the grader's request being answered (a callback made meanwhile carries it)
        self.k = 0
        self.grader_objects = {}

    def handle_of(self, obj):
        if type(obj) is GraderObject:
            return {"cb": object.__getattribute__(obj, "_id")}
        node = wire.encode_value(obj)
        if node is not None:
            return node
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.objects) + 1
            self.objects[self.ids[key]] = obj
        h = self.ids[key]
        if isinstance(obj, type) and issubclass(obj, BaseException):
            return {"x": self.exc_class(obj)}
        kind = ("module" if type(obj).__name__ == "module" else "class" if isinstance(obj, type)
                else "callable" if callable(obj) else "object")
        return {"h": [h, kind, getattr(type(obj), "__name__", "?")]}

    def exc_class(self, cls):
        """[[id, name, module] for the agent's classes in the MRO..., the first builtin base's name]."""
        chain, base = [], "Exception"
        for c in cls.__mro__:
            if c.__name__ in _BUILTIN_EXC and getattr(builtins, c.__name__) is c:
                base = c.__name__
                break
            key = id(c)
            if key not in self.ids:
                self.ids[key] = len(self.objects) + 1
                self.objects[self.ids[key]] = c
            chain.append([self.ids[key], str(c.__name__), str(getattr(c, "__module__", ""))])
        return [chain, base]

    def enc(self, value, refs=None):
        return wire.encode(value, self.handle_of) if not refs else _encode_refs(value, self.handle_of, refs)

    def dec(self, node):
        def from_tag(tag, payload):
            if tag == "h":
                return self.objects[payload]
            if tag == "cb" and type(payload) is int:
                if payload not in self.grader_objects:
                    self.grader_objects[payload] = GraderObject(self, payload)
                return self.grader_objects[payload]
            if tag == "nm" and type(payload) is list and len(payload) == 2:
                import importlib

                found = importlib.import_module(str(payload[0]))
                for part in str(payload[1]).split("."):
                    found = getattr(found, part)
                return found
            if tag == "v":
                return wire.decode_value(payload)
            raise wire.WireError(f"unknown tag {tag!r}")

        return wire.decode(node, from_tag)

    def callback(self, ident, op, args=(), kwargs=None):
        """Ask the grader to run ``op`` on one of the test's objects; answer the grader's nested requests meanwhile."""
        self.k += 1
        k = self.k
        msg = {"n": self.n, "k": k, "cb": {"id": ident, "op": op, "args": [self.enc(a) for a in args],
                                          "kwargs": [[key, self.enc(v)] for key, v in (kwargs or {}).items()]}}
        wire.write_all(self.wfd, wire.dumps(msg))
        while True:
            msg = self.next_message()
            if "cbr" not in msg:
                self.reply_to(msg)  # the callback called back into the solution
                continue
            if msg.get("cbr") != k:
                continue
            if "err" in msg:
                raise _grader_error(msg["err"])
            return self.dec(msg.get("ok"))

    def next_message(self):
        try:
            line, self.buf = wire.read_line(self.rfd, self.buf, float("inf"), 64 << 20, _wait)
        except wire.WireError:
            os._exit(0)
        return wire.loads(line)

    def warning(self, w):
        """A warning the solution issued, as data: category (builtin name or the agent's class chain), text, place."""
        cat = w.category
        builtin = cat.__name__ in _BUILTIN_EXC and getattr(builtins, cat.__name__) is cat
        rel = os.path.relpath(str(w.filename), CFG.get("workspace") or "/")
        module = rel[:-3].replace(os.sep, ".").removesuffix(".__init__") if rel.endswith(".py") else ""
        return {"n": cat.__name__, "builtin": builtin, "x": None if builtin else self.exc_class(cat),
                "m": _safe_str(w.message)[:2000], "f": str(w.filename), "l": int(w.lineno or 0), "mod": module}

    def error(self, exc):
        cls = type(exc)
        name = cls.__name__
        builtin = name in _BUILTIN_EXC and getattr(builtins, name) is cls
        try:
            args = wire.encode(list(exc.args), _no_handles)
        except Exception:
            args = None
        tb = "".join(traceback.format_exception(cls, exc, exc.__traceback__)[-6:])[-3000:]
        return {"err": {"n": name, "builtin": builtin, "x": None if builtin else self.exc_class(cls),
                        "a": args, "m": _safe_str(exc)[:2000], "tb": tb}}

    def answer(self, req):
        env = req.get("env")
        if type(env) is dict:
            os.environ.clear()
            os.environ.update({str(k): str(v) for k, v in env.items()})
        op = req.get("op")
        if op == "import":
            import importlib

            mod = importlib.import_module(req["name"])
            names = getattr(mod, "__all__", None)
            if not isinstance(names, (list, tuple)) or not all(type(n) is str for n in names):
                names = [n for n in list(vars(mod)) if type(n) is str and not n.startswith("_")]
            return {"ok": self.handle_of(mod), "pkg": hasattr(mod, "__path__"), "all": list(names)[:10000],
                    "file": str(getattr(mod, "__file__", "") or "")}
        obj = self.objects[req["h"]]
        if op == "getattr":
            return {"ok": self.enc(getattr(obj, req["name"]))}
        if op == "setattr":
            setattr(obj, req["name"], self.dec(req["value"]))
            return {"ok": None}
        if op == "call":
            args = [self.dec(a) for a in req.get("args", [])]
            kwargs = {k: self.dec(v) for k, v in req.get("kwargs", [])}
            result = obj(*args, **kwargs)
            refs = {id(a): {"a": i} for i, a in enumerate(args) if type(a) in (list, dict, set)}
            refs.update({id(v): {"a": k} for k, v in kwargs.items() if type(v) in (list, dict, set)})
            back = [[i, self.enc(a)] for i, a in enumerate(args) if type(a) in (list, dict, set)]
            back += [[k, self.enc(v)] for k, v in kwargs.items() if type(v) in (list, dict, set)]
            return {"ok": self.enc(result, refs), "back": back}
        if op == "proto":
            name = req["name"]
            args = [self.dec(a) for a in req.get("args", [])]
            fn = _PROTO[name]
            return {"ok": self.enc(fn(obj, *args))}
        raise wire.WireError(f"unknown op {op!r}")

    def serve(self):
        while True:
            try:
                msg = self.next_message()
            except wire.WireError:
                continue  # a malformed line: nothing to answer
            self.reply_to(msg)

    def reply_to(self, req):
        outer, self.n = self.n, req.get("n")
        with warnings.catch_warnings(record=True) as caught:  # the grader re-issues them under the test's filters
            warnings.simplefilter("always")
            try:
                reply = self.answer(req)
            except BaseException as exc:  # noqa: BLE001 - every error of the agent's code goes back as data
                if isinstance(exc, (SystemExit, KeyboardInterrupt, GeneratorExit)):
                    exc = RuntimeError(f"the solution raised {type(exc).__name__}{exc.args!r}")
                try:
                    reply = self.error(exc)
                except BaseException:  # noqa: BLE001
                    reply = {"err": {"n": "RuntimeError", "builtin": True, "x": None, "a": None,
                                     "m": "the solution raised an exception that cannot be described", "tb": ""}}
            finally:
                self.n = outer
        if caught:
            try:  # noqa: SIM105 (contextlib costs imports)
                reply["w"] = [self.warning(w) for w in caught[:MAX_WARNINGS]]
            except Exception:  # noqa: BLE001 - a warning that cannot be described is left out
                pass
        reply["n"] = req.get("n")
        try:
            data = wire.dumps(reply)
        except (TypeError, ValueError, RecursionError):
            data = wire.dumps({"err": {"n": "RuntimeError", "builtin": True, "x": None, "a": None,
                                       "m": "the solution's reply could not be encoded", "tb": ""}, "n": req.get("n")})
        wire.write_all(self.wfd, data)


class GraderObject:
    """One of the test's objects (a callback, an iterator, an instance of a test's class) as the solution sees it:
    calls, iteration, length, items and text are asked of the grader; its attributes are out of reach."""

    __slots__ = ("_server", "_id")

    def __init__(self, server, ident):
        object.__setattr__(self, "_server", server)
        object.__setattr__(self, "_id", ident)

    def _ask(self, op, *args, **kwargs):
        server = object.__getattribute__(self, "_server")
        return server.callback(object.__getattribute__(self, "_id"), op, args, kwargs)

    def __call__(self, *args, **kwargs):
        return self._ask("call", *args, **kwargs)

    def __iter__(self):
        return self._ask("iter")

    def __next__(self):
        return self._ask("next")

    def __len__(self):
        return self._ask("len")

    def __getitem__(self, key):
        return self._ask("getitem", key)

    def __contains__(self, item):
        return self._ask("contains", item)

    def __str__(self):
        return self._ask("str")

    def __repr__(self):
        return self._ask("repr")


def _grader_error(err):
    """The exception a test's callback raised, as the solution sees it (a builtin class when it is one)."""
    name = str(err.get("n")) if type(err) is dict else "RuntimeError"
    message = str(err.get("m", "")) if type(err) is dict else ""
    cls = getattr(builtins, name, None) if type(err) is dict and err.get("builtin") else None
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
        message = f"{name}: {message}"
    try:
        return cls(message) if cls is not StopIteration else StopIteration()
    except Exception:  # noqa: BLE001 - a builtin exception class whose constructor wants other arguments
        return RuntimeError(f"{name}: {message}")


def _safe_str(exc):
    try:
        return str(exc)
    except BaseException:  # noqa: BLE001
        return f"<{type(exc).__name__}>"


def _no_handles(obj):
    raise wire.WireError("not plain")


def _encode_refs(value, handle_of, refs):
    hit = refs.get(id(value))
    if hit is not None:
        return hit
    return wire.encode(value, handle_of)


def _contains(obj, item):
    return item in obj


def _setitem(obj, key, value):
    obj[key] = value


def _delitem(obj, key):
    del obj[key]


_PROTO: dict = {"len": len, "iter": iter, "next": next, "getitem": lambda o, k: o[k], "setitem": _setitem,
          "delitem": _delitem, "contains": _contains, "str": str, "repr": repr,
          "enter": lambda o: o.__enter__(), "exit": lambda o, *a: o.__exit__(*a),
          "source": lambda o: __import__("inspect").getsource(o), "doc": lambda o: o.__doc__,
          "isinstance": lambda cls, x: isinstance(x, cls), "issubclass": lambda cls, c: issubclass(c, cls)}


def _wait(fd, seconds):
    r, _, _ = select.select([fd], [], [], min(seconds, 3600.0))
    return bool(r)


def _child(rfd, wfd):
    _set_limits(CFG.get("limits") or {})
    os.setsid()
    os.chdir(CFG["workspace"])
    env = [CFG["pyenv"]] if CFG.get("pyenv") else []
    sys.path[:] = [CFG["workspace"], *env] + [p for p in sys.path if p not in ("", CFG["workspace"], *env)]
    sys.dont_write_bytecode = True
    sys.argv = ["solution"]
    Server(rfd, wfd).serve()


def main():
    global CFG
    CFG = eval(sys.argv[1], {"__builtins__": {}}, {})  # a literal written by the trusted host
    _prctl(4, 0)  # PR_SET_DUMPABLE=0: nothing forked from here can ptrace us or open our fds via /proc
    if CFG.get("zygote"):
        proto_in, proto_out = os.dup(0), os.dup(1)
        os.set_inheritable(proto_in, False)
        os.set_inheritable(proto_out, False)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(2, 1)  # the agent's prints go to the sandbox log, never into a reply
        zygote_main(proto_in, proto_out)
        return
    link = CFG["link"]
    rfd = os.open(os.path.join(link, "req"), os.O_RDWR | os.O_CLOEXEC)  # O_RDWR: never blocks on a FIFO
    wfd = os.open(os.path.join(link, "rep"), os.O_RDWR | os.O_CLOEXEC)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the agent's prints go to the sandbox log, never into a reply
    pid = _fork_child(rfd, wfd)
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:  # noqa: SIM105 (contextlib costs imports; this runs once per grading)
        os.kill(-1, 9)  # whatever the solution left behind
    except OSError:
        pass
    wire.write_all(wfd, wire.dumps({"dead": code}))
    while True:  # stay pid 1 until the host kills this sandbox (the grader may still read)
        select.select([], [], [], 3600.0)


def _fork_child(rfd, wfd, close=()):
    """Fork the child that imports the agent's code and serves the link; returns its pid (never returns in it)."""
    pid = os.fork()
    if pid == 0:
        try:
            for fd in close:
                os.close(fd)
            os.set_inheritable(rfd, False)
            os.set_inheritable(wfd, False)
            _child(rfd, wfd)
        finally:
            os._exit(70)
    return pid


def _open_link(link):
    rfd = os.open(os.path.join(link, "req"), os.O_RDWR | os.O_CLOEXEC)  # O_RDWR: never blocks on a FIFO
    wfd = os.open(os.path.join(link, "rep"), os.O_RDWR | os.O_CLOEXEC)
    return rfd, wfd


def _kill_strays():
    try:  # noqa: SIM105 (contextlib costs imports)
        os.kill(-1, 9)  # every process of this namespace but pid 1 (this zygote)
    except OSError:
        pass
    _reap_all()


def zygote_main(proto_in, proto_out):
    """Serve gradings one at a time (see the module docstring); returns when the host closes stdin."""
    baseline = worker_wipe.snapshot()  # before any agent code runs in this namespace
    reader = os.fdopen(proto_in, "rb", buffering=0)

    def reply(obj):
        data = (_dumps(obj) + "\n").encode()
        while data:
            data = data[os.write(proto_out, data):]

    reply({"ready": True})
    child, wfd, buf = 0, -1, b""
    while True:
        if child:  # watch the child while waiting: a dead child is reported to the grader at once
            r, _, _ = select.select([proto_in], [], [], 0.02)
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                _kill_strays()
                wire.write_all(wfd, wire.dumps({"dead": os.waitstatus_to_exitcode(status)}))
                child = 0
            if not r:
                continue
        chunk = reader.read(1 << 16)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = eval(line.decode(), {"__builtins__": {}}, {})  # a literal written by the trusted host
            op = req.get("op")
            if op == "serve" and not child:
                rfd, wfd = _open_link(req["link"])
                child = _fork_child(rfd, wfd, close=(proto_in, proto_out))
                os.close(rfd)
                reply({"rid": req.get("rid"), "ok": True})
            elif op == "end":
                if child:
                    try:  # noqa: SIM105 (contextlib costs imports)
                        os.kill(child, 9)
                    except OSError:
                        pass
                    os.waitpid(child, 0)
                    child = 0
                _kill_strays()
                if wfd >= 0:
                    os.close(wfd)
                    wfd = -1
                reply({"rid": req.get("rid"), "ok": True})
            elif op == "wipe" and not child:
                _kill_strays()
                reply({"rid": req.get("rid"), "left": worker_wipe.wipe(baseline)[:20]})
            else:
                reply({"rid": req.get("rid"), "error": f"unexpected request {op!r}"})


if __name__ == "__main__":
    main()

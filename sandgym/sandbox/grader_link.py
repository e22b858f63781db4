"""The grader's side of the grading boundary: the agent's modules imported as proxies to another process.

Runs INSIDE the sandbox, in the pytest child of the warm worker (``worker_pytest.py``), which is non-dumpable and
alone holds the report pipe. An import hook (first on ``sys.meta_path``) answers every module that lives in the
workspace and nowhere else with a ``ProxyModule``: its attributes, calls and protocol operations (``len``, ``iter``,
``[]``, ``in``, ``with``) are requests over the link FIFOs to ``solution_host.py``, which runs the agent's code in
a sandbox of its own. Replies are decoded by ``wire.decode`` into builtin values; whatever else the solution
returns is a ``Remote`` handle that never compares equal to a value and has no truth value of its own. So nothing
the agent's code does (always-equal objects, patched builtins, patched pytest, forged reports, ptrace) reaches
this process. Mutations of list/dict/set arguments are copied back and a returned argument keeps its identity,
so tests of purity and aliasing (``out is not xs``, ``xs == before``) keep their meaning.
"""

import builtins
import importlib.abc
import importlib.machinery
import inspect
import os
import select
import sys
import types
import warnings

import wire

_LINK = None
_EXC_CLASSES: dict = {}


class SolutionError(RuntimeError):
    """The solution's process failed in a way that is not an exception of its code (it exited, hung, lied)."""


def _wait(fd, seconds):
    r, _, _ = select.select([fd], [], [], seconds)
    return bool(r)


class Link:
    """Requests to the solution's process; every reply is data."""

    def __init__(self, path, deadline):
        self.rfd = os.open(os.path.join(path, "rep"), os.O_RDWR | os.O_CLOEXEC)
        self.wfd = os.open(os.path.join(path, "req"), os.O_RDWR | os.O_CLOEXEC)
        self.deadline = deadline
        self.buf = b""
        self.n = 0
        self.dead = None
        self.env = None
        self.failed = None

    def request(self, msg):
        __tracebackhide__ = True  # failures point at the test's line, not at the link (pytest hides this frame)
        if self.dead is not None:
            raise SolutionError(self.dead)
        self.n += 1
        n = msg["n"] = self.n  # a callback may make nested requests while this one waits
        env = dict(os.environ)
        if env != self.env:  # the test's environment variables are the solution's (monkeypatch.setenv, ...)
            msg["env"] = env
            self.env = env
        wire.write_all(self.wfd, wire.dumps(msg))
        while True:
            try:
                line, self.buf = wire.read_line(self.rfd, self.buf, self.deadline, 64 << 20, _wait)
            except TimeoutError:
                self.dead = "the solution did not answer before the grading deadline"
                raise SolutionError(self.dead) from None
            except wire.WireError as exc:
                self.dead = f"the link to the solution broke: {exc}"
                raise SolutionError(self.dead) from None
            reply = wire.loads(line)
            if "dead" in reply:
                self.dead = f"the solution's process exited (exit code {reply.get('dead')!r})"
                raise SolutionError(self.dead)
            if reply.get("n") != n:
                continue  # a stale or forged line: ignored
            if "cb" in reply:  # the solution calls one of the test's objects (a callback) while it works
                wire.write_all(self.wfd, wire.dumps(_callback(reply.get("cb"), reply.get("k"))))
                continue
            break
        failed, self.failed = self.failed, None
        if failed is not None:  # a test's callback failed an assertion: the test fails, whatever the solution did
            raise failed
        _reissue(reply.get("w"))
        if "err" in reply:
            raise _exception(reply["err"])
        return reply


def _reissue(items):
    """The solution's warnings, issued again here so the test's filters apply (``filterwarnings = error``,
    ``pytest.warns``, ``pytest.deprecated_call``); a warning category is a builtin one or a local stand-in."""
    __tracebackhide__ = True
    for w in items if type(items) is list else []:
        if type(w) is not dict:
            continue
        if w.get("builtin"):
            cat = getattr(builtins, str(w.get("n")), None)
        elif type(w.get("x")) is list and len(w["x"]) == 2:
            cat = _exc_class(*w["x"])
        else:
            cat = None
        if not (isinstance(cat, type) and issubclass(cat, Warning)):
            continue
        lineno = w["l"] if type(w.get("l")) is int else 0
        warnings.warn_explicit(str(w.get("m", ""))[:2000], cat, str(w.get("f", "")), int(lineno),
                               module=str(w.get("mod") or "") or None)


_GRADER_OBJECTS: dict = {}
"""The test's own objects the solution holds handles to (callbacks, iterators, instances of the test's classes),
by id. The solution can only call them, iterate them or ask their length, items and text: never read an
attribute, so a handle never leads it to the grader's modules."""

_CALLBACK_OPS = {"call": None, "iter": iter, "next": next, "len": len, "getitem": lambda o, k: o[k],
                 "contains": lambda o, x: x in o, "str": str, "repr": repr}


def _callback(cb, k):
    """Run one callback for the solution; the reply (a value, a handle or an error) goes back as data."""
    try:
        if type(cb) is not dict or cb.get("op") not in _CALLBACK_OPS or type(cb.get("id")) is not int:
            raise SolutionError(f"malformed callback {cb!r:.200}")
        obj = _GRADER_OBJECTS.get(cb["id"])
        if obj is None:
            raise SolutionError("a callback names an object the test never passed")
        args = [_decode(a) for a in cb.get("args") or []]
        kwargs = {str(kv[0]): _decode(kv[1]) for kv in cb.get("kwargs") or [] if type(kv) is list and len(kv) == 2}
        fn = _CALLBACK_OPS[cb["op"]]
        result = obj(*args, **kwargs) if fn is None else fn(obj, *args)
        return {"cbr": k, "ok": _encode(result)}
    except BaseException as exc:  # noqa: BLE001 - the test's error goes back to the solution as data
        failed_check = isinstance(exc, AssertionError) or not isinstance(exc, Exception)  # pytest.fail/skip too
        if failed_check and _LINK is not None and _LINK.failed is None:
            _LINK.failed = exc  # raised in the test when the solution's call returns, even if it swallowed it
        return {"cbr": k, "err": {"n": type(exc).__name__, "m": str(exc)[:2000],
                                  "builtin": getattr(builtins, type(exc).__name__, None) is type(exc)}}


def _decode(node, args=None):
    def from_tag(tag, payload):
        if tag == "h" and type(payload) is list and len(payload) == 3 and type(payload[0]) is int:
            return Remote(payload[0], str(payload[1]), str(payload[2]))
        if tag == "x" and type(payload) is list and len(payload) == 2:
            return _exc_class(payload[0], payload[1])
        if tag == "cb" and type(payload) is int and payload in _GRADER_OBJECTS:
            return _GRADER_OBJECTS[payload]  # one of the test's own objects, passed back
        if tag == "v":
            return wire.decode_value(payload)
        if tag == "a" and args is not None:
            if type(payload) is int and 0 <= payload < len(args[0]):
                return args[0][payload]
            if type(payload) is str and payload in args[1]:
                return args[1][payload]
        raise wire.WireError(f"unexpected {tag!r} node from the solution")

    try:
        return wire.decode(node, from_tag)
    except (TypeError, ValueError, KeyError, IndexError, RecursionError) as exc:
        raise SolutionError(f"malformed value from the solution: {exc!r}") from None


def _encode(value):
    def handle_of(obj):
        if type(obj) is Remote:
            return {"h": object.__getattribute__(obj, "_id")}
        node = wire.encode_value(obj)
        if node is not None:
            return node
        name = _stdlib_name(obj)
        if name is not None:
            return {"nm": name}  # the solution's own copy of the same builtin or standard-library object
        key = id(obj)
        _GRADER_OBJECTS[key] = obj
        return {"cb": key}

    return wire.encode(value, handle_of)


def _stdlib_name(obj):
    """[module, qualname] when ``obj`` is a builtin or a standard-library function or class found under that name
    (``len``, ``operator.add``, ``tuple``); None otherwise (bound methods, the test's own functions)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if type(module) is not str or type(qualname) is not str or module.partition(".")[0] not in sys.stdlib_module_names:
        return None
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return [module, qualname] if found is obj else None


def _exc_class(chain, base):
    """A local exception class standing for the solution's class (cached, so pytest.raises matches)."""
    base_cls = getattr(builtins, base, Exception) if isinstance(base, str) else Exception
    if not (isinstance(base_cls, type) and issubclass(base_cls, Exception)):
        base_cls = Exception  # SystemExit/KeyboardInterrupt subclasses never stop the grader
    cls = base_cls
    for item in reversed(chain if type(chain) is list else []):
        if type(item) is not list or len(item) != 3:
            continue
        key = (item[0], str(item[1]))
        if key not in _EXC_CLASSES:
            _EXC_CLASSES[key] = type(str(item[1]), (cls,), {"__module__": str(item[2])})
        cls = _EXC_CLASSES[key]
    return cls


def _exception(err):
    if type(err) is not dict:
        return SolutionError("malformed error from the solution")
    name, message = str(err.get("n")), str(err.get("m", ""))[:2000]
    args = None
    if err.get("a") is not None:
        try:
            args = _decode(err["a"])
        except SolutionError:
            args = None
    if err.get("builtin") and isinstance(getattr(builtins, name, None), type):
        cls = getattr(builtins, name)
        if not issubclass(cls, Exception):
            cls = SolutionError
    elif type(err.get("x")) is list and len(err["x"]) == 2:
        cls = _exc_class(*err["x"])
    else:
        cls = SolutionError
    try:
        exc = cls(*args) if type(args) is list else cls(message)
    except Exception:  # noqa: BLE001 - an exception class whose constructor wants other arguments
        exc = SolutionError(f"{name}: {message}")
    tb = str(err.get("tb", ""))
    # Always marked, traceback or not: a solution that blanks its traceback must not pass its exception off as
    # the verifier's own failure (a missing library: a task error, excluded from scoring).
    exc.__notes__ = [f"raised in the solution's process:\n{tb}" if tb else "raised in the solution's process"]
    return exc


def _link():
    if _LINK is None:
        raise SolutionError("the grading link was not installed")
    return _LINK


def _call_remote(msg):
    __tracebackhide__ = True
    return _decode(_link().request(msg).get("ok"))


class Remote:
    # A handle to one of the solution's objects: call it, read or set attributes, pass it back; never a value.
    # (No docstring: ``handle.__doc__`` is the solution object's own.)

    __slots__ = ("_id", "_kind", "_type")

    def _doc(self):
        doc = self._proto("doc")
        return doc if doc is None or type(doc) is str else None

    __doc__ = property(_doc)  # type: ignore[assignment]

    def __instancecheck__(self, obj):  # isinstance(x, solution.Class): the solution's answer, a plain bool
        found = self._proto("isinstance", obj)
        if type(found) is not bool:
            raise TypeError("the solution's isinstance check did not return a bool")
        return found

    def __subclasscheck__(self, cls):
        found = self._proto("issubclass", cls)
        if type(found) is not bool:
            raise TypeError("the solution's issubclass check did not return a bool")
        return found

    def __init__(self, id_, kind, type_name):
        object.__setattr__(self, "_id", id_)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_type", type_name)

    def _proto(self, name, *args):
        __tracebackhide__ = True
        return _call_remote({"op": "proto", "h": object.__getattribute__(self, "_id"), "name": name,
                             "args": [_encode(a) for a in args]})

    def __getattr__(self, name):
        __tracebackhide__ = True
        return _call_remote({"op": "getattr", "h": object.__getattribute__(self, "_id"), "name": name})

    def __setattr__(self, name, value):
        _call_remote({"op": "setattr", "h": object.__getattribute__(self, "_id"), "name": name,
                      "value": _encode(value)})

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        reply = _link().request({"op": "call", "h": object.__getattribute__(self, "_id"),
                               "args": [_encode(a) for a in args],
                               "kwargs": [[k, _encode(v)] for k, v in kwargs.items()]})
        back = reply.get("back")
        for item in back if type(back) is list else []:  # the solution's changes to list/dict/set arguments, applied to the test's objects
            if type(item) is list and len(item) == 2:
                _copy_back(args[item[0]] if type(item[0]) is int and 0 <= item[0] < len(args)
                           else kwargs.get(item[0]) if type(item[0]) is str else None, _decode(item[1]))
        return _decode(reply.get("ok"), (args, kwargs))

    def __len__(self):
        n = self._proto("len")
        if type(n) is not int:
            raise TypeError("the solution's __len__ did not return an int")
        return n

    def __iter__(self):
        it = self._proto("iter")
        return it if type(it) is Remote else iter(it)

    def __next__(self):
        return self._proto("next")  # the solution's StopIteration arrives as the builtin one

    def __getitem__(self, key):
        return self._proto("getitem", key)

    def __setitem__(self, key, value):
        self._proto("setitem", key, value)

    def __delitem__(self, key):
        self._proto("delitem", key)

    def __contains__(self, item):
        found = self._proto("contains", item)
        if type(found) is not bool:
            raise TypeError("the solution's __contains__ did not return a bool")
        return found

    def __enter__(self):
        return self._proto("enter")

    def __exit__(self, *exc):
        return False if exc[0] is not None else self._proto("exit", None, None, None)

    def __str__(self):
        s = self._proto("str")
        return s if type(s) is str else "<?>"

    def __repr__(self):
        try:
            s = self._proto("repr")
        except Exception:  # noqa: BLE001 - repr is for messages; never fail a test report on it
            s = None
        kind, type_name = object.__getattribute__(self, "_kind"), object.__getattribute__(self, "_type")
        return s[:500] if type(s) is str else f"<solution {kind} {type_name}>"

    def __bool__(self):  # the kind is the solution's word, so no handle has a truth value
        raise TypeError(f"the solution returned a {object.__getattribute__(self, '_type')} object where a truth "
                        "value was needed; return a plain bool")

    def __eq__(self, other):
        return type(other) is Remote and object.__getattribute__(other, "_id") == object.__getattribute__(self, "_id")

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(("sandgym-remote", object.__getattribute__(self, "_id")))


def _copy_back(orig, new):
    if type(orig) is list and type(new) is list:
        if orig != new:
            orig[:] = new
    elif type(orig) in (dict, set) and type(new) is type(orig) and orig != new:
        orig.clear()
        orig.update(new)


class ProxyModule(types.ModuleType):
    """A module of the agent's, living in the solution's process; attribute access is remote."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        handle = self.__dict__.get("__sandgym_handle__")
        if handle is None:
            raise AttributeError(name)
        return _call_remote({"op": "getattr", "h": handle, "name": name})

    def __setattr__(self, name, value):
        handle = self.__dict__.get("__sandgym_handle__")
        if handle is None or (name.startswith("__") and name.endswith("__")) or isinstance(value, ProxyModule):
            object.__setattr__(self, name, value)  # the import system's own bookkeeping stays local
            return
        _call_remote({"op": "setattr", "h": handle, "name": name, "value": _encode(value)})


class _Loader(importlib.abc.Loader):
    def __init__(self, file=""):
        self.file = file

    def create_module(self, spec):
        reply = _link().request({"op": "import", "name": spec.name})
        handle = _decode(reply.get("ok"))
        if type(handle) is not Remote:
            raise ImportError(f"the solution's module {spec.name!r} could not be imported")
        mod = ProxyModule(spec.name)
        names = reply.get("all")
        object.__setattr__(mod, "__all__", [n for n in names if type(n) is str] if type(names) is list else [])
        # where the grader itself finds the module, never the solution's word: a solution that set its own
        # __file__ to a clean copy passed tests that read its source (inspect.getsource(module))
        object.__setattr__(mod, "__file__", self.file)
        if reply.get("pkg"):
            object.__setattr__(mod, "__path__", [])
        object.__setattr__(mod, "__sandgym_handle__", object.__getattribute__(handle, "_id"))
        return mod

    def exec_module(self, module):
        return None


def _is_stdlib_path(path):
    base = os.path.realpath(sys.base_prefix)
    real = os.path.realpath(path) if path else ""
    return real.startswith(base + os.sep) and "-packages" not in real


class SolutionFinder(importlib.abc.MetaPathFinder):
    """Proxies the modules found in the workspace and nowhere else (stdlib and the grader's packages win)."""

    def __init__(self, workspace):
        self.workspace = workspace
        self.tops = set()

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top not in self.tops:
            if "." in fullname or fullname in sys.builtin_module_names:
                return None
            # only the standard library beats the workspace: the project under test wins over a same-named
            # package of the sandbox's Python (six, packaging, ...), as it does in the solution's process
            others = [p for p in sys.path if p not in (self.workspace, "", ".") and _is_stdlib_path(p)]
            if importlib.machinery.PathFinder.find_spec(fullname, others) is not None:
                return None
            if importlib.machinery.FrozenImporter.find_spec(fullname) is not None:
                return None
            if importlib.machinery.PathFinder.find_spec(fullname, [self.workspace]) is None:
                return None
            self.tops.add(top)
        spec = importlib.machinery.ModuleSpec(fullname, _Loader(self.workspace_file(fullname)), is_package=None)
        spec.has_location = False
        return spec

    def workspace_file(self, fullname):
        """The workspace file that defines ``fullname`` as the grader's own import system finds it ("" if none)."""
        path, origin = [self.workspace], ""
        parts = fullname.split(".")
        for i in range(len(parts)):
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), path)
            if spec is None:
                return ""
            path, origin = list(spec.submodule_search_locations or []), str(spec.origin or "")
        return origin


def _getsource(obj, _original=inspect.getsource):
    """``inspect.getsource`` that also reads the source of the solution's functions and classes; the text comes
    from the solution's process, so it is the solution's word (it can patch what reports it). A test that checks a
    constraint on the code reads the file itself: ``module.__file__`` is where the grader found it, and
    ``inspect.getsource(module)`` reads that file (the built-in refactoring tests parse it with ``ast``)."""
    if type(obj) is Remote:
        src = obj._proto("source")
        if type(src) is not str:
            raise TypeError("the solution's source is not text")
        return src
    return _original(obj)


def install(link_dir, workspace, deadline):
    """Route the workspace's modules through the link (call before pytest imports any test module)."""
    global _LINK
    _LINK = Link(link_dir, deadline)
    sys.meta_path.insert(0, SolutionFinder(workspace))
    inspect.getsource = _getsource


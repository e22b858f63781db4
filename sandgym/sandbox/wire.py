"""Plain data across the grading boundary: the codec between the grader and the process that runs the solution.

Runs INSIDE the sandbox (stdlib only), on both sides of the link that ``grader_link.py`` (the grader) and
``solution_host.py`` (the solution's process) talk over. Only exact builtin values cross as values: None, bool,
int, float, complex, str, bytes, list, tuple, dict, set and frozenset, nested. Anything else the solution produces
(its functions, classes, instances) crosses as a *handle*: an id that the grader can only call, read attributes of
or pass back, never compare by value. So an object whose ``__eq__`` always returns True, or whose ``__bool__`` is
always True, never reaches the grader's comparisons: what the grader compares was decoded here, in its own process,
into real builtin values.

Every JSON object on the wire is a tagged node (``{"l": [...]}`` a list, ``{"h": 3}`` a handle, ...); bare JSON
strings, numbers, booleans and null are themselves.
"""

import json
import os
import sys
import time

MAX_DEPTH = 200
"""Nesting deeper than this is refused (in both directions) instead of recursing without bound."""


class WireError(Exception):
    """A value that cannot cross, or a malformed message."""


def encode(value, handle_of, depth=0):
    """The wire form of ``value``; ``handle_of(obj)`` gives the node of anything that is not plain data."""
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH} levels")
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value if -(2**53) < value < 2**53 else {"i": str(value)}
    if t is float:
        return {"f": repr(value)}
    if t is complex:
        return {"c": [repr(value.real), repr(value.imag)]}
    if t is bytes:
        return {"y": value.hex()}
    if t is list:
        return {"l": [encode(v, handle_of, depth + 1) for v in value]}
    if t is tuple:
        return {"t": [encode(v, handle_of, depth + 1) for v in value]}
    if t is dict:
        return {"d": [[encode(k, handle_of, depth + 1), encode(v, handle_of, depth + 1)] for k, v in value.items()]}
    if t is set:
        return {"s": [encode(v, handle_of, depth + 1) for v in value]}
    if t is frozenset:
        return {"z": [encode(v, handle_of, depth + 1) for v in value]}
    return handle_of(value)


_FLOATS = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def _float(text):
    if not isinstance(text, str) or len(text) > 400:
        raise WireError(f"bad float {text!r}")
    return _FLOATS[text] if text in _FLOATS else float(text)


def decode(node, from_tag, depth=0):
    """The value of a wire node, built from builtins only; ``from_tag(tag, payload)`` decodes handle-like nodes."""
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH} levels")
    t = type(node)
    if node is None or t is bool or t is str or t is int:
        return node
    if t is float:  # plain JSON numbers with a fraction never come from encode(); accept them as floats
        return node
    if t is not dict or len(node) != 1:
        raise WireError(f"malformed wire node of type {t.__name__}")
    ((tag, payload),) = node.items()
    d = depth + 1
    if tag == "i":
        if not isinstance(payload, str) or len(payload) > 100_000:
            raise WireError("bad integer")
        return int(payload)
    if tag == "f":
        return _float(payload)
    if tag == "c":
        return complex(_float(payload[0]), _float(payload[1]))
    if tag == "y":
        return bytes.fromhex(payload)
    if tag in ("l", "t", "s", "z"):
        if type(payload) is not list:
            raise WireError(f"malformed {tag!r} node")
        items = [decode(v, from_tag, d) for v in payload]
        return {"l": list, "t": tuple, "s": set, "z": frozenset}[tag](items)
    if tag == "d":
        if type(payload) is not list:
            raise WireError("malformed dict node")
        out = {}
        for pair in payload:
            if type(pair) is not list or len(pair) != 2:
                raise WireError("malformed dict item")
            out[decode(pair[0], from_tag, d)] = decode(pair[1], from_tag, d)
        return out
    return from_tag(tag, payload)


_VALUE_TYPES = {"datetime": ("datetime", "date", "time", "timedelta"), "decimal": ("Decimal",),
                "fractions": ("Fraction",), "pathlib": ("PosixPath", "PurePosixPath"), "uuid": ("UUID",)}
"""Standard value types that cross by value too (exact types only, never a subclass): a test compares them."""
MAX_VALUE_TEXT = 10_000


def encode_value(obj):
    """``{"v": [kind, text]}`` for an exact standard value type (``_VALUE_TYPES``), else None.

    A datetime or time crosses only naive or with a fixed-offset ``timezone`` (another tzinfo is an object)."""
    t = type(obj)
    for module, names in _VALUE_TYPES.items():
        if t.__name__ in names and getattr(sys.modules.get(module), t.__name__, None) is t:
            break
    else:
        return None
    kind = f"{module}.{t.__name__}"
    if kind in ("datetime.datetime", "datetime.time"):
        if obj.tzinfo is not None and type(obj.tzinfo) is not sys.modules["datetime"].timezone:
            return None
        return {"v": [kind, obj.isoformat()]}
    if kind == "datetime.date":
        return {"v": [kind, obj.isoformat()]}
    if kind == "datetime.timedelta":
        return {"v": [kind, [obj.days, obj.seconds, obj.microseconds]]}
    if kind == "fractions.Fraction":
        return {"v": [kind, [str(obj.numerator), str(obj.denominator)]]}
    return {"v": [kind, obj.hex if kind == "uuid.UUID" else str(obj)]}


def decode_value(payload):
    """The value of a ``{"v": ...}`` node's payload, built by the standard constructors from plain text."""
    if type(payload) is not list or len(payload) != 2 or type(payload[0]) is not str:
        raise WireError("malformed value node")
    kind, data = payload
    if len(repr(data)) > MAX_VALUE_TEXT:
        raise WireError(f"a {kind} value over {MAX_VALUE_TEXT} characters")
    module, _, name = kind.partition(".")
    if name not in _VALUE_TYPES.get(module, ()):
        raise WireError(f"unknown value type {kind!r}")
    cls = getattr(__import__(module), name)
    try:
        if kind == "datetime.timedelta":
            return cls(days=int(data[0]), seconds=int(data[1]), microseconds=int(data[2]))
        if kind == "fractions.Fraction":
            return cls(int(data[0]), int(data[1]))
        if type(data) is not str:
            raise TypeError("not text")
        return cls.fromisoformat(data) if module == "datetime" else cls(data)
    except (TypeError, ValueError, ArithmeticError, IndexError) as exc:
        raise WireError(f"bad {kind} value: {exc!r:.200}") from None


def dumps(msg):
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode()


def loads(line):
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"malformed message: {str(exc)[:200]}") from None
    if type(msg) is not dict:
        raise WireError("malformed message: not an object")
    return msg


def read_line(fd, buf, deadline, max_bytes, wait):
    """(line, rest of buf) from ``fd``; ``wait(fd, seconds)`` blocks until readable; WireError on EOF/timeout/size."""

    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no reply before the deadline")
        if not wait(fd, left):
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise WireError("the link was closed")
        buf += chunk
        if len(buf) > max_bytes:
            raise WireError(f"a message over {max_bytes} bytes")
    line, _, rest = buf.partition(b"\n")
    return line, rest


def write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]

"""Typed configs from TOML: nested frozen dataclasses, ``--set a.b=value`` overrides, errors that name the key.

Every entry point has one config dataclass; this module turns a TOML file plus overrides into it, checking
types and unknown keys up front (with a "did you mean" suggestion) before any work starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from sandgym.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

T = TypeVar("T")


def load_toml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist; pass the path of a TOML file (see examples/)")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        line = p.read_bytes()[: e.start].count(b"\n") + 1
        raise ConfigError(f"{p}:{line}: not UTF-8 text (byte 0x{e.object[e.start]:02x}); save the config as "
                          "UTF-8 (e.g. iconv -t utf-8)") from None
    except OSError as e:
        raise ConfigError(f"config file {str(p)!r} cannot be read ({e.strerror or e}); check its permissions") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML ({e}); fix the syntax at that line") from None


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"optim.lr=1e-4"`` -> (["optim", "lr"], 1e-4). Values are parsed as TOML values, else kept as strings."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} has no '='; write it as section.key=value, e.g. optim.lr=1e-4")
    key, raw = item.split("=", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return [k for k in key.strip().split(".") if k], value


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    for item in overrides:
        keys, value = parse_override(item)
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {k!r} is not a section; check the key path")
        node[keys[-1]] = value
    return data


def _section_class(tp: Any) -> Any:
    """The dataclass inside ``tp`` (``X``, ``X | None``), or None."""
    if dataclasses.is_dataclass(tp):
        return tp
    if get_origin(tp) in (Union, types.UnionType):
        for a in get_args(tp):
            if dataclasses.is_dataclass(a):
                return a
    return None


def check_override_keys(cls: type, overrides: Sequence[str]) -> None:
    """ConfigError naming the ``--set`` item whose key path is not a field of ``cls`` (with a suggestion)."""
    for item in overrides:
        keys, _ = parse_override(item)
        if not keys:
            raise ConfigError(f"--set {item!r} has an empty key; write it as section.key=value")
        node: Any = cls
        for i, key in enumerate(keys):
            fields = {f.name: f for f in dataclasses.fields(node)}
            if key not in fields:
                where = ".".join(keys[:i])
                close = difflib.get_close_matches(key, list(fields), n=1)
                hint = f"did you mean {close[0]!r} (--set {'.'.join([*keys[:i], close[0]])}=...)?" if close else \
                    f"known keys{' of [' + where + ']' if where else ''}: {', '.join(fields)}"
                raise ConfigError(f"--set {item!r}: unknown key {'.'.join(keys[: i + 1])!r}; {hint}")
            tp = get_type_hints(node)[key]
            sub = _section_class(tp)
            if i < len(keys) - 1:
                if sub is None:
                    if get_origin(tp) in (dict, Mapping) or tp in (dict, Any):
                        break  # a free-form table: any key below it is allowed
                    raise ConfigError(f"--set {item!r}: {'.'.join(keys[: i + 1])!r} is a value, not a section; "
                                      f"write --set {'.'.join(keys[: i + 1])}=VALUE")
                node = sub


def load_dataclass(cls: type[T], path: str | Path | None, overrides: Sequence[str] = ()) -> T:
    """TOML file (optional) + ``--set`` overrides -> ``cls``; each error names where the bad value came from
    (the file, or the ``--set`` item)."""
    check_override_keys(cls, overrides)
    data = load_toml(path) if path is not None else {}
    override_keys = {".".join(parse_override(item)[0]): item for item in overrides}
    apply_overrides(data, overrides)
    try:
        return from_dict(cls, data)
    except ConfigError as e:
        msg = str(e)
        for key, item in override_keys.items():
            if msg.startswith((f"{key}=", f"{key} ", f"[{key}]")):
                raise ConfigError(f"--set {item!r}: {msg}") from None
        raise ConfigError(f"{path}: {msg}" if path else msg) from None


def from_dict(cls: type[T], data: Mapping[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from a mapping, converting nested sections and checking every key and type."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"[{where or 'config'}] must be a table of keys, got {type(data).__name__}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else key
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(fields)}"
            raise ConfigError(f"unknown config key {path!r}{hint}")
        kwargs[key] = _convert(hints[key], value, path)
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"[{where or 'config'}]: {e}") from e


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        if value is None:
            return None
        errors = []
        for a in members:
            try:
                return _convert(a, value, path)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[-1] if errors else f"{path}: bad value {value!r}")
    if origin is typing.Literal:
        allowed = get_args(tp)
        if value not in allowed:
            close = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{path}={value!r} is not one of {list(allowed)}{hint}")
        return value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path)  # type: ignore[arg-type]
    if origin in (tuple, list, Sequence) or tp in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}={value!r} must be a list, e.g. {path.split('.')[-1]} = [...]")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        return tuple(_convert(item_tp, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping) or tp in (dict,):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path} must be a table, got {value!r}")
        args = get_args(tp)
        vt = args[1] if len(args) == 2 else Any
        return {str(k): _convert(vt, v, f"{path}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}={value!r} must be a number")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}={value!r} must be an integer")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}={value!r} must be true or false")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}={value!r} must be a string (quote it in TOML)")
        return value
    return value


def to_dict(obj: Any) -> Any:
    """A dataclass tree as plain JSON/TOML-friendly data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def to_toml(obj: Any) -> str:
    """Render a dataclass tree as TOML (enough for configs: scalars, lists, nested tables, arrays of tables)."""
    lines: list[str] = []
    _emit(to_dict(obj), [], lines)
    return "\n".join(lines).strip() + "\n"


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_fmt(x)}" for k, x in v.items()) + "}"
    return repr(v)


def _emit(d: Mapping[str, Any], prefix: list[str], lines: list[str]) -> None:
    scalars = {
        k: v
        for k, v in d.items()
        if v is not None
        and not isinstance(v, dict)
        and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))
    }
    if prefix:
        lines.append(f"\n[{'.'.join(prefix)}]")
    for k, v in scalars.items():
        lines.append(f"{k} = {_fmt(v)}")
    for k, v in d.items():
        if isinstance(v, dict):
            _emit(v, [*prefix, k], lines)
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                lines.append(f"\n[[{'.'.join([*prefix, k])}]]")
                for ik, iv in item.items():
                    if iv is not None:
                        lines.append(f"{ik} = {_fmt(iv)}")

"""Typed configs from TOML: nested frozen dataclasses, ``--set a.b=value`` overrides, errors that name the key.

Every entry point has one config dataclass; this module turns a TOML file plus overrides into it, checking
types and unknown keys up front (with a "did you mean" suggestion) before any work starts.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import json
import sys
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

import sandgym.pysyntax as pysyntax
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


def load_dataclass(cls: type[T], path: str | Path | None, overrides: Sequence[str] = (),
                   labels: Mapping[str, str] | None = None, base: Mapping[str, Mapping[str, Any]] | None = None) -> T:
    """TOML file (optional) + ``--set`` overrides -> ``cls``; each error names where the bad value came from
    (the file, or the ``--set`` item; ``labels`` maps an override item to another name for it, e.g. the flag
    ``--temperature 0`` it was made from). ``base`` holds defaults under the file, table by table
    (``{"rollout": {...}}``): a key the file or an override sets wins over it."""
    labels = labels or {}
    check_override_keys(cls, overrides)
    data = load_toml(path) if path is not None else {}
    for table, values in (base or {}).items():
        if isinstance(data.setdefault(table, {}), dict):
            data[table] = {**values, **data[table]}
    override_keys = {".".join(parse_override(item)[0]): item for item in overrides}
    apply_overrides(data, overrides)
    try:
        return from_dict(cls, data)
    except ConfigError as e:
        msg = str(e)
        for key, item in override_keys.items():
            if msg.startswith((f"{key}=", f"{key} ", f"[{key}]")):
                raise ConfigError(f"{labels.get(item, f'--set {item!r}')}: {msg}") from None
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
        default = _default_section(fields[key])
        if default is not None and isinstance(value, Mapping):
            value = _overlay(default, value)
        kwargs[key] = _convert(hints[key], value, path)
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"[{where or 'config'}]: {e}") from e


def _default_section(f: dataclasses.Field[Any]) -> Any:
    """The default of field ``f`` when it is a section (a dataclass instance), else None."""
    if f.default is not dataclasses.MISSING:
        default: Any = f.default
    elif f.default_factory is not dataclasses.MISSING:
        default = f.default_factory()
    else:
        return None
    return default if dataclasses.is_dataclass(default) and not isinstance(default, type) else None


def _overlay(default: Any, table: Mapping[str, Any]) -> dict[str, Any]:
    """A section's table laid over the field's default instance, key by key: a partial table keeps the entry
    point's defaults for the keys it leaves out (``EvalConfig``'s ``[rollout]`` starts from evaluation's defaults,
    ``TrainConfig``'s from training's). Nested sections are overlaid the same way; lists and free-form tables given
    in ``table`` replace the default whole."""
    out: dict[str, Any] = {f.name: getattr(default, f.name) for f in dataclasses.fields(default)}
    for key, value in table.items():
        base = out.get(key)
        if dataclasses.is_dataclass(base) and not isinstance(base, type) and isinstance(value, Mapping):
            out[key] = _overlay(base, value)
        else:
            out[key] = value
    return {k: to_dict(v) if k not in table else v for k, v in out.items()}


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


def toml_value(v: Any) -> str:
    """``v`` written as a TOML value (``true``, ``"text"``, ``[1, 2]``, ``{"a" = 1}``)."""
    return _fmt(v)


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


def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body), whitespace collapsed; {} when the
    source is not available."""

    try:
        tree = pysyntax.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    out: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            out[node.target.id] = " ".join(after.value.value.split())
    return out


@dataclasses.dataclass(frozen=True)
class Flag:
    """A command-line flag derived from a config field: ``--max-new-tokens`` sets ``rollout.max_new_tokens``."""

    key: str
    """The dotted config key it sets."""
    option: str
    type: Any
    default: Any
    help: str


def config_flags(cls: type, *, sections: Sequence[str] = (), skip: Sequence[str] = ()) -> list[Flag]:
    """One flag per value field of ``cls`` and of each section named in ``sections`` (flattened: the field
    ``rollout.max_new_tokens`` is ``--max-new-tokens``), except the keys in ``skip``; help from the fields'
    docstrings, defaults from the field defaults (a section's from its default instance)."""
    out: list[Flag] = []

    def add(node: type, prefix: str, defaults: Any) -> None:
        hints = get_type_hints(node)
        docs = field_docs(node)
        for f in dataclasses.fields(node):  # type: ignore[arg-type]
            key = prefix + f.name
            if key in skip:
                continue
            if f.name in sections and not prefix:
                add(_section_class(hints[f.name]), f"{f.name}.", _field_default(f))
                continue
            if _section_class(hints[f.name]) is not None:
                continue
            default = getattr(defaults, f.name) if defaults is not None else _field_default(f)
            out.append(Flag(key, "--" + f.name.replace("_", "-"), hints[f.name], default, docs.get(f.name, "")))

    add(cls, "", None)
    options = [f.option for f in out]
    dup = sorted({o for o in options if options.count(o) > 1})
    if dup:
        raise ValueError(f"config_flags({cls.__name__}): two fields give the flag(s) {dup}; skip one")
    return out


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def flag_value(tp: Any, raw: str, option: str) -> Any:
    """The command-line string ``raw`` as a value of type ``tp``: lists comma-separated, tables as JSON objects,
    the rest as for ``--set``; ConfigError naming ``option`` when it does not parse."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        tp = members[0] if len(members) == 1 else Any
        origin = get_origin(tp)
    if origin in (tuple, list, Sequence) or tp in (tuple, list):
        args = get_args(tp)
        item = args[0] if args else str
        return [flag_value(item, part.strip(), option) for part in raw.split(",") if part.strip()]
    if origin in (dict, Mapping) or tp is dict:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{option} {raw!r} is not JSON ({e.msg}); pass an object, e.g. "
                              f"{option} '{{\"system_prompt\": \"...\"}}'") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{option} {raw!r} is a {type(value).__name__}; pass a JSON object {{...}}")
        return value
    if tp is str or origin is typing.Literal:
        return raw
    if tp in (int, float):
        try:
            return tp(raw)
        except ValueError:
            raise ConfigError(f"{option} {raw!r} must be {'an integer' if tp is int else 'a number'}") from None
    return parse_override(f"v={raw}")[1]


def flag_overrides(flags: Sequence[Flag], values: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The flags given on the command line (``values``: option -> its parsed value, absent when not given) as
    ``key=value`` overrides, and a label per override naming the flag (for :func:`load_dataclass`'s errors)."""
    overrides: list[str] = []
    labels: dict[str, str] = {}
    for flag in flags:
        if flag.option not in values:
            continue
        value = values[flag.option]
        item = f"{flag.key}={_fmt(value)}"
        overrides.append(item)
        labels[item] = f"{flag.option} {_fmt(value) if not isinstance(value, str) else value}"
    return overrides, labels

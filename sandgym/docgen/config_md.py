"""``docs/CONFIG.md``: every table and key of the TOML configs, from the config dataclasses and their field
docstrings (the string literal under each field, as :func:`sandgym.configs.field_docs` reads it)."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin, get_type_hints

from sandgym.configs import field_docs, toml_value
from sandgym.docgen.markdown import blocks, code, md, paragraphs, table
from sandgym.evaluate import cli as eval_cli
from sandgym.evaluate.config import EvalConfig
from sandgym.train.config import DOMAIN_ROLLOUT_KEYS, TrainConfig

COMMAND = "python -m sandgym.docgen"

_NOTES: dict[tuple[type, str], str] = {
    (TrainConfig, "domains.mix.rollout"): "Keys: " + ", ".join(f"`{k}`" for k in DOMAIN_ROLLOUT_KEYS) + ".",
}
"""Generated additions to a key's meaning (the allowed keys of a free-form table)."""


class UndocumentedField(ValueError):
    """A config field without a docstring: the reference cannot say what it means."""


@dataclass(frozen=True)
class Table:
    """One TOML table of a config: its name (``model``, ``domains.mix``; "" for the top level), whether it is an
    array of tables, the dataclass behind it, the default instance its defaults come from (None: the class's own
    field defaults) and the dotted key prefix of its keys."""

    name: str
    cls: type
    default: Any
    array: bool = False


def _member(tp: Any) -> Any:
    """``X`` of ``X | None``, else ``tp``."""
    if get_origin(tp) in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        return members[0] if len(members) == 1 else tp
    return tp


def _array_class(tp: Any) -> Any:
    """The dataclass of ``tuple[X, ...]`` (an array of tables), else None."""
    args = get_args(tp)
    if get_origin(tp) is tuple and args and dataclasses.is_dataclass(args[0]):
        return args[0]
    return None


def type_name(tp: Any) -> str:
    """How a field's type reads in the reference (TOML terms)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        inner = " or ".join(type_name(a) for a in members)
        return f"{inner} (optional)" if type(None) in get_args(tp) else inner
    if origin is typing.Literal:
        return "one of " + ", ".join(code(toml_value(a)) for a in get_args(tp))
    if _array_class(tp) is not None:
        return "array of tables"
    if origin in (tuple, list) or tp in (tuple, list):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        return f"list of {type_name(args[0])}s" if args else "list"
    if origin in (dict, Mapping) or tp is dict:
        return "table"
    return {int: "integer", float: "number", str: "string", bool: "boolean"}.get(tp, getattr(tp, "__name__", str(tp)))


def default_text(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, (list, tuple)) and value and all(dataclasses.is_dataclass(v) for v in value):
        value = [dataclasses.asdict(v) for v in value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        return "; ".join(code("{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items() if x not in (None, {}, ""))
                              + "}") for v in value)
    return code(toml_value(value))


def _field_default(f: dataclasses.Field[Any], instance: Any) -> Any:
    if instance is not None:
        return getattr(instance, f.name)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def tables(cls: type, name: str = "", default: Any = None, array: bool = False) -> Iterator[Table]:
    """The config's tables, depth first: the top level (or ``name``), then each section field's table."""
    yield Table(name, cls, default, array)
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        sub = f"{name}.{f.name}" if name else f.name
        tp = _member(hints[f.name])
        if dataclasses.is_dataclass(tp):
            yield from tables(tp, sub, _field_default(f, default))  # type: ignore[arg-type]
        elif (element := _array_class(tp)) is not None:
            yield from tables(element, sub, None, array=True)


def is_section(tp: Any) -> bool:
    return dataclasses.is_dataclass(_member(tp))


def rows(config: type, t: Table, flags: Mapping[str, str]) -> list[tuple[str, ...]]:
    """One row per value key of table ``t``: key, type, default, meaning (and the flag setting it, when ``flags``
    has any). Raises :class:`UndocumentedField` for a key without a docstring."""
    hints = get_type_hints(t.cls)
    docs = field_docs(t.cls)
    out: list[tuple[str, ...]] = []
    for f in dataclasses.fields(t.cls):  # type: ignore[arg-type]
        if is_section(hints[f.name]):
            continue
        key = f"{t.name}.{f.name}" if t.name else f.name
        if f.name not in docs:
            raise UndocumentedField(
                f"{t.cls.__module__}.{t.cls.__name__}.{f.name} (config key {key!r}) has no docstring; write one "
                f"(a string literal on the line under the field: what it means, units, allowed values), then run "
                f"`{COMMAND}`")
        meaning = md(docs[f.name])
        if (config, key) in _NOTES:
            meaning += " " + _NOTES[(config, key)]
        row = (code(f.name), type_name(hints[f.name]), default_text(_field_default(f, t.default)), meaning)
        out.append((*row, code(flags[key]) if key in flags else "") if flags else row)
    return out


def section(config: type, t: Table, flags: Mapping[str, str], note: str = "") -> list[str]:
    """A table's heading, its class docstring (and ``note``), and its keys."""
    heading = "Top-level keys" if not t.name else f"`[[{t.name}]]`" if t.array else f"`[{t.name}]`"
    lines = [f"### {heading}", ""]
    if t.name and t.cls.__doc__ and not t.cls.__doc__.startswith(t.cls.__name__ + "("):
        lines += blocks(paragraphs(t.cls.__doc__))
    if note:
        lines += [note, ""]
    header = ("key", "type", "default", "meaning", *(("flag",) if flags else ()))
    body = rows(config, t, flags)
    return [*lines, *(table(header, body) if body else ["(Only the tables below.)"]), ""]


def eval_flags() -> dict[str, str]:
    """``sandgym eval``'s flag for each config key it sets (read from its parser)."""
    parser = argparse.ArgumentParser(prog="sandgym")
    eval_cli.add_commands(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for action in sub.choices["eval"]._actions:
        if action.dest.startswith("flag:") and action.option_strings:
            out[action.dest.removeprefix("flag:")] = action.option_strings[0]
    return out


INTRO = f"""# Config reference

<!-- Generated by `{COMMAND}` from the config dataclasses and their field docstrings
(sandgym/train/config.py, sandgym/rollout/spec.py, sandgym/evaluate/config.py): edit those, then rerun it.
tests/test_reference_docs.py fails when this file is stale. -->

sandgym is configured by TOML files, one config per entry point:

- a **training config** (`TrainConfig`) is read by `sandgym train`, `sandgym sft`, `sandgym sweep`,
  `sandgym demo --config`, `sandgym feedback train --config`, `sandgym feedback simulate` and
  `sandgym transfer --config`; the files under `examples/` are training configs;
- an **evaluation config** (`EvalConfig`) is read by `sandgym eval CONFIG`, whose flags set the same keys.

Every key is optional except where the default says *required*: a key left out keeps its default, and a table
that gives some keys keeps the defaults of the others. `--set KEY=VALUE` overrides one key on the command line
(`--set optim.lr=1e-4`, `--set 'model.name="my-model"'`; the value is read as TOML, and a bare word as a string);
`--print-config` prints the resolved config as TOML and exits. An unknown key, a value of the wrong type or one
out of range is an error that names the key, the value and the fix, before any work starts.

A small training config, and the resolved config it gives (every key, with its default where the file gives
none):

<!-- doc-test: file my_run.toml -->
```toml
out_dir = "runs/my_run"
init = "sft"

[model]
name = "smollm2-135m"
lora_r = 8

[rollout]
max_turns = 2

[[domains.mix]]
suite = "coding/strings:train"

[optim]
steps = 4
```

<!-- doc-test: run -->
```bash
sandgym train my_run.toml --set optim.lr=1e-4 --print-config
```

An evaluation config, resolved the same way (flags and `--set` win over the file):

<!-- doc-test: file my_eval.toml -->
```toml
policy = "oracle"
suites = ["coding/strings:heldout"]
samples = 2

[rollout]
max_turns = 2
```

<!-- doc-test: run -->
```bash
sandgym eval my_eval.toml --n-tasks 4 --print-config
```
"""


def render() -> str:
    """The whole of docs/CONFIG.md."""
    train = list(tables(TrainConfig))
    lines = [INTRO, "## Training config (`sandgym train`, `sft`, `sweep`, ...)", "",
             *blocks(paragraphs(TrainConfig.__doc__)),
             "Tables: " + ", ".join(f"`[[{t.name}]]`" if t.array else f"`[{t.name}]`" for t in train if t.name) + ".",
             ""]
    for t in train:
        lines += section(TrainConfig, t, {})
    flags = eval_flags()
    lines += ["## Evaluation config (`sandgym eval`)", "", *blocks(paragraphs(EvalConfig.__doc__)),
              "Each key can also be given as the flag in the last column (`sandgym eval --help`).", ""]
    for t in tables(EvalConfig):
        note = ("The same keys as the training config's `[rollout]`; evaluation's defaults differ in "
                "`max_new_tokens`, `max_total_tokens` and `temperature`.") if t.name == "rollout" else ""
        lines += section(EvalConfig, t, flags, note)
    text = "\n".join(lines)
    return text.rstrip("\n") + "\n"

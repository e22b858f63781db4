"""Resolve suite specs to tasks: built-in suites, plugin suites, JSONL files and task folders.

A spec is ``<domain>[/<family>][:<split>][@<n>][?<option>=<value>[&...]]`` (``coding``, ``coding:train``,
``coding/strings:heldout@10``, ``long_context/needle``, ``long_context:heldout@8?tokens=4096``) or a path
(``tasks.jsonl``, a task folder, a directory of task folders), optionally followed by ``:<split>`` and/or ``@<n>``.
Options go to the suite's callable as keywords (integers as ints): long-context suites take ``tokens`` (document
length) and ``placement`` (``inline`` or ``file``).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.load import load_path
from sandgym.tasks.suites import builtin_suites, describe_builtin, domain_suite, families, suite_members
from sandgym.tasks.suites.base import FamilySpec, check_options
from sandgym.tasks.task import SPLITS, Task

ENTRY_POINT_GROUP = "sandgym.tasks"
BUILTIN_ENTRY_POINT = "sandgym.tasks.suites:builtin_suites"
DEFAULT_PER_FAMILY = 4
"""Tasks per family and split when neither ``n`` nor ``@n`` is given."""
DEFAULT_PLUGIN_N = 8
"""Tasks per split of a plugin suite when neither ``n`` nor ``@n`` is given."""
DEFAULT_TASK_SEED = 1
"""The seed that picks a generated suite's tasks when a command is given none: ``sandgym eval --task-seed`` and
``sandgym serve --task-seed`` both default to it, so an evaluation through a served suite draws the server's tasks."""

SuiteFn = Callable[[str, int, int, "int | None"], list[Task]]


@dataclass(frozen=True)
class SuiteSpec:
    """A parsed suite spec: ``name`` (suite name or path), optional ``split`` and count cap ``n``."""

    name: str
    split: str | None = None
    n: int | None = None
    options: tuple[tuple[str, int | str], ...] = ()
    """``?key=value&...`` of the spec, in order: keyword options of the suite callable."""

    def __str__(self) -> str:
        opts = "?" + "&".join(f"{k}={v}" for k, v in self.options) if self.options else ""
        return (self.name + (f":{self.split}" if self.split else "") + (f"@{self.n}" if self.n is not None else "")
                + opts)


def _parse_options(spec: str, text: str) -> tuple[tuple[str, int | str], ...]:
    out: dict[str, int | str] = {}
    for part in text.split("&"):
        key, eq, value = part.partition("=")
        if not eq or not key.isidentifier() or not value:
            raise TaskError(f"suite spec {spec!r}: option {part!r} after '?' must be key=value, e.g. ?tokens=4096")
        if key in out:
            raise TaskError(f"suite spec {spec!r}: option {key!r} is given twice; keep one")
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return tuple(out.items())


def parse_suite_spec(spec: str) -> SuiteSpec:
    """Parse ``name[:split][@n]``; TaskError names the bad part and the fix.

    >>> parse_suite_spec("coding/strings:heldout@5")
    SuiteSpec(name='coding/strings', split='heldout', n=5)
    """
    text = spec.strip()
    if not text:
        raise TaskError("empty suite spec; pass e.g. 'coding:train' or a path to a .jsonl file")
    options: tuple[tuple[str, int | str], ...] = ()
    if "?" in text and not Path(text).exists():
        text, _, opts = text.partition("?")
        options = _parse_options(spec, opts)
    n = None
    if "@" in text:
        text, _, count = text.rpartition("@")
        if not count.isdigit() or int(count) <= 0:
            raise TaskError(f"suite spec {spec!r}: count {count!r} after '@' must be a positive integer, e.g. @10")
        n = int(count)
    split = None
    if ":" in text:
        head, _, tail = text.rpartition(":")
        if tail in SPLITS:
            text, split = head, tail
        elif "/" not in tail and "\\" not in tail and not Path(text).exists():
            close = difflib.get_close_matches(tail, SPLITS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise TaskError(f"suite spec {spec!r}: split {tail!r} is not one of {SPLITS}.{hint}")
    return SuiteSpec(text, split, n, options)


@functools.lru_cache(maxsize=1)
def _plugin_suites() -> tuple[tuple[str, SuiteFn, str], ...]:
    found: list[tuple[str, SuiteFn, str]] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.value.replace(" ", "") == BUILTIN_ENTRY_POINT:
            continue
        try:
            provider = ep.load()
            mapping = provider() if callable(provider) else provider
        except Exception as exc:  # a broken third-party package must say which one
            raise TaskError(
                f"plugin suite entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP!r} failed to load: "
                f"{exc!r}; fix that package or uninstall it"
            ) from exc
        if not isinstance(mapping, Mapping):
            raise TaskError(f"plugin entry point {ep.name!r} ({ep.value}) returned {type(mapping).__name__}; it must "
                            "return a mapping suite_name -> callable(split, n, seed, difficulty) -> list[Task]")
        for name, fn in mapping.items():
            found.append((str(name), fn, ep.value))
    return tuple(found)


def _plugin_domains(taken: Mapping[str, Any]) -> dict[str, list[FamilySpec]]:
    """Plugin suites named ``owner/x`` grouped by ``owner``, for owners that are not a suite already; a suite
    callable with ``unseen = True`` (an attribute) is an unseen family: in its domain's heldout split only."""
    domains: dict[str, list[FamilySpec]] = {}
    for name, fn, origin in _plugin_suites():
        owner, sep, family = name.partition("/")
        if sep and family and owner not in taken:
            doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
            domains.setdefault(owner, []).append(FamilySpec(family, owner, doc[0] if doc else f"from {origin}",
                                                            bool(getattr(fn, "unseen", False)), fn))
    return domains


def suites() -> dict[str, SuiteFn]:
    """Every known suite: built-in first, then plugins (a plugin may not shadow a built-in name), then one domain
    suite per plugin owner (``owner/x`` and ``owner/y`` make ``owner``: all its families, split evenly)."""

    out: dict[str, SuiteFn] = dict(builtin_suites())
    for name, fn, origin in _plugin_suites():
        if name in out:
            raise TaskError(f"plugin suite {name!r} from {origin} clashes with an existing suite; rename it")
        out[name] = fn
    for owner, members in _plugin_domains(out).items():
        out[owner] = domain_suite(members)
    return out


def list_suites() -> dict[str, str]:
    """Suite name -> one-line description (built-in and plugin suites, plugin domains)."""

    out = describe_builtin()
    for name, fn, origin in _plugin_suites():
        doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
        out[name] = (doc[0] if doc else "plugin suite") + f" (from {origin})"
    for owner, members in _plugin_domains(out).items():
        names = [f.name + ("*" if f.unseen else "") for f in members]
        out[owner] = f"all {owner} plugin families ({', '.join(names)}; * = unseen, heldout only)"
    return out


def _default_n(name: str) -> int:
    fams = families()
    if any(f.suite == name for f in fams):
        return DEFAULT_PER_FAMILY
    members = suite_members().get(name, [])
    return DEFAULT_PER_FAMILY * len(members) if members else DEFAULT_PLUGIN_N


def load_suite(
    spec: str, *, n: int | None = None, seed: int = 0, difficulty: int | None = None, **options: Any
) -> list[Task]:
    """Resolve ``spec`` (suite name or path, see the module docstring) to a list of tasks.

    ``n`` is the total number of tasks (over both splits when the spec names none); ``@n`` in the spec caps it.
    Without either, each family gives ``DEFAULT_PER_FAMILY`` tasks per split. ``difficulty`` None mixes levels.
    A domain suite's train split leaves out families marked ``unseen``; its heldout split includes them.
    ``options`` go to the suite callable (long-context suites take ``tokens=`` and ``placement=``).
    """
    parsed = SuiteSpec(spec) if Path(spec).exists() else parse_suite_spec(spec)
    clash = sorted(set(options) & {k for k, _ in parsed.options})
    if clash:
        raise TaskError(f"suite spec {spec!r} sets option(s) {clash} that the caller also passes; set them once")
    options = {**dict(parsed.options), **options}
    path = Path(parsed.name)
    if path.exists():
        if options:
            raise TaskError(f"options {sorted(options)} apply to generated suites, not to the file {spec!r}; drop them")
        loaded = load_path(path)
        if parsed.split:
            loaded = [t for t in loaded if t.split == parsed.split]
        cap = min(x for x in (n, parsed.n, len(loaded)) if x is not None)
        return loaded[:cap]
    table = suites()
    if parsed.name not in table:
        close = difflib.get_close_matches(parsed.name, list(table), n=3)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise TaskError(
            f"unknown suite {parsed.name!r} (from spec {spec!r}).{hint} Known suites: {', '.join(table)}; "
            "or pass the path of a .jsonl file or a task folder (see `sandgym tasks list`)"
        )
    if difficulty is not None and not isinstance(difficulty, int):
        raise TaskError(f"difficulty={difficulty!r} must be an int (1 = very easy) or None to mix levels")
    splits = [parsed.split] if parsed.split else list(SPLITS)
    if n is None:
        total = parsed.n if parsed.n is not None else _default_n(parsed.name) * len(splits)
    else:
        total = min(n, parsed.n) if parsed.n is not None else n
    if total < 0:
        raise TaskError(f"n={total} must be >= 0")
    fn = table[parsed.name]
    check_options(parsed.name, fn, options)
    tasks: list[Task] = []
    for k, split in enumerate(splits):
        count = total // len(splits) + (1 if k < total % len(splits) else 0)
        made = fn(split, count, seed, difficulty, **options)
        for t in made:
            if not isinstance(t, Task):
                raise TaskError(f"suite {parsed.name!r} returned {type(t).__name__}, not a Task; return Task objects")
        tasks += made
    return tasks


"""The built-in, procedurally generated task suites.

Every family is a ``FamilySpec``; ``builtin_suites()`` is the entry point (group ``sandgym.tasks``) that exposes
them as suites: ``<domain>`` (all its families) and ``<domain>/<family>``. A suite is a callable
``(split, n, seed, difficulty) -> list[Task]``; domain suites leave ``unseen`` families out of the train split.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.suites import (
    coding_basic,
    coding_examples,
    coding_fix,
    coding_repo,
    coding_spec,
    long_context,
    service_errors,
    service_leak,
    service_notify,
    service_queue,
    service_slow,
)
from sandgym.tasks.suites.base import MAX_DIFFICULTY, FamilySpec, check_options
from sandgym.tasks.task import Task

SuiteFn = Callable[[str, int, int, "int | None"], list[Task]]
"""A suite: ``(split, n, seed, difficulty) -> list[Task]`` with split "train" or "heldout"."""


def families() -> list[FamilySpec]:
    """Every built-in family, coding first."""

    return [
        *coding_basic.FAMILIES,
        *coding_spec.FAMILIES,
        *coding_fix.FAMILIES,
        *coding_examples.FAMILIES,
        *coding_repo.FAMILIES,
        *service_queue.FAMILIES,
        *service_leak.FAMILIES,
        *service_slow.FAMILIES,
        *service_errors.FAMILIES,
        *service_notify.FAMILIES,
        *long_context.FAMILIES,
    ]


def get_family(domain: str, name: str) -> FamilySpec:
    """The family ``domain/name``; TaskError with a suggestion when it does not exist."""
    for fam in families():
        if fam.domain == domain and fam.name == name:
            return fam

    known = [f.suite for f in families()]
    close = difflib.get_close_matches(f"{domain}/{name}", known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise TaskError(f"unknown family {domain}/{name!r}; known: {', '.join(known)}.{hint}")


def split_evenly(n: int, parts: int) -> list[int]:
    """``n`` items over ``parts`` buckets, earlier buckets taking the remainder (e.g. 5 over 3 -> 2, 2, 1)."""
    return [n // parts + (1 if k < n % parts else 0) for k in range(parts)]


def domain_suite(members: list[FamilySpec]) -> SuiteFn:
    """All families of a domain; ``n`` is the total, split evenly; unseen families only in heldout.

    Keyword options (e.g. ``tokens``, ``placement`` of long-context families) are passed to every family.
    """

    def make(split: str, n: int, seed: int, difficulty: int | None, **options: Any) -> list[Task]:
        chosen = [f for f in members if split == "heldout" or not f.unseen]
        out: list[Task] = []
        for fam in chosen:
            check_options(fam.suite, fam.make, options)
        for fam, k in zip(chosen, split_evenly(n, len(chosen)), strict=True):
            out += fam.make(split, k, seed, difficulty, **options)
        return out

    return make


def suite_members() -> dict[str, list[FamilySpec]]:
    """Each multi-family suite -> its families: a domain (``coding``: its families without a group) and each group
    (``coding/stack``)."""
    fams = families()
    out: dict[str, list[FamilySpec]] = {}
    for f in fams:
        out.setdefault(f"{f.domain}/{f.group}" if f.group else f.domain, []).append(f)
    return out


def builtin_suites() -> Mapping[str, SuiteFn]:
    """Entry point of the ``sandgym.tasks`` group: suite name -> suite callable."""
    suites: dict[str, SuiteFn] = {name: domain_suite(members) for name, members in suite_members().items()}
    for fam in families():
        suites[fam.suite] = fam.make
    return suites


def describe_builtin() -> dict[str, str]:
    """One-line descriptions of the built-in suites."""
    fams = families()
    out: dict[str, str] = {}
    for name, members in suite_members().items():
        names = [f.name + ("*" if f.unseen else "") for f in members]
        what = f"the {name} families graded by a service stack" if "/" in name else f"all {name} families"
        out[name] = f"{what} ({', '.join(names)}; * = unseen, heldout only)"
    for fam in fams:
        out[fam.suite] = fam.description + (" [unseen]" if fam.unseen else "")
    return out


__all__ = ["MAX_DIFFICULTY", "FamilySpec", "SuiteFn", "builtin_suites", "describe_builtin", "domain_suite", "families",
           "get_family", "suite_members"]

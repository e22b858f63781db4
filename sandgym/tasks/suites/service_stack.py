"""Shared machinery of the stack families (``service_leak``, ``service_slow``, ``service_errors``,
``service_notify``): the agent's HTTP service runs under load beside the stack of ``sandgym.tasks.stack`` (log
collector, Prometheus scrape, alert evaluator), and an alert decides what the unit tests cannot see.

Each family gives, per instance: a workspace (``service/`` with the ``web.py`` fixture and the agent's
``app.py``), the reference files, the naive files (``StackInstance.naive``: a fix that passes every probe, which
is what the visible tests check, and fires an alert or fails a queue check), and a ``StackSpec``. Difficulty: 1
spells out the requirement and the alert it must keep quiet, 2 states the requirement, 3 only the goal; 4 is 3
without visible tests. Train and heldout use different services (``ServiceVariant.split``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from sandgym.tasks.stack import WEB, StackSpec, stack_metadata, stack_tests
from sandgym.tasks.suites.base import MAX_DIFFICULTY, FamilySpec, coding_task, generate
from sandgym.tasks.task import VISIBLE_NOTE, Task, TaskLimits

__all__ = ["STACK_NOTE", "ServiceVariant", "StackInstance", "stack_family", "fill"]


def fill(text: str, **values: object) -> str:
    """Replace every ``@KEY@`` of ``text`` by ``str(values[KEY])``."""
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    return text


STACK_NOTE = (
    "Grading starts your service (`python -m service.app`; `service/web.py` is a fixture that grading restores) "
    "and drives it with a load generator beside a log collector (the JSON records `web.log` writes to stdout), a "
    "Prometheus scrape of `/metrics` and an alert evaluator: alerts on the error rate (failed or wrong replies "
    "plus ERROR records per request), the p95 latency, memory growth over the load and restarts must stay quiet."
)


@dataclass(frozen=True)
class ServiceVariant:
    """One service of a family: its names, and the split that may draw it."""

    key: str
    split: str
    words: Mapping[str, str] = field(default_factory=dict)
    """Names filled into the family's sources and prompt (``@KEY@``)."""


@dataclass(frozen=True)
class StackInstance:
    """What a family's generator returns for one instance (the shared builder makes the Task)."""

    files: Mapping[str, str]
    """The starting workspace besides ``service/web.py`` (added here)."""
    reference: Mapping[str, str]
    naive: Mapping[str, str]
    """A fix that passes every probe (the visible tests) and is caught by an alert or a queue check."""
    spec: StackSpec
    """Its stack; the shared builder adds the ``service/web.py`` fixture."""
    prompt: str
    """What to do; the shared builder adds the stack note and the visible-tests note."""
    caught_by: tuple[str, ...]
    """The hidden tests that fail on the naive fix (test names)."""
    entry_file: str = "service/app.py"
    """The file the reference changes."""
    visible: Mapping[str, str] = field(default_factory=dict)
    """Visible tests besides the probes (levels 1-3)."""


OneFn = Callable[[random.Random, ServiceVariant, int], StackInstance]


def _task(family: str, variants: tuple[ServiceVariant, ...], one: OneFn, rng: random.Random, split: str, d: int,
          i: int, seed: int) -> Task:
    v = rng.choice([x for x in variants if x.split == split])
    inst = one(rng, v, d)
    spec = replace(inst.spec, fixtures={"service/web.py": WEB, **inst.spec.fixtures})
    files = {"service/__init__.py": f'"""The {v.key} service."""\n', "service/web.py": WEB, **inst.files}
    prompt = inst.prompt + " " + STACK_NOTE
    visible: dict[str, str] = {}
    if d < MAX_DIFFICULTY:
        (src,) = stack_tests(spec, visible=True)[0].values()
        visible = {"test_visible.py": src, **inst.visible}
        prompt += " " + VISIBLE_NOTE
    tests, n = stack_tests(spec)
    meta = {"naive": dict(inst.naive), "caught_by": list(inst.caught_by), "service": v.key}
    return coding_task(
        family=family, split=split, seed=seed, difficulty=d, index=i, unseen=False, prompt=prompt,
        tests=tests, expected_tests=n, reference_files=dict(inst.reference), files=files, visible_tests=visible,
        entry_file=inst.entry_file, key=f"{v.key}-d{min(d, 3)}",
        limits=TaskLimits(max_turns=10 + 4 * d, exec_timeout_s=40.0, episode_timeout_s=600.0),
        extra_metadata=stack_metadata(spec, meta))


def stack_family(name: str, description: str, variants: tuple[ServiceVariant, ...], one: OneFn) -> FamilySpec:
    """A ``FamilySpec`` whose instances are built by ``one(rng, variant, difficulty)``."""

    def make(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
        return generate(name, split, n, seed, difficulty,
                        lambda rng, sp, d, i, s: _task(name, variants, one, rng, sp, d, i, s))

    return FamilySpec(name, "coding", description, False, make, group="stack")

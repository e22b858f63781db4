"""Shared machinery of the built-in suites: family specs, seeded randomness, and builders of coding tasks."""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.suites.reference import call_args, copy_value, run_reference
from sandgym.tasks.suites.traps import default_traps, trap_file, trap_tests
from sandgym.tasks.task import VISIBLE_NOTE, Isolation, Reference, Task, TaskLimits, Verifier

MAX_DIFFICULTY = 4
"""Every built-in family accepts difficulty 1 (very easy: one-line functions, ~1K-token documents) .. 4."""

MakeFn = Callable[[str, int, int, "int | None"], list[Task]]


@dataclass(frozen=True)
class FamilySpec:
    """A procedurally generated task family.

    ``make(split, n, seed, difficulty)`` returns ``n`` tasks of ``split`` ("train" or "heldout"); the same
    arguments always give identical tasks, and train and heldout instances never share a problem.
    ``difficulty=None`` cycles through 1..``max_difficulty``.
    """

    name: str
    domain: str
    description: str
    unseen: bool
    make: MakeFn
    max_difficulty: int = MAX_DIFFICULTY
    group: str = ""
    """A family with a group is left out of its domain's suite and belongs to the suite ``<domain>/<group>``
    instead (the stack families: ``coding/stack``, whose grading runs a service under load for about a second)."""

    @property
    def suite(self) -> str:
        """The suite name of this family, ``<domain>/<family>``."""
        return f"{self.domain}/{self.name}"


def check_args(family: str, split: str, n: int, difficulty: int | None) -> None:
    """Raise TaskError naming the bad argument and the allowed values."""
    if split not in ("train", "heldout"):
        raise TaskError(f"{family}: split={split!r} is not one of ('train', 'heldout'); pick one of them")
    if n < 0:
        raise TaskError(f"{family}: n={n} must be >= 0")
    if difficulty is not None and not 1 <= difficulty <= MAX_DIFFICULTY:
        raise TaskError(f"{family}: difficulty={difficulty} must be between 1 and {MAX_DIFFICULTY}")


def check_options(name: str, fn: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """TaskError when ``fn`` (a suite or family ``make``) does not accept the keyword ``options``."""
    if not options:
        return
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(options) - set(params))
    if unknown:
        accepted = [p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY]
        raise TaskError(
            f"suite {name!r} does not take option(s) {unknown}; it accepts {accepted or 'no options'} "
            "(tokens= and placement= apply to long_context suites)"
        )


def rng_for(family: str, split: str, seed: int, difficulty: int, index: int) -> random.Random:
    """A generator that depends only on its arguments (string seeds are hashed with SHA-512, not hash())."""
    return random.Random(f"sandgym/{family}/{split}/{seed}/{difficulty}/{index}")


def level(difficulty: int | None, index: int) -> int:
    """The difficulty of task ``index``: the one asked for, or cycling 1..MAX_DIFFICULTY when None."""
    return difficulty if difficulty is not None else 1 + index % MAX_DIFFICULTY


def generate(
    family: str, split: str, n: int, seed: int, difficulty: int | None, one: Callable[..., Task]
) -> list[Task]:
    """Call ``one(rng, split, difficulty, index, seed)`` for each of ``n`` instances."""
    check_args(family, split, n, difficulty)
    out = []
    for i in range(n):
        d = level(difficulty, i)
        out.append(one(rng_for(family, split, seed, d, i), split, d, i, seed))
    return out


def task_id(domain: str, family: str, split: str, seed: int, difficulty: int, index: int) -> str:
    return f"{domain}/{family}/{split}/d{difficulty}/s{seed}-{index}"


# --------------------------------------------------------------------------------------------------------------
# Coding tasks: a function (or class) problem, its reference source, and hidden pytest files generated from cases.


@dataclass(frozen=True)
class FuncProblem:
    """One function to write: its name, signature, description, reference source and test inputs."""

    key: str
    """Identifies the problem (template + parameters); train and heldout never share a key."""
    name: str
    params: str
    """The parameter list with annotations, e.g. ``"s: str"``."""
    returns: str
    doc: str
    body: str
    """The reference body, indented by four spaces (may span lines)."""
    cases: tuple[tuple[Any, ...], ...]
    helpers: str = ""
    """Extra reference source placed before the function (imports, helper functions)."""
    traps: tuple[tuple[Any, ...], ...] = ()
    """Edge-case inputs graded apart from ``cases`` (see ``sandgym.tasks.suites.traps``)."""
    shown: tuple[tuple[Any, ...], ...] = ()
    """Inputs drawn apart from ``cases`` for the visible tests and the prompt's example, so that what the agent is
    shown is never graded; empty: the first two ``cases`` are shown and left out of the graded ones."""

    @property
    def signature(self) -> str:
        return f"def {self.name}({self.params}) -> {self.returns}:"

    @property
    def source(self) -> str:
        head = f"{self.helpers.rstrip()}\n\n\n" if self.helpers.strip() else ""
        return f'{head}{self.signature}\n    """{self.doc}"""\n{self.body.rstrip()}\n'

    @property
    def stub(self) -> str:
        return f'{self.signature}\n    """{self.doc}"""\n    raise NotImplementedError\n'


def function_tests(name: str, source: str, cases: Sequence[tuple[Any, ...]], module: str = "solution") -> str:
    """A pytest file with one test function per case; expected values come from the reference."""
    fn = run_reference(source, name)
    lines = [f"from {module} import {name}", ""]
    for i, args in enumerate(cases):
        expected = fn(*[copy_value(a) for a in args])
        lines += ["", f"def test_{name}_{i}():", f"    assert {name}({call_args(args)}) == {expected!r}", ""]
    return "\n".join(lines).rstrip() + "\n"


def example_line(name: str, source: str, args: tuple[Any, ...]) -> str:
    fn = run_reference(source, name)
    return f"{name}({call_args(args)}) == {fn(*[copy_value(a) for a in args])!r}"


def coding_task(
    *,
    family: str,
    split: str,
    seed: int,
    difficulty: int,
    index: int,
    unseen: bool,
    prompt: str,
    tests: Mapping[str, str],
    expected_tests: int,
    reference_files: Mapping[str, str],
    files: Mapping[str, str],
    visible_tests: Mapping[str, str] | None = None,
    entry_file: str = "solution.py",
    key: str,
    max_turns: int | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    traps: Mapping[str, str] | None = None,
    expected_traps: int = 0,
    limits: TaskLimits | None = None,
    isolation: Isolation = "process",
) -> Task:
    """Assemble a coding Task with a ``tests`` verifier (``traps``: hidden edge-case tests graded apart)."""
    metadata: dict[str, Any] = {"entry_file": entry_file, "problem": key, "seed": seed}
    metadata.update(extra_metadata or {})
    return Task(
        id=task_id("coding", family, split, seed, difficulty, index),
        domain="coding",
        family=family,
        split=split,  # type: ignore[arg-type]
        prompt=prompt,
        verifier=Verifier(kind="tests", tests=dict(tests), expected_tests=expected_tests,
                          traps=dict(traps or {}) if expected_traps else {}, expected_traps=expected_traps,
                          isolation=isolation),
        files=dict(files),
        visible_tests=dict(visible_tests or {}),
        reference=Reference(files=dict(reference_files)),
        limits=limits or TaskLimits(max_turns=max_turns or (4 + 2 * difficulty)),
        difficulty=difficulty,
        unseen=unseen,
        metadata=metadata,
    )


def function_task(
    problem: FuncProblem,
    *,
    family: str,
    split: str,
    seed: int,
    difficulty: int,
    index: int,
    unseen: bool = False,
    intro: str | None = None,
    starting_source: str | None = None,
    example: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> Task:
    """A task whose answer is one function in ``solution.py`` (hidden tests: one test per case, plus traps).

    No input the agent is shown (the visible tests' cases and the prompt's example) is graded, so that hard-coding
    them earns nothing: they are ``problem.shown``, or else the first two cases, left out of the hidden tests.
    ``example=False`` leaves the prompt's example out when visible tests ship (they are then the only spec of the
    exact output); the hardest level ships no visible tests and always shows the example."""
    source = problem.source
    shown = problem.shown or problem.cases[:2]
    visible: dict[str, str] = {}
    exposed: tuple[tuple[Any, ...], ...] = ()
    if difficulty < MAX_DIFFICULTY:  # the hardest level ships no visible tests
        visible = {"test_visible.py": function_tests(problem.name, source, shown[:2])}
        exposed = tuple(shown[:2])
    intro = intro or f"Write `solution.py` defining `{problem.signature[4:-1]}`: {problem.doc}"
    prompt = intro
    if example or not visible:
        prompt += f"\nExample: `{example_line(problem.name, source, shown[0])}`."
        exposed += (shown[0],)
    if visible:
        prompt += " " + VISIBLE_NOTE
    graded = [c for c in problem.cases if not same_input(c, exposed)]
    tests = function_tests(problem.name, source, graded)
    traps, n_traps = trap_tests(problem.name, source, problem.traps, exclude=(*problem.cases, *exposed))
    return coding_task(
        family=family,
        split=split,
        seed=seed,
        difficulty=difficulty,
        index=index,
        unseen=unseen,
        prompt=prompt,
        tests={f"test_{problem.name}.py": tests},
        expected_tests=len(graded),
        reference_files={"solution.py": source},
        files={"solution.py": starting_source if starting_source is not None else problem.stub},
        visible_tests=visible,
        key=problem.key,
        extra_metadata={"function": problem.name, **(metadata or {})},
        traps={trap_file(problem.name): traps},
        expected_traps=n_traps,
    )


def same_input(args: tuple[Any, ...], among: Sequence[tuple[Any, ...]]) -> bool:
    """Whether ``args`` equals one of ``among`` as Python compares them (``{'a': 1, 'b': 2}`` equals its reordering,
    which prints differently): what a lookup table in the agent's code would match."""
    return any(args == other or repr(args) == repr(other) for other in among)


def draw_cases(inputs: Callable[[random.Random], tuple[Any, ...]], rng: random.Random, n: int,
               exclude: Sequence[tuple[Any, ...]] = ()) -> list[tuple[Any, ...]]:
    """Up to ``n`` distinct argument tuples from ``inputs``, none equal to one in ``exclude`` (at most ``6 * n``
    draws)."""
    cases: list[tuple[Any, ...]] = []
    seen: set[str] = set()
    for _ in range(n * 6):
        args = inputs(rng)
        if repr(args) not in seen and not same_input(args, exclude):
            seen.add(repr(args))
            cases.append(args)
        if len(cases) == n:
            break
    return cases


@dataclass(frozen=True)
class Template:
    """A parametrised one-function problem; ``split`` says which split may draw it."""

    key: str
    names: tuple[str, ...]
    params: str
    returns: str
    doc: str
    body: str
    inputs: Callable[[random.Random], tuple[Any, ...]]
    split: str = "train"
    knobs: Callable[[random.Random], dict[str, Any]] = field(default=lambda rng: {})
    helpers: str = ""
    n_cases: int = 6
    traps: tuple[tuple[Any, ...], ...] | None = None
    """Edge-case inputs inside the problem's domain; None takes the defaults of ``params`` (traps.DEFAULT_TRAPS)."""

    def instantiate(self, rng: random.Random) -> FuncProblem:
        knobs = self.knobs(rng)
        name = rng.choice(self.names).format(**knobs)
        cases = draw_cases(self.inputs, rng, self.n_cases)
        traps = self.traps if self.traps is not None else _default_traps(self.params)
        shown = draw_cases(self.inputs, rng, 2, exclude=(*cases, *traps))  # after the graded cases: those stay
        fmt = {**knobs, "name": name}
        suffix = "".join(f"-{k}={v}" for k, v in sorted(knobs.items()))
        return FuncProblem(
            key=f"{self.key}{suffix}",
            name=name,
            params=self.params,
            returns=self.returns,
            doc=self.doc.format(**fmt),
            body=self.body.format(**fmt),
            cases=tuple(cases),
            helpers=self.helpers.format(**fmt),
            traps=traps,
            shown=tuple(shown) if len(shown) == 2 else (),
        )


def template_family(
    family: str, levels: Mapping[int, Sequence[Template]], *, unseen: bool = False
) -> MakeFn:
    """A ``make`` function drawing one template of the task's level (levels above the last reuse the last)."""
    top = max(levels)

    def one(rng: random.Random, split: str, d: int, i: int, seed: int) -> Task:
        template = pick_template(levels[min(d, top)], split, rng, family)
        problem = template.instantiate(rng)
        return function_task(
            problem, family=family, split=split, seed=seed, difficulty=d, index=i, unseen=unseen
        )

    def make(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
        return generate(family, split, n, seed, difficulty, one)

    return make


def _default_traps(params: str) -> tuple[tuple[Any, ...], ...]:
    return default_traps(params)


def pick_template(templates: Sequence[Template], split: str, rng: random.Random, family: str) -> Template:
    pool = [t for t in templates if t.split == split]
    if not pool:
        raise TaskError(f"{family}: no {split} templates at this difficulty (a bug in the family definition)")
    return rng.choice(pool)


WORDS = ["apple", "banana", "cherry", "delta", "echo", "forest", "garden", "harbor", "island", "jungle", "kettle", "lemon", "mango", "nectar", "ocean", "pepper", "quartz", "river", "silver", "tiger", "umbrella", "violet", "window", "yellow", "zebra", "cloud", "stone", "bridge", "candle", "dragon", "eagle", "feather", "glass", "honey", "iron", "jacket", "kite", "ladder", "marble", "noodle", "orbit"]


def word(rng: random.Random, lo: int = 1, hi: int = 8) -> str:
    w = rng.choice(WORDS)
    return w[: rng.randint(lo, min(hi, len(w)))] if rng.random() < 0.3 else w


def sentence(rng: random.Random, lo: int = 2, hi: int = 5) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def ints(rng: random.Random, lo: int = 0, hi: int = 6, vlo: int = -9, vhi: int = 20) -> list[int]:
    return [rng.randint(vlo, vhi) for _ in range(rng.randint(lo, hi))]


def with_traps(table: Mapping[int, Sequence[Template]], traps: Mapping[str, tuple[tuple[Any, ...], ...]]
               ) -> dict[int, list[Template]]:
    """``table`` with explicit traps for the templates named in ``traps`` (by key); TaskError on unknown keys."""
    keys = {t.key for ts in table.values() for t in ts}
    unknown = sorted(set(traps) - keys)
    if unknown:
        raise TaskError(f"traps for unknown template keys {unknown} (a bug in the family definition)")
    return {lvl: [replace(t, traps=traps[t.key]) if t.key in traps else t for t in ts] for lvl, ts in table.items()}

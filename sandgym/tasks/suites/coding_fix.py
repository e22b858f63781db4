"""Coding families that start from existing code: ``bugfix`` (fix a bug in a given function) and ``refactor``
(restructure working code under constraints checked by tests; unseen)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.suites.base import (
    MAX_DIFFICULTY,
    FamilySpec,
    Template,
    call_args,
    coding_task,
    function_tests,
    generate,
    ints,
    run_reference,
    same_input,
    word,
)
from sandgym.tasks.suites.coding_basic import LISTS, NUMBERS, STRINGS
from sandgym.tasks.suites.traps import trap_file, trap_tests
from sandgym.tasks.task import VISIBLE_NOTE, Task


def _tpl(table: dict[int, list[Template]], level: int, key: str) -> Template:
    return next(t for t in table[level] if t.key == key)


def _sorted_xs(rng: random.Random) -> tuple[list[int], int]:
    xs = sorted(set(ints(rng, lo=0, hi=8, vlo=0, vhi=30)))
    return (xs, rng.choice(xs + [rng.randint(0, 31)]))


FIND = Template("find", ("find_index", "binary_search"), "xs: list[int], target: int", "int",
                "Return the index of target in the sorted list xs, or -1 if it is absent.",
                "    lo, hi = 0, len(xs) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n"
                "        if xs[mid] == target:\n            return mid\n        if xs[mid] < target:\n"
                "            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1", _sorted_xs,
                n_cases=8, traps=(([], 3), ([5], 5), ([1, 3, 5, 7], 1), ([1, 3, 5, 7], 7), ([1, 3, 5, 7], 8)))


@dataclass(frozen=True)
class Bug:
    """A correct template and the buggy body the workspace starts with (same knobs, name and cases)."""

    template: Template
    buggy: str
    split: str = "train"


def _repl(t: Template, old: str, new: str) -> str:
    if old not in t.body:
        raise TaskError(f"bugfix: {old!r} is not in the body of template {t.key!r} (a bug in the family)")
    return t.body.replace(old, new, 1)


def _bug(table: dict[int, list[Template]], level: int, key: str, old: str, new: str, split: str = "train") -> Bug:
    t = _tpl(table, level, key)
    return Bug(replace(t, n_cases=8), _repl(t, old, new), split)


BUGS = {
    1: [
        _bug(NUMBERS, 1, "add_one", "x + 1", "x + 2"),
        _bug(NUMBERS, 1, "is_even", "== 0", "== 1"),
        _bug(STRINGS, 1, "reverse", "s[::-1]", "s[::1]"),
        _bug(LISTS, 1, "max", "max(xs)", "min(xs)", "heldout"),
        _bug(NUMBERS, 1, "square", "x * x", "x * 2", "heldout"),
        _bug(STRINGS, 1, "upper", "s.upper()", "s.lower()", "heldout"),
    ],
    2: [
        _bug(NUMBERS, 2, "factorial", "n + 1", "n"),
        _bug(STRINGS, 1, "vowels", '"aeiou"', '"aeio"'),
        _bug(NUMBERS, 2, "digits", "str(n)", "str(n)[1:]", "heldout"),
        _bug(LISTS, 2, "running", "total += x\n        out.append(total)", "out.append(total)\n        total += x",
             "heldout"),
    ],
    3: [
        Bug(FIND, FIND.body.replace("lo <= hi", "lo < hi")),
        _bug(LISTS, 2, "dedupe", "list(dict.fromkeys(xs))", "sorted(set(xs))"),
        _bug(NUMBERS, 2, "prime", "int(n ** 0.5) + 1", "int(n ** 0.5)", "heldout"),
        _bug(LISTS, 3, "chunk", "range(0, len(xs), {k})", "range(0, len(xs) - {k}, {k})", "heldout"),
    ],
}


def _bug_one(rng: random.Random, split: str, d: int, i: int, seed: int) -> Task:
    bug = rng.choice([b for b in BUGS[min(d, 3)] if b.split == split])
    state = rng.getstate()
    problem = bug.template.instantiate(rng)
    rng.setstate(state)
    broken = replace(bug.template, body=bug.buggy).instantiate(rng)
    good, bad = run_reference(problem.source, problem.name), run_reference(broken.source, broken.name)
    failing = [args for args in problem.cases if good(*args) != bad(*args)]
    extra = 0
    while not failing and extra < 200:  # make sure the starting code fails at least one hidden test
        args = bug.template.inputs(rng)
        extra += 1
        if good(*args) != bad(*args):
            failing.append(args)
            problem = replace(problem, cases=(*problem.cases, args))
    if not failing:
        raise TaskError(f"bugfix: the bug in {bug.template.key!r} changes no output (a bug in the family)")
    args = _shown_failing(bug, rng, (*problem.cases, *problem.traps), good, bad) or failing[0]
    prompt = f"The function `{problem.name}` in `solution.py` has a bug. It should do this: {problem.doc}"
    if d <= 2:
        prompt += (f" For example `{problem.name}({call_args(args)})` should return {good(*args)!r} but returns "
                   f"{bad(*args)!r}.")
    prompt += " Fix `solution.py`."
    visible = {}
    if d < MAX_DIFFICULTY:
        visible = {"test_visible.py": function_tests(problem.name, problem.source, [args])}
        prompt += " " + VISIBLE_NOTE
    graded = [c for c in problem.cases if not same_input(c, [args])]  # what the prompt shows is not graded
    for _ in range(2000):  # the fallback showed a graded input: grade another one the bug changes
        if any(good(*c) != bad(*c) for c in graded):
            break
        extra_args = bug.template.inputs(rng)
        if not same_input(extra_args, [args, *graded]) and good(*extra_args) != bad(*extra_args):
            graded.append(extra_args)
    else:
        raise TaskError(f"bugfix: the bug in {bug.template.key!r} changes too few outputs (a bug in the family)")
    traps, n_traps = trap_tests(problem.name, problem.source, problem.traps, exclude=(*problem.cases, *graded, args))
    return coding_task(
        family="bugfix", split=split, seed=seed, difficulty=d, index=i, unseen=False, prompt=prompt,
        tests={f"test_{problem.name}.py": function_tests(problem.name, problem.source, graded)},
        expected_tests=len(graded), reference_files={"solution.py": problem.source},
        files={"solution.py": broken.source}, visible_tests=visible, key=f"bug-{problem.key}",
        extra_metadata={"function": problem.name}, traps={trap_file(problem.name): traps}, expected_traps=n_traps,
    )


def _shown_failing(bug: Bug, rng: random.Random, cases: Sequence[tuple[Any, ...]], good: Callable[..., Any],
                   bad: Callable[..., Any]) -> tuple[Any, ...] | None:
    """An input the bug changes that is not a graded case: the one the prompt and the visible test show (None when
    1000 draws find none; then a graded failing case is shown, and graded no more)."""
    for _ in range(1000):
        args = bug.template.inputs(rng)
        if not same_input(args, cases) and good(*args) != bad(*args):
            return args
    return None


# --------------------------------------------------------------------------------------------------------------
# refactor: behaviour must stay the same while a structural constraint (checked by tests) is met.


@dataclass(frozen=True)
class Refactor:
    key: str
    start: str
    reference: str
    tests: str
    n_tests: int
    goal: str


SOURCE_TREE = """import ast

import solution


def source_tree():
    # the workspace file as the grader found it (solution.__file__), parsed here: what the solution's own process
    # reports about its source (inspect.getsource of its objects, its __file__) can be forged
    with open(solution.__file__, encoding="utf-8") as f:
        return compile(f.read(), solution.__file__, "exec", ast.PyCF_ONLY_AST)  # ast.parse, in the grader's process


def bound_names(stmt):
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def calls(node, name):
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == name for c in ast.walk(node))
"""
"""Shared by the refactoring tests that check a constraint on the code: they parse the workspace file."""


def _global_acc(rng: random.Random) -> Refactor:
    fn, var = rng.choice([("add_all", "total"), ("sum_all", "running")])
    start = (f"{var} = 0\n\n\ndef {fn}(xs):\n    global {var}\n    for x in xs:\n        {var} += x\n"
             f"    return {var}\n")
    ref = f"def {fn}(xs):\n    return sum(xs)\n"
    cases = [ints(rng, lo=1) for _ in range(3)]
    tests = [f"{SOURCE_TREE}\nfrom solution import {fn}\n"]
    tests += [f"\ndef test_value_{i}():\n    assert {fn}({xs!r}) == {sum(xs)}\n" for i, xs in enumerate(cases)]
    tests.append(f"\ndef test_repeatable():\n    assert {fn}([1, 2]) == {fn}([1, 2]) == 3\n")
    tests.append("\ndef test_no_global():\n    assert not any(isinstance(n, ast.Global) for n in ast.walk(source_tree()))\n")
    goal = (f"`{fn}(xs)` should return the sum of xs, but it keeps a running total in the module-level variable "
            f"`{var}`, so a second call gives a wrong result. Refactor it into a pure function: no `global` "
            "statement and no module-level state.")
    return Refactor(f"global-{fn}", start, ref, "".join(tests), len(cases) + 2, goal)


def _mutable_default(rng: random.Random) -> Refactor:
    fn = rng.choice(["add_tag", "with_label"])
    start = f"def {fn}(tag, tags=[]):\n    tags.append(tag)\n    return tags\n"
    ref = f"def {fn}(tag, tags=None):\n    return list(tags or []) + [tag]\n"
    a, b = word(rng), word(rng)
    tests = (f"from solution import {fn}\n\n\ndef test_fresh_each_call():\n    assert {fn}({a!r}) == [{a!r}]\n"
             f"    assert {fn}({b!r}) == [{b!r}]\n\n\ndef test_given_list():\n    base = [{a!r}]\n"
             f"    assert {fn}({b!r}, base) == [{a!r}, {b!r}]\n    assert base == [{a!r}]\n")
    goal = (f"`{fn}(tag, tags=[])` returns tags with tag appended, but its default list is shared between calls "
            "and it changes the caller's list. Refactor so each call returns a new list and never mutates its "
            "argument (same results otherwise).")
    return Refactor(f"default-{fn}", start, ref, tests, 2, goal)


def _mutating(fn: str, start_body: str, ref_body: str, op: Callable[[list[int]], list[int]], what: str,
              key: str) -> Callable[[random.Random], Refactor]:
    def build(rng: random.Random) -> Refactor:
        cases = [ints(rng, lo=1) for _ in range(3)]
        tests = [f"from solution import {fn}\n"]
        for i, xs in enumerate(cases):
            tests.append(f"\ndef test_result_{i}():\n    xs = {xs!r}\n    out = {fn}(xs)\n"
                         f"    assert out == {op(list(xs))!r}\n    assert xs == {xs!r}\n    assert out is not xs\n")
        goal = (f"`{fn}(xs)` returns {what}, but it modifies xs in place. Refactor it so it returns a new list "
                "and leaves xs unchanged (same results otherwise).")
        return Refactor(key, f"def {fn}(xs):\n{start_body}", f"def {fn}(xs):\n{ref_body}", "".join(tests),
                        len(cases), goal)

    return build


def _dup_helper(rng: random.Random) -> Refactor:
    a, b = rng.choice([("clean_name", "clean_title"), ("tidy_user", "tidy_city")])
    norm = "s.strip().lower().replace('_', ' ')"
    start = (f"def {a}(s):\n    return {norm}.capitalize()\n\n\ndef {b}(s):\n    return {norm}.title()\n")
    ref = (f"def normalize(s):\n    return {norm}\n\n\ndef {a}(s):\n    return normalize(s).capitalize()\n\n\n"
           f"def {b}(s):\n    return normalize(s).title()\n")
    samples = [f"  {word(rng).upper()}_{word(rng)} " for _ in range(2)]
    mod = run_reference(ref, a), run_reference(ref, b), run_reference(ref, "normalize")
    tests = [f"{SOURCE_TREE}\nfrom solution import {a}, {b}, normalize\n"]
    for i, s in enumerate(samples):
        tests.append(f"\ndef test_behaviour_{i}():\n    assert {a}({s!r}) == {mod[0](s)!r}\n"
                     f"    assert {b}({s!r}) == {mod[1](s)!r}\n    assert normalize({s!r}) == {mod[2](s)!r}\n")
    tests.append(f"\ndef test_uses_helper():\n    tree = source_tree()\n    for name in ({a!r}, {b!r}):\n"
                 "        binds = [n for n in tree.body if name in bound_names(n)]\n"
                 "        assert binds and all(isinstance(n, ast.FunctionDef) and calls(n, 'normalize') for n in binds)\n")
    goal = (f"`{a}` and `{b}` repeat the same normalisation code. Extract it into a function `normalize(s)` "
            f"(strip, lower-case, '_' -> ' ') and make both call it; their results must not change.")
    return Refactor(f"dup-{a}", start, ref, "".join(tests), len(samples) + 1, goal)


def _shared_attr(rng: random.Random) -> Refactor:
    cls = rng.choice(["Registry", "Basket"])
    start = (f"class {cls}:\n    items = []\n\n    def add(self, x):\n        self.items.append(x)\n"
             "        return len(self.items)\n")
    ref = (f"class {cls}:\n    def __init__(self):\n        self.items = []\n\n    def add(self, x):\n"
           "        self.items.append(x)\n        return len(self.items)\n")
    tests = (f"from solution import {cls}\n\n\ndef test_counts():\n    r = {cls}()\n    assert r.add(1) == 1\n"
             f"    assert r.add(2) == 2\n\n\ndef test_independent():\n    a, b = {cls}(), {cls}()\n    a.add(1)\n"
             "    assert b.add(5) == 1\n    assert b.items == [5]\n")
    goal = (f"Every `{cls}` instance shares one class-level `items` list. Refactor so each instance has its own "
            "list; `add(x)` must still append x and return the instance's item count.")
    return Refactor(f"shared-{cls}", start, ref, tests, 2, goal)


REFACTORS: dict[int, dict[str, list[Callable[[random.Random], Refactor]]]] = {
    1: {"train": [_global_acc], "heldout": [_mutable_default]},
    2: {"train": [_mutating("sorted_copy", "    xs.sort()\n    return xs\n", "    return sorted(xs)\n", sorted,
                            "xs sorted", "sort-inplace")],
        "heldout": [_mutating("without_negatives", "    for x in list(xs):\n        if x < 0:\n"
                              "            xs.remove(x)\n    return xs\n", "    return [x for x in xs if x >= 0]\n",
                              lambda xs: [x for x in xs if x >= 0], "xs without its negative numbers",
                              "filter-inplace")]},
    3: {"train": [_dup_helper], "heldout": [_shared_attr]},
}


def _refactor_one(rng: random.Random, split: str, d: int, i: int, seed: int) -> Task:
    r = rng.choice(REFACTORS[min(d, 3)][split])(rng)
    prompt = f"Refactor `solution.py`. {r.goal} Hidden tests check behaviour and the constraint."
    return coding_task(
        family="refactor", split=split, seed=seed, difficulty=d, index=i, unseen=True, prompt=prompt,
        tests={"test_refactor.py": r.tests}, expected_tests=r.n_tests, reference_files={"solution.py": r.reference},
        files={"solution.py": r.start}, key=r.key,
    )


def _make(family: str, one: Callable[..., Task]) -> Callable[[str, int, int, int | None], list[Task]]:
    def make(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
        return generate(family, split, n, seed, difficulty, one)

    return make


FAMILIES = [
    FamilySpec("bugfix", "coding", "fix a bug in a given function in solution.py", False, _make("bugfix", _bug_one)),
    FamilySpec("refactor", "coding", "refactor under constraints (pure functions, no shared state, extract helper)",
               True, _make("refactor", _refactor_one)),
]

__all__ = ["BUGS", "FAMILIES", "REFACTORS"]

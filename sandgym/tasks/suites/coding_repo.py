"""The ``repo_fix`` family: a small multi-file package with one injected bug (used by ``sandgym/RepoFix-v0``).

Hidden tests check the broken behaviour and, as regression tests, every other public function that already
worked. Difficulty sets how much the prompt reveals: 1 names the file and function, 2 the function, 3+ only the
symptom; level 4 ships no visible tests.
"""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.suites.base import MAX_DIFFICULTY, FamilySpec, coding_task, generate, sentence
from sandgym.tasks.task import VISIBLE_NOTE, Task

TEXTSTATS = {
    "tokenize.py": '''"""Splitting text into words."""


def tokenize(text):
    """Lower-case words of text; the punctuation characters .,!? are dropped."""
    for ch in ".,!?":
        text = text.replace(ch, " ")
    return text.lower().split()
''',
    "stats.py": '''"""Word statistics."""

from .tokenize import tokenize


def word_count(text):
    """Number of words in text."""
    return len(tokenize(text))


def frequencies(text):
    """Map each word to how often it occurs."""
    counts = {}
    for w in tokenize(text):
        counts[w] = counts.get(w, 0) + 1
    return counts


def top_words(text, n):
    """The n most frequent words, most frequent first, ties in alphabetical order."""
    freq = frequencies(text)
    return sorted(freq, key=lambda w: (-freq[w], w))[:n]
''',
    "report.py": '''"""Human-readable reports."""

from .stats import frequencies, word_count


def summary(text):
    """One line: how many words and how many distinct words."""
    return f"{word_count(text)} words, {len(frequencies(text))} distinct"
''',
    "__init__.py": '''"""Text statistics."""

from .report import summary
from .stats import frequencies, top_words, word_count
from .tokenize import tokenize

__all__ = ["frequencies", "summary", "tokenize", "top_words", "word_count"]
''',
}

LEDGER = {
    "parse.py": '''"""Parsing ledger lines like '2024-01-05,food,-12.50'."""


def parse_line(line):
    """Return (date, category, amount in cents) from 'date,category,amount' (amount has 2 decimals)."""
    date, category, amount = line.strip().split(",")
    return date, category, int(amount.replace(".", ""))
''',
    "ledger.py": '''"""Totals over ledger lines."""

from .parse import parse_line


def balance(lines):
    """Sum of all amounts, in cents."""
    return sum(parse_line(line)[2] for line in lines)


def by_category(lines):
    """Map each category to the sum of its amounts, in cents."""
    out = {}
    for line in lines:
        _, category, cents = parse_line(line)
        out[category] = out.get(category, 0) + cents
    return out


def largest_expense(lines):
    """The category of the most negative single amount (None when there is no negative amount)."""
    worst, worst_cents = None, 0
    for line in lines:
        _, category, cents = parse_line(line)
        if cents < worst_cents:
            worst, worst_cents = category, cents
    return worst
''',
    "fmt.py": '''"""Formatting amounts."""


def format_cents(cents):
    """Format an amount in cents with two decimals, e.g. -1250 -> '-12.50', 305 -> '3.05'."""
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"
''',
    "__init__.py": '''"""A tiny ledger."""

from .fmt import format_cents
from .ledger import balance, by_category, largest_expense
from .parse import parse_line

__all__ = ["balance", "by_category", "format_cents", "largest_expense", "parse_line"]
''',
}


@dataclass(frozen=True)
class BugSite:
    file: str
    function: str
    old: str
    new: str
    symptom: str


@dataclass(frozen=True)
class Repo:
    key: str
    names: tuple[str, ...]
    files: Mapping[str, str]
    order: tuple[str, ...]
    """Module load order (dependencies first) for computing expected values from the reference."""
    calls: Mapping[str, Callable[[random.Random], tuple[Any, ...]]]
    """Public function (module.function) -> generator of its arguments."""
    bugs: tuple[BugSite, ...]
    traps: Mapping[str, tuple[tuple[Any, ...], ...]] = field(default_factory=dict)
    """Public function -> edge-case inputs (empty input, unicode, ties, tiny and huge amounts) graded apart."""


def _ledger_lines(rng: random.Random) -> tuple[list[str]]:
    cats = ["food", "rent", "travel", "salary", "books"]
    return ([f"2024-0{rng.randint(1, 9)}-{rng.randint(10, 28)},{rng.choice(cats)},"
             f"{rng.choice(['-', ''])}{rng.randint(0, 99)}.{rng.randint(0, 99):02d}" for _ in range(rng.randint(1, 5))],)


def _text(rng: random.Random) -> tuple[str]:
    words = [rng.choice(["the", "a", "cat", "dog", "ran", "sat"]) for _ in range(rng.randint(2, 9))]
    words += [sentence(rng, 1, 2)]
    return (" ".join(w + rng.choice(["", "", ",", ".", "!", "?"]) for w in words).capitalize(),)


REPOS = (
    Repo("textstats", ("textstats", "wordtools", "lexicount"), TEXTSTATS,
         ("tokenize.py", "stats.py", "report.py"),
         {"tokenize.tokenize": _text, "stats.word_count": _text, "stats.frequencies": _text,
          "stats.top_words": lambda r: (*_text(r), r.randint(1, 3)), "report.summary": _text},
         (BugSite("tokenize.py", "tokenize", '".,!?"', '".,!"', "a word followed by '?' keeps the '?'"),
          BugSite("stats.py", "frequencies", "counts.get(w, 0) + 1", "1", "every word is counted once at most"),
          BugSite("stats.py", "top_words", "(-freq[w], w)", "(freq[w], w)", "the least frequent words come first"),
          BugSite("report.py", "summary", "len(frequencies(text))", "len(text.split())",
                  "the number of distinct words is wrong")),
         {"tokenize.tokenize": (("",), ("Hello, hello!",), ("ÉCOLE école?",)),
          "stats.word_count": (("",), ("?!",)),
          "stats.frequencies": (("",), ("a a A",)),
          "stats.top_words": (("", 3), ("b a", 5), ("b b a a c", 2)),
          "report.summary": (("",), ("Dog dog DOG",))}),
    Repo("ledger", ("ledger", "pennies", "bookkeeping"), LEDGER, ("parse.py", "fmt.py", "ledger.py"),
         {"parse.parse_line": lambda r: (_ledger_lines(r)[0][0],), "ledger.balance": _ledger_lines,
          "ledger.by_category": _ledger_lines, "ledger.largest_expense": _ledger_lines,
          "fmt.format_cents": lambda r: (r.randint(-9999, 9999),)},
         (BugSite("ledger.py", "balance", "for line in lines)", "for line in lines[1:])",
                  "the first line is left out of the balance"),
          BugSite("fmt.py", "format_cents", "sign = \"-\" if cents < 0 else \"\"", "sign = \"\"",
                  "negative amounts are shown without their minus sign"),
          BugSite("ledger.py", "by_category", "out.get(category, 0) + cents", "cents",
                  "a category with several lines only shows its last amount"),
          BugSite("ledger.py", "largest_expense", "cents < worst_cents", "cents > worst_cents",
                  "it returns an income category instead of the largest expense")),
         {"parse.parse_line": (("2024-01-05,food,-0.05",), ("2024-01-05,rent,0.00\n",)),
          "ledger.balance": (([],), (["2024-01-01,salary,99999999.99", "2024-01-02,food,-0.01"],)),
          "ledger.by_category": (([],), (["2024-01-01,food,-1.00", "2024-01-02,food,1.00"],)),
          "ledger.largest_expense": (([],), (["2024-01-01,salary,10.00"],)),
          "fmt.format_cents": ((0,), (-5,), (123456789,))}),
)


def load_package(name: str, files: Mapping[str, str], order: tuple[str, ...]) -> dict[str, types.ModuleType]:
    """Execute our own reference package in memory (unique module names; removed from sys.modules after)."""
    root = f"_sandgym_reference_{name}_{abs(hash(tuple(files.values())))}"
    pkg = types.ModuleType(root)
    pkg.__path__ = []
    modules: dict[str, types.ModuleType] = {}
    sys.modules[root] = pkg
    try:
        for fname in order:
            mod = types.ModuleType(f"{root}.{fname[:-3]}")
            mod.__package__ = root
            sys.modules[mod.__name__] = mod
            exec(compile(files[fname], f"<reference {name}/{fname}>", "exec"), mod.__dict__)
            modules[fname[:-3]] = mod
    finally:
        # list(sys.modules) is one C-level copy: iterating the dict itself races with threads importing meanwhile
        for key in [k for k in list(sys.modules) if k == root or k.startswith(root + ".")]:
            sys.modules.pop(key, None)
    return modules


def _repo_tests(pkg: str, repo: Repo, rng: random.Random, per_fn: int) -> tuple[str, dict[str, list[str]]]:
    """Hidden tests for every public function; returns the file source and test names per function."""
    modules = load_package(repo.key, repo.files, repo.order)
    lines: list[str] = []
    names: dict[str, list[str]] = {}
    imports = sorted({f"from {pkg}.{q.split('.')[0]} import {q.split('.')[1]}" for q in repo.calls})
    for qual, gen in repo.calls.items():
        mod, fn = qual.split(".")
        func = getattr(modules[mod], fn)
        names[fn] = []
        for i in range(per_fn):
            args = gen(rng)
            expected = func(*args)
            names[fn].append(f"test_{fn}_{i}")
            call = ", ".join(repr(a) for a in args)
            lines += ["", f"def test_{fn}_{i}():", f"    assert {fn}({call}) == {expected!r}", ""]
    return "\n".join(imports) + "\n\n" + "\n".join(lines).rstrip() + "\n", names


def _repo_traps(pkg: str, repo: Repo) -> tuple[str, int]:
    """(hidden trap file source, number of traps); expected values come from the reference package."""
    modules = load_package(repo.key, repo.files, repo.order)
    imports = sorted({f"from {pkg}.{q.split('.')[0]} import {q.split('.')[1]}" for q in repo.traps})
    lines: list[str] = []
    n = 0
    for qual, cases in repo.traps.items():
        mod, fn = qual.split(".")
        for i, args in enumerate(cases):
            expected = getattr(modules[mod], fn)(*args)
            call = ", ".join(repr(a) for a in args)
            lines += ["", f"def test_trap_{fn}_{i}():", f"    assert {fn}({call}) == {expected!r}", ""]
            n += 1
    return "\n".join(imports) + "\n\n" + "\n".join(lines).rstrip() + "\n", n


def _failing_functions(repo: Repo, bug: BugSite, broken: Mapping[str, str], tests_rng: random.Random) -> bool:
    good = load_package(repo.key, repo.files, repo.order)
    bad = load_package(repo.key + "_bug", broken, repo.order)
    qual = next(q for q in repo.calls if q.endswith("." + bug.function))
    mod, fn = qual.split(".")
    return any(
        getattr(good[mod], fn)(*args) != getattr(bad[mod], fn)(*args)
        for args in (repo.calls[qual](tests_rng) for _ in range(40))
    )


def _repo_one(rng: random.Random, split: str, d: int, i: int, seed: int) -> Task:
    sites = [(repo, j, bug) for repo in REPOS for j, bug in enumerate(repo.bugs) if (j % 2 == 0) == (split == "train")]
    repo, j, bug = rng.choice(sites)
    pkg = rng.choice(repo.names)
    if bug.old not in repo.files[bug.file]:
        raise TaskError(f"repo_fix: {bug.old!r} not in {repo.key}/{bug.file} (a bug in the family definition)")
    broken = dict(repo.files)
    broken[bug.file] = broken[bug.file].replace(bug.old, bug.new, 1)
    if not _failing_functions(repo, bug, broken, random.Random(f"{repo.key}/{j}")):
        raise TaskError(f"repo_fix: bug {repo.key}/{bug.function} changes no output (a bug in the family)")
    tests, caught = "", []
    for _attempt in range(20):  # draw inputs until the hidden tests catch the bug
        tests, names = _repo_tests(pkg, repo, rng, per_fn=2 + d // 2)
        namespace_bad = load_package(repo.key + "_bug", broken, repo.order)
        caught = _catches(tests, namespace_bad)
        if caught:
            break
    else:
        raise TaskError(f"repo_fix: could not draw inputs exposing {repo.key}/{bug.function}")
    n_tests = sum(len(v) for v in names.values())
    where = {1: f" The bug is in `{pkg}/{bug.file}`, function `{bug.function}`.",
             2: f" The problem is in `{bug.function}`."}.get(d, "")
    prompt = (f"The package `{pkg}/` in the workspace has a bug: {bug.symptom}. Explore the code, fix the bug "
              f"and keep everything else working (hidden tests also check the other functions).{where}")
    traps, n_traps = _repo_traps(pkg, repo)
    visible = {}
    if d < MAX_DIFFICULTY:
        visible = {"test_visible.py": _shown_test(repo, bug, namespace_bad, (tests, traps), caught[0], rng)}
        prompt += " " + VISIBLE_NOTE
    prefixed = {f"{pkg}/{name}": src for name, src in repo.files.items()}
    return coding_task(
        family="repo_fix", split=split, seed=seed, difficulty=d, index=i, unseen=False, prompt=prompt,
        tests={f"test_{pkg}.py": tests}, expected_tests=n_tests, reference_files=prefixed,
        files={f"{pkg}/{name}": src for name, src in broken.items()}, visible_tests=visible,
        entry_file=f"{pkg}/{bug.file}", key=f"{repo.key}-{j}", max_turns=10 + 2 * d,
        extra_metadata={"package": pkg, "function": bug.function, "regression_tests": n_tests - len(names[bug.function])},
        traps={f"test_{pkg}_traps.py": traps}, expected_traps=n_traps,
    )


def _shown_test(repo: Repo, bug: BugSite, broken: Mapping[str, types.ModuleType], hidden: tuple[str, str],
                caught: str, rng: random.Random) -> str:
    """The visible test file: one test of the buggy function that the bug fails, on an input no hidden test or trap
    (``hidden``: the two files' sources) uses, so that hard-coding it earns nothing; if 200 draws find none, the
    hidden test ``caught``."""
    block = hidden[0].split("\n\ndef ")
    qual = next(q for q in repo.calls if q.endswith("." + bug.function))
    mod, fn = qual.split(".")
    good = getattr(load_package(repo.key, repo.files, repo.order)[mod], fn)
    bad = getattr(broken[mod], fn)  # the broken package, loaded once by the caller
    for _ in range(200):
        args = repo.calls[qual](rng)
        call = f"{fn}({', '.join(repr(a) for a in args)})"
        if not any(f"assert {call} == " in src for src in hidden) and good(*args) != bad(*args):
            return f"{block[0]}\n\ndef test_{fn}_shown():\n    assert {call} == {good(*args)!r}\n"
    return block[0] + "\n\ndef " + next(b for b in block[1:] if b.startswith(caught + "("))


def _catches(tests: str, bad: Mapping[str, types.ModuleType]) -> list[str]:
    """Names of the generated tests that fail on the broken package (checked in memory)."""
    namespace: dict[str, Any] = {}
    for mod in bad.values():
        for k, v in vars(mod).items():
            if callable(v) and not k.startswith("_"):
                namespace[k] = v
    body = "\n".join(line for line in tests.splitlines() if not line.startswith("from "))
    exec(compile(body, "<check>", "exec"), namespace)
    failing = []
    for k, fn in list(namespace.items()):
        if k.startswith("test_"):
            try:
                fn()
            except AssertionError:
                failing.append(k)
    return failing


def _make(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
    return generate("repo_fix", split, n, seed, difficulty, _repo_one)


FAMILIES = [
    FamilySpec("repo_fix", "coding", "multi-file package with a failing behaviour; hidden regression tests",
               False, _make),
]

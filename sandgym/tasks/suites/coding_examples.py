"""``by_example``: one-line functions whose exact output only the visible tests show (tests are the spec).

The prompt describes what the function does ("return a greeting for name") but not its constant: the greeting,
separator, brackets or unit that the tests expect. A first attempt is a guess; the failing visible test prints the
expected value (``assert greet('Ann') == 'Howdy Ann'``), and a fix copies it into the code. So this family
measures the test-and-fix loop's repair step at a level a small model can reach: read the failure, change the
code to match it, re-run, submit. Hidden tests use four other inputs (not the visible ones), so hard-coding the
visible cases passes none of them.

Train and heldout build their constants from disjoint pools of punctuation marks and short words (a held-out task's
constant was never in a training task, and there are too many training ones to memorise). ``metadata["guess"]``
is the reference with other, training constants instead of the task's: the oracle's wrong first attempt in test-and-fix demonstrations (never shown to the agent).
At the hardest level, which ships no visible tests, the prompt shows one example instead.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandgym.tasks.suites.base import (
    MAX_DIFFICULTY,
    FamilySpec,
    FuncProblem,
    draw_cases,
    function_task,
    generate,
    word,
)
from sandgym.tasks.suites.traps import default_traps
from sandgym.tasks.task import Task

Knobs = Mapping[str, str]

MARKS = {"train": "!#%&*+-./:", "heldout": ";<=>?@^_|~"}
"""Punctuation a split's constants are made of: disjoint, so no held-out separator or mark was ever a training one."""
TOKENS = {
    "train": ("aux", "zip", "v2", "tmp", "dev", "log", "box", "run", "key", "max", "new", "raw", "top", "sum", "one",
              "red", "web", "api", "net", "pro", "fix", "bin", "doc", "img", "kit"),
    "heldout": ("qa", "old", "bak", "cfg", "dst", "src", "etc", "lab", "ops", "seq", "gen", "hub", "mix", "pod", "rev",
                "sky", "tag", "uid", "via", "wip", "xyz", "yes", "zen", "alt", "cue"),
}
"""Short words a split's endings, prefixes, units and greetings are made of (disjoint between splits, and none a
part of another split's word)."""


def _mark(rng: random.Random, split: str) -> str:
    """One or two of the split's punctuation marks."""
    return "".join(rng.choice(MARKS[split]) for _ in range(rng.randint(1, 2)))


def _sep(rng: random.Random, split: str) -> str:
    """A separator: the split's marks, sometimes with spaces around."""
    return rng.choice(["{}", " {} ", "{} "]).format(_mark(rng, split))


def _token(rng: random.Random, split: str) -> str:
    return rng.choice(TOKENS[split])


KnobMaker = Callable[[random.Random, str], Knobs]


@dataclass(frozen=True)
class Spec:
    """A function with constants (``knobs``, drawn per split) the prompt does not state; ``body`` formats them with
    ``!r``."""

    key: str
    names: tuple[str, ...]
    params: str
    returns: str
    doc: str
    """What the function does, never its constants."""
    body: str
    inputs: Callable[[random.Random], tuple[Any, ...]]
    knobs: KnobMaker
    """(rng, split) -> the constants; every constant contains a mark or word of that split's pools."""

    def problem(self, rng: random.Random, split: str, n_cases: int = 6) -> tuple[FuncProblem, str]:
        """(the problem, the source of a wrong first guess: the reference with other, training constants)."""
        knobs = self.knobs(rng, split)
        guess = self.knobs(rng, "train")
        while guess == knobs:
            guess = self.knobs(rng, "train")
        name = rng.choice(self.names)
        cases = draw_cases(self.inputs, rng, n_cases)
        suffix = "".join(f"-{k}={v!r}" for k, v in sorted(knobs.items()))

        def make(values: Knobs) -> FuncProblem:
            return FuncProblem(key=f"by_example/{self.key}{suffix}", name=name, params=self.params,
                               returns=self.returns, doc=self.doc, body=self.body.format(**values),
                               cases=tuple(cases), traps=default_traps(self.params))

        return make(knobs), make(guess).source


def _name(rng: random.Random) -> tuple[str]:
    return (word(rng, 2).capitalize(),)


def _w(rng: random.Random) -> tuple[str]:
    return (word(rng, 2),)


def _words(rng: random.Random) -> tuple[list[str]]:
    return ([word(rng, 2) for _ in range(rng.randint(2, 4))],)


def _spaced(rng: random.Random) -> tuple[str]:
    return (" ".join(word(rng, 2) for _ in range(rng.randint(2, 4))),)


def _int(rng: random.Random) -> tuple[int]:
    return (rng.randint(0, 99),)


def _ints(rng: random.Random) -> tuple[list[int]]:
    return ([rng.randint(0, 20) for _ in range(rng.randint(2, 4))],)


def _kv(rng: random.Random) -> tuple[str, int]:
    return (word(rng, 2), rng.randint(0, 99))


def _greeting(rng: random.Random, split: str) -> str:
    return _token(rng, split).capitalize() + rng.choice([", ", " "])


LEVELS: dict[int, list[Spec]] = {
    1: [
        Spec("greet", ("greet", "greeting", "say_hello"), "name: str", "str", "Return a greeting for name.",
             "    return {g!r} + name", _name, lambda r, sp: {"g": _greeting(r, sp)}),
        Spec("tag", ("tag", "add_ending", "mark"), "s: str", "str", "Return s with an ending added.",
             "    return s + {t!r}", _w, lambda r, sp: {"t": _mark(r, sp)[0] + _token(r, sp)}),
        Spec("label", ("label", "add_prefix", "prefixed"), "s: str", "str", "Return s with a prefix added.",
             "    return {p!r} + s", _w, lambda r, sp: {"p": _token(r, sp) + _mark(r, sp)[0]}),
        Spec("join", ("join_words", "glue", "combine"), "words: list[str]", "str",
             "Return the words joined into one string with a separator between them.",
             "    return {sep!r}.join(words)", _words, lambda r, sp: {"sep": _sep(r, sp)}),
        Spec("wrap", ("wrap", "enclose", "bracket"), "s: str", "str", "Return s between an opening and a closing mark.",
             "    return {left!r} + s + {right!r}", _w, lambda r, sp: {"left": _mark(r, sp), "right": _mark(r, sp)}),
        Spec("unit", ("with_unit", "show_amount", "fmt_value"), "x: int", "str",
             "Return x as text followed by its unit.", "    return str(x) + {u!r}", _int,
             lambda r, sp: {"u": " " + _token(r, sp)}),
    ],
    2: [
        Spec("greet2", ("greet", "welcome_line", "hello_line"), "name: str", "str",
             "Return a greeting for name, with a mark at the end.", "    return {g!r} + name + {p!r}", _name,
             lambda r, sp: {"g": _greeting(r, sp), "p": _mark(r, sp)}),
        Spec("spaces", ("replace_spaces", "no_spaces", "slugify"), "s: str", "str",
             "Return s with every space replaced by another string.", "    return s.replace(' ', {sep!r})", _spaced,
             lambda r, sp: {"sep": _mark(r, sp)}),
        Spec("pair", ("key_value", "show_pair", "format_pair"), "key: str, value: int", "str",
             "Return key and value as one line of text, with a separator between them.",
             "    return key + {sep!r} + str(value)", _kv, lambda r, sp: {"sep": _sep(r, sp)}),
        Spec("row", ("csv_row", "join_numbers", "to_row"), "xs: list[int]", "str",
             "Return the numbers of xs as text, joined with a separator.",
             "    return {sep!r}.join(str(x) for x in xs)", _ints, lambda r, sp: {"sep": _sep(r, sp)}),
        Spec("listing", ("listing", "show_words", "bracket_join"), "words: list[str]", "str",
             "Return the words joined with a separator, between an opening and a closing mark.",
             "    return {left!r} + {sep!r}.join(words) + {right!r}", _words,
             lambda r, sp: {"left": _mark(r, sp), "right": _mark(r, sp), "sep": _sep(r, sp)}),
        Spec("coded", ("code_for", "make_code", "item_code"), "x: int", "str",
             "Return a code for x: a prefix, the number, and an ending.", "    return {p!r} + str(x) + {t!r}", _int,
             lambda r, sp: {"p": _token(r, sp).upper() + _mark(r, sp)[0], "t": _mark(r, sp)[0] + _token(r, sp)}),
    ],
}
"""Level 1: one constant (a greeting, ending, prefix, separator, pair of marks, unit); level 2: two or three.
Constants are generated from per-split pools of marks and short words (thousands of combinations), so a model
cannot memorise the training ones and write them back: on a held-out task only the failing test shows them. Levels
3 and 4 reuse level 2 (level 4 ships no visible tests, so its prompt shows an example)."""


def _one(rng: random.Random, split: str, d: int, i: int, seed: int) -> Task:
    problem, guess = rng.choice(LEVELS[min(d, max(LEVELS))]).problem(rng, split)
    spec = ("The exact output (every constant, separator and mark) is what the visible tests expect: run them and "
            "match it." if d < MAX_DIFFICULTY else "The exact output is the example's.")
    intro = f"Write `solution.py` defining `{problem.signature[4:-1]}`: {problem.doc} {spec}"
    return function_task(problem, family="by_example", split=split, seed=seed, difficulty=d, index=i, intro=intro,
                         example=False, metadata={"guess": guess})


def make(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
    return generate("by_example", split, n, seed, difficulty, _one)


FAMILIES = [
    FamilySpec("by_example", "coding", "one-line functions whose constants only the visible tests show (a first "
               "attempt guesses, the failing test prints the expected value, the fix copies it)", False, make),
]

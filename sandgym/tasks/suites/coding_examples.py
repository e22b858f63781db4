"""``by_example``: one-line functions whose exact output only the visible tests show (tests are the spec).

The prompt describes what the function does ("return a greeting for name") but not its constant: the greeting,
separator, brackets or unit that the tests expect. A first attempt is a guess; the failing visible test prints the
expected value (``assert greet('Ann') == 'Howdy Ann'``), and a fix copies it into the code. So this family
measures the test-and-fix loop's repair step at a level a small model can reach: read the failure, change the
code to match it, re-run, submit. Hidden tests use other inputs, so hard-coding the visible cases fails them.

Train and heldout draw their constants from disjoint pools (a held-out task's constant was never in a training
task), and some functions are heldout only. ``metadata["guess"]`` is the reference with a training constant
instead of the task's: the oracle's wrong first attempt in test-and-fix demonstrations (never shown to the agent).
At the hardest level, which ships no visible tests, the prompt shows one example instead.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandgym.tasks.suites.base import MAX_DIFFICULTY, FamilySpec, FuncProblem, function_task, generate, word
from sandgym.tasks.suites.traps import default_traps

Knobs = Mapping[str, str]


@dataclass(frozen=True)
class Spec:
    """A function with constants (``knobs``) the prompt does not state; ``body`` formats them with ``!r``."""

    key: str
    names: tuple[str, ...]
    params: str
    returns: str
    doc: str
    """What the function does, never its constants."""
    body: str
    inputs: Callable[[random.Random], tuple[Any, ...]]
    train: tuple[Knobs, ...]
    heldout: tuple[Knobs, ...]
    """Constants of held-out tasks: disjoint from ``train``; a spec with no ``train`` is heldout only."""

    def pool(self, split: str) -> tuple[Knobs, ...]:
        return self.train if split == "train" else self.heldout

    def problem(self, rng: random.Random, split: str, n_cases: int = 6) -> tuple[FuncProblem, str]:
        """(the problem, the source of a wrong first guess: the reference with a training constant)."""
        knobs = rng.choice(self.pool(split))
        others = [k for k in self.train or self.heldout if k != knobs]
        name = rng.choice(self.names)
        cases: list[tuple[Any, ...]] = []
        for _ in range(n_cases * 6):
            args = self.inputs(rng)
            if args not in cases:
                cases.append(args)
            if len(cases) == n_cases:
                break
        suffix = "".join(f"-{k}={v!r}" for k, v in sorted(knobs.items()))

        def make(values: Knobs) -> FuncProblem:
            return FuncProblem(key=f"by_example/{self.key}{suffix}", name=name, params=self.params,
                               returns=self.returns, doc=self.doc, body=self.body.format(**values),
                               cases=tuple(cases), traps=default_traps(self.params))

        return make(knobs), make(rng.choice(others)).source


def _name(rng: random.Random) -> tuple[str]:
    return (word(rng, 2).capitalize(),)


def _w(rng: random.Random) -> tuple[str]:
    return (word(rng, 2),)


def _words(rng: random.Random) -> tuple[list[str]]:
    return ([word(rng, 2) for _ in range(rng.randint(2, 4))],)


def _spaced(rng: random.Random) -> tuple[str]:
    return (" ".join(word(rng, 2) for _ in range(rng.randint(2, 4))),)


def _mixed(rng: random.Random) -> tuple[str]:
    """Two to four words, the first capitalised, the others in random case: every letter-case method differs."""
    words = [word(rng, 2) for _ in range(rng.randint(2, 4))]
    return (" ".join([words[0].capitalize(), *(rng.choice([w, w.upper(), w.capitalize()]) for w in words[1:])]),)


def _int(rng: random.Random) -> tuple[int]:
    return (rng.randint(0, 99),)


def _ints(rng: random.Random) -> tuple[list[int]]:
    return ([rng.randint(0, 20) for _ in range(rng.randint(2, 4))],)


def _kv(rng: random.Random) -> tuple[str, int]:
    return (word(rng, 2), rng.randint(0, 99))


def _k(name: str, values: Sequence[str]) -> tuple[Knobs, ...]:
    return tuple({name: v} for v in values)


def _lr(pairs: Sequence[tuple[str, str]]) -> tuple[Knobs, ...]:
    return tuple({"left": a, "right": b} for a, b in pairs)


LEVELS: dict[int, list[Spec]] = {
    1: [
        Spec("greet", ("greet", "greeting", "say_hello"), "name: str", "str", "Return a greeting for name.",
             "    return {g!r} + name", _name,
             _k("g", ("Hello, ", "Hi ", "Hey ", "Dear ")), _k("g", ("Welcome, ", "Good day, ", "Howdy ", "Hiya "))),
        Spec("tag", ("tag", "add_ending", "mark"), "s: str", "str", "Return s with an ending added.",
             "    return s + {t!r}", _w,
             _k("t", ("_v2", "!", ".txt", "-ok")), _k("t", (".bak", "?!", "_old", "-new"))),
        Spec("label", ("label", "add_prefix", "prefixed"), "s: str", "str", "Return s with a prefix added.",
             "    return {p!r} + s", _w,
             _k("p", ("#", "id-", "user_", "> ")), _k("p", ("@", "key:", "tmp_", "$ "))),
        Spec("join", ("join_words", "glue", "combine"), "words: list[str]", "str",
             "Return the words joined into one string with a separator between them.",
             "    return {sep!r}.join(words)", _words,
             _k("sep", ("-", "_", ", ", "+")), _k("sep", (" | ", "/", "; ", "~"))),
        Spec("wrap", ("wrap", "enclose", "bracket"), "s: str", "str", "Return s between an opening and a closing mark.",
             "    return {left!r} + s + {right!r}", _w,
             _lr((("[", "]"), ("(", ")"), ("<", ">"))), _lr((("{", "}"), ("<<", ">>"), ("**", "**"), ("|", "|")))),
        Spec("unit", ("with_unit", "show_amount", "fmt_value"), "x: int", "str",
             "Return x as text followed by its unit.", "    return str(x) + {u!r}", _int,
             _k("u", (" kg", " cm", "%", " s")), _k("u", (" km", " ms", " MB", " mph"))),
        Spec("quote", ("quote", "quoted"), "s: str", "str", "Return s between two quote marks.",
             "    return {q!r} + s + {q!r}", _w, (), _k("q", ("'", '"', "`"))),
    ],
    2: [
        Spec("greet2", ("greet", "welcome_line", "hello_line"), "name: str", "str",
             "Return a greeting for name, with a mark at the end.", "    return {g!r} + name + {p!r}", _name,
             tuple({"g": g, "p": p} for g in ("Hello, ", "Hi ") for p in ("!", ".")),
             tuple({"g": g, "p": p} for g in ("Welcome, ", "Howdy ") for p in ("?", "!!"))),
        Spec("spaces", ("replace_spaces", "no_spaces", "slugify"), "s: str", "str",
             "Return s with every space replaced by another string.", "    return s.replace(' ', {sep!r})", _spaced,
             _k("sep", ("_", "-", "+")), _k("sep", (".", "~", "%20"))),
        Spec("pair", ("key_value", "show_pair", "format_pair"), "key: str, value: int", "str",
             "Return key and value as one line of text, with a separator between them.",
             "    return key + {sep!r} + str(value)", _kv,
             _k("sep", ("=", ": ", " -> ")), _k("sep", (" => ", ":=", " is "))),
        Spec("row", ("csv_row", "join_numbers", "to_row"), "xs: list[int]", "str",
             "Return the numbers of xs as text, joined with a separator.",
             "    return {sep!r}.join(str(x) for x in xs)", _ints,
             _k("sep", (",", ";", " ")), _k("sep", ("|", " / ", "::"))),
        Spec("listing", ("listing", "show_words", "bracket_join"), "words: list[str]", "str",
             "Return the words joined with a separator, between an opening and a closing mark.",
             "    return {left!r} + {sep!r}.join(words) + {right!r}", _words,
             tuple({"left": a, "right": b, "sep": s} for a, b in (("[", "]"), ("(", ")")) for s in (", ", " ")),
             tuple({"left": a, "right": b, "sep": s} for a, b in (("{", "}"), ("<", ">")) for s in ("; ", "|"))),
        Spec("case", ("convert_case", "recase", "styled"), "s: str", "str",
             "Return s with the letter case the visible tests expect.", "    return s.{method}()", _mixed,
             _k("method", ("upper", "lower", "title")), _k("method", ("swapcase", "capitalize"))),
    ],
}
"""Level 1: one constant (a prefix, ending, separator, unit, pair of marks); level 2: two constants or the letter
case. Levels 3 and 4 reuse level 2 (level 4 ships no visible tests, so its prompt shows an example)."""


def _one(rng: random.Random, split: str, d: int, i: int, seed: int) -> Any:
    specs = [s for s in LEVELS[min(d, max(LEVELS))] if s.pool(split)]
    problem, guess = rng.choice(specs).problem(rng, split)
    spec = ("The exact output (every constant, separator and mark) is what the visible tests expect: run them and "
            "match it." if d < MAX_DIFFICULTY else "The exact output is the example's.")
    intro = f"Write `solution.py` defining `{problem.signature[4:-1]}`: {problem.doc} {spec}"
    return function_task(problem, family="by_example", split=split, seed=seed, difficulty=d, index=i, intro=intro,
                         example=False, metadata={"guess": guess})


def make(split: str, n: int, seed: int, difficulty: int | None) -> list[Any]:
    return generate("by_example", split, n, seed, difficulty, _one)


FAMILIES = [
    FamilySpec("by_example", "coding", "one-line functions whose constants only the visible tests show (a first "
               "attempt guesses, the failing test prints the expected value, the fix copies it)", False, make),
]

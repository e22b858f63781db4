"""Coding families written to a spec: ``parsing`` (parse a small text format; unseen) and ``class_spec``
(implement a small class whose behaviour is checked by scripted method calls)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sandgym.tasks.suites.base import (
    MAX_DIFFICULTY,
    FamilySpec,
    Template,
    coding_task,
    generate,
    run_reference,
    template_family,
    with_traps,
    word,
)
from sandgym.tasks.suites.traps import BIG
from sandgym.tasks.task import VISIBLE_NOTE, Task


def _csv_ints(rng: random.Random) -> tuple[str]:
    return (",".join(str(rng.randint(-5, 99)) for _ in range(rng.randint(0, 5))),)


def _kv1(rng: random.Random) -> tuple[str]:
    return (f"{word(rng)}={rng.choice([word(rng), str(rng.randint(0, 99))])}",)


def _bool(rng: random.Random) -> tuple[str]:
    return (rng.choice(["yes", "no", "TRUE", "false", "1", "0", "Yes", "off"]),)


def _hex(rng: random.Random) -> tuple[str]:
    return (format(rng.randint(0, 4095), rng.choice(["x", "X"])),)


def _kvs(rng: random.Random) -> tuple[str]:
    return (";".join(f"{rng.choice('abcdefgh')}{i}={rng.randint(0, 99)}" for i in range(rng.randint(0, 4))),)


def _hhmm(rng: random.Random) -> tuple[str]:
    return (f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",)


def _dur(rng: random.Random) -> tuple[str]:
    h, m = rng.randint(0, 9), rng.randint(0, 59)
    return (rng.choice([f"{h}h{m}m", f"{m}m", f"{h}h"]) if h or m else "0m",)


def _ver(rng: random.Random) -> tuple[str]:
    return (".".join(str(rng.randint(0, 20)) for _ in range(rng.randint(1, 4))),)


def _ini(rng: random.Random) -> tuple[str]:
    lines = []
    for s in rng.sample(["server", "db", "cache", "auth", "log"], rng.randint(1, 3)):
        lines.append(f"[{s}]")
        for _ in range(rng.randint(1, 3)):
            lines.append(f"{word(rng)} = {rng.choice([word(rng), str(rng.randint(1, 9999))])}")
        lines += rng.choice([[], [""], ["# a comment"]])
    return ("\n".join(lines),)


def _csv(rng: random.Random) -> tuple[str]:
    cols = rng.sample(["name", "city", "age", "team", "score"], rng.randint(1, 3))
    rows = [",".join(cols)] + [",".join(word(rng) for _ in cols) for _ in range(rng.randint(0, 3))]
    return ("\n".join(rows),)


def _roman(rng: random.Random) -> tuple[str]:
    n = rng.randint(1, 3999)
    out = ""
    for v, s in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                 (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= v:
            out, n = out + s, n - v
    return (out,)


def _rpn(rng: random.Random) -> tuple[str]:
    toks = [str(rng.randint(1, 9))]
    for _ in range(rng.randint(1, 4)):
        toks += [str(rng.randint(1, 9)), rng.choice("+-*")]
    return (" ".join(toks),)


PARSING = {
    1: [
        Template("int_list", ("parse_int_list", "parse_numbers"), "s: str", "list[int]",
                 "Parse a comma-separated list of integers like '1,2,3' into [1, 2, 3] ('' gives []).",
                 '    return [int(p) for p in s.split(",") if p]', _csv_ints),
        Template("kv_pair", ("parse_pair", "split_assignment"), "s: str", "tuple[str, str]",
                 "Parse 'key=value' into the tuple (key, value) of strings.",
                 '    return tuple(s.split("=", 1))', _kv1),
        Template("bool", ("parse_bool", "truthy"), "s: str", "bool",
                 "Return True if s is 'yes', 'true' or '1' in any letter case, else False.",
                 '    return s.lower() in ("yes", "true", "1")', _bool, split="heldout"),
        Template("hex", ("parse_hex", "from_hex"), "s: str", "int",
                 "Parse a hexadecimal string like 'ff' or 'FF' (no prefix) into an int.",
                 "    return int(s, 16)", _hex, split="heldout"),
    ],
    2: [
        Template("kv", ("parse_settings", "parse_kv"), "s: str", "dict[str, int]",
                 "Parse 'a=1;b=2' into {{'a': 1, 'b': 2}} (values are integers; '' gives {{}}).",
                 '    return {{k: int(v) for k, v in (p.split("=") for p in s.split(";") if p)}}', _kvs),
        Template("hhmm", ("parse_time", "minutes_since_midnight"), "s: str", "int",
                 "Parse a time 'HH:MM' into the number of minutes since midnight.",
                 '    h, m = s.split(":")\n    return int(h) * 60 + int(m)', _hhmm),
        Template("duration", ("parse_duration", "duration_minutes"), "s: str", "int",
                 "Parse a duration like '1h30m', '45m' or '2h' into minutes.",
                 "    total, num = 0, ''\n    for c in s:\n        if c.isdigit():\n            num += c\n"
                 "        else:\n            total += int(num) * (60 if c == 'h' else 1)\n            num = ''\n"
                 "    return total", _dur, split="heldout"),
        Template("version", ("parse_version", "version_tuple"), "s: str", "tuple[int, ...]",
                 "Parse a version like '1.10.3' into the tuple of ints (1, 10, 3).",
                 '    return tuple(int(p) for p in s.split("."))', _ver, split="heldout"),
    ],
    3: [
        Template("ini", ("parse_ini", "read_config"), "text: str", "dict[str, dict[str, str]]",
                 "Parse INI-like text: a '[name]' line starts a section, 'key = value' lines set keys of the "
                 "current section (strip spaces around key and value), blank lines and lines starting with '#' "
                 "are ignored. Return {{section: {{key: value}}}} with string values.",
                 "    out, cur = {{}}, None\n    for line in text.splitlines():\n        line = line.strip()\n"
                 "        if not line or line.startswith('#'):\n            continue\n"
                 "        if line.startswith('['):\n            cur = out.setdefault(line[1:-1], {{}})\n"
                 "        else:\n            k, v = line.split('=', 1)\n            cur[k.strip()] = v.strip()\n"
                 "    return out", _ini),
        Template("csv", ("parse_csv", "csv_records"), "text: str", "list[dict[str, str]]",
                 "Parse CSV text (first line is the header; fields separated by commas, no quoting) into a list "
                 "of dicts, one per data row, mapping header names to field strings.",
                 "    lines = text.splitlines()\n    header = lines[0].split(',')\n"
                 "    return [dict(zip(header, row.split(','))) for row in lines[1:]]", _csv),
        Template("roman", ("roman_to_int", "parse_roman"), "s: str", "int",
                 "Convert a Roman numeral (I V X L C D M, subtractive forms such as IV and CM) to an int.",
                 "    vals = {{'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}}\n"
                 "    total = 0\n    for i, c in enumerate(s):\n"
                 "        v = vals[c]\n        if i + 1 < len(s) and vals[s[i + 1]] > v:\n            total -= v\n"
                 "        else:\n            total += v\n    return total", _roman, split="heldout"),
        Template("rpn", ("eval_rpn", "rpn"), "expr: str", "int",
                 "Evaluate a reverse-Polish expression of integers and + - * separated by spaces, "
                 "e.g. '3 4 + 2 *' -> 14.",
                 "    stack = []\n    for tok in expr.split():\n        if tok in '+-*':\n"
                 "            b, a = stack.pop(), stack.pop()\n"
                 "            stack.append(a + b if tok == '+' else a - b if tok == '-' else a * b)\n"
                 "        else:\n            stack.append(int(tok))\n    return stack[-1]", _rpn,
                 split="heldout"),
    ],
}


PARSING = with_traps(PARSING, {
    "int_list": (("",), ("-5,10",), ("0",), ("7,7,7",)),
    "kv_pair": (("a=b=c",), ("k=",), ("é=ü",)),
    "bool": (("",), ("TRUE",), ("no",), ("2",)),
    "hex": (("0",), ("ffffffffffffffffffff",), ("aBc",)),
    "kv": (("",), ("a=1;",), ("a=-3;b=0",)),
    "hhmm": (("00:00",), ("23:59",), ("09:05",)),
    "duration": (("0m",), ("10h",), ("1h5m",)),
    "version": (("0",), ("1.0.10",), ("2024.1",)),
    "ini": (("",), ("# only a comment",), ("[s]\nk = a=b",), ("[a]\nx = 1\n[b]\nx = 2",)),
    "csv": (("name",), ("a,b\n1,2\n3,4",), ("é,ü\nñ,ç",)),
    "roman": (("I",), ("MMMCMXCIX",), ("XLIV",)),
    "rpn": (("7",), ("1 2 -",), ("2 3 4 * -",)),
})


# --------------------------------------------------------------------------------------------------------------
# class_spec: scripted method calls; a raised exception is recorded as its type name.

RUNNER = '''

def _run(init, ops):
    obj = {cls}(*init)
    out = []
    for name, *args in ops:
        try:
            out.append(getattr(obj, name)(*args))
        except Exception as exc:  # the spec says which errors are raised
            out.append(type(exc).__name__)
    return out
'''


Script = tuple[tuple[Any, ...], list[tuple[Any, ...]]]
"""(constructor arguments, method calls as (name, *args))."""


@dataclass(frozen=True)
class ClassTemplate:
    key: str
    names: tuple[str, ...]
    spec: str
    source: str
    script: Callable[[random.Random], tuple[tuple[Any, ...], list[tuple[Any, ...]]]]
    split: str = "train"
    traps: tuple[Script, ...] = ()
    """Edge-case scripts (empty structure, boundaries, repeats) graded apart from the main ones."""


def _counter_ops(rng: random.Random) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    return (), [rng.choice([("increment",), ("get",)]) for _ in range(rng.randint(1, 6))] + [("get",)]


def _acc_ops(rng: random.Random) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    return (), [rng.choice([("add", rng.randint(-5, 20)), ("total",)]) for _ in range(rng.randint(1, 6))]


def _stack_ops(rng: random.Random) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    return (), [rng.choice([("push", rng.randint(0, 9)), ("pop",), ("peek",), ("size",)]) for _ in range(8)]


def _queue_ops(rng: random.Random) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    return (), [rng.choice([("enqueue", rng.randint(0, 9)), ("dequeue",), ("size",)]) for _ in range(8)]


def _bank_ops(rng: random.Random) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    ops = [rng.choice([("deposit", rng.randint(-5, 50)), ("withdraw", rng.randint(-5, 60)), ("balance",)])
           for _ in range(8)]
    return (rng.randint(0, 30),), ops


def _lru_ops(rng: random.Random) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    ops = [rng.choice([("put", rng.choice("abcde"), rng.randint(0, 9)), ("get", rng.choice("abcde"))])
           for _ in range(10)]
    return (rng.randint(1, 3),), ops


CLASSES = {
    1: [
        ClassTemplate("counter", ("Counter", "Tally", "ClickCounter"),
                      "`{cls}()` starts at 0; `increment()` adds 1 and returns the new value; `get()` returns it.",
                      "class {cls}:\n    def __init__(self):\n        self.n = 0\n\n    def increment(self):\n"
                      "        self.n += 1\n        return self.n\n\n    def get(self):\n        return self.n\n",
                      _counter_ops, traps=(((), [("get",)]), ((), [("increment",)] * 30 + [("get",)]))),
        ClassTemplate("accumulator", ("Accumulator", "RunningTotal"),
                      "`{cls}()` starts at 0; `add(x)` adds x and returns None; `total()` returns the sum so far.",
                      "class {cls}:\n    def __init__(self):\n        self.sum = 0\n\n    def add(self, x):\n"
                      "        self.sum += x\n\n    def total(self):\n        return self.sum\n",
                      _acc_ops, split="heldout",
                      traps=(((), [("total",)]), ((), [("add", -5), ("add", BIG), ("total",)]))),
    ],
    2: [
        ClassTemplate("stack", ("Stack", "LifoStack"),
                      "`{cls}()` is empty; `push(x)` returns None; `pop()` removes and returns the last pushed item; "
                      "`peek()` returns it without removing; both raise IndexError when empty; `size()` counts items.",
                      "class {cls}:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n"
                      "        self.items.append(x)\n\n    def pop(self):\n        return self.items.pop()\n\n"
                      "    def peek(self):\n        return self.items[-1]\n\n    def size(self):\n"
                      "        return len(self.items)\n", _stack_ops,
                      traps=(((), [("pop",), ("peek",), ("size",)]),
                             ((), [("push", 1), ("push", 1), ("pop",), ("size",), ("pop",), ("pop",)]))),
        ClassTemplate("queue", ("Queue", "FifoQueue"),
                      "`{cls}()` is empty; `enqueue(x)` returns None; `dequeue()` removes and returns the oldest "
                      "item and raises IndexError when empty; `size()` counts items.",
                      "class {cls}:\n    def __init__(self):\n        self.items = []\n\n    def enqueue(self, x):\n"
                      "        self.items.append(x)\n\n    def dequeue(self):\n        if not self.items:\n"
                      "            raise IndexError('empty')\n        return self.items.pop(0)\n\n"
                      "    def size(self):\n        return len(self.items)\n", _queue_ops, split="heldout",
                      traps=(((), [("dequeue",), ("size",)]),
                             ((), [("enqueue", 1), ("enqueue", 2), ("dequeue",), ("enqueue", 3), ("dequeue",),
                                   ("dequeue",), ("dequeue",)]))),
    ],
    3: [
        ClassTemplate("bank", ("BankAccount", "Wallet"),
                      "`{cls}(balance)` starts with that balance; `deposit(amount)` and `withdraw(amount)` return "
                      "the new balance; both raise ValueError if amount <= 0, and withdraw raises ValueError if "
                      "amount exceeds the balance (the balance is then unchanged); `balance()` returns it.",
                      "class {cls}:\n    def __init__(self, balance):\n        self._b = balance\n\n"
                      "    def deposit(self, amount):\n        if amount <= 0:\n            raise ValueError(amount)\n"
                      "        self._b += amount\n        return self._b\n\n    def withdraw(self, amount):\n"
                      "        if amount <= 0 or amount > self._b:\n            raise ValueError(amount)\n"
                      "        self._b -= amount\n        return self._b\n\n    def balance(self):\n"
                      "        return self._b\n", _bank_ops,
                      traps=(((0,), [("withdraw", 1), ("deposit", 0), ("balance",)]),
                             ((10,), [("withdraw", 10), ("balance",), ("withdraw", -1), ("balance",)]),
                             ((5,), [("deposit", BIG), ("balance",)]))),
        ClassTemplate("lru", ("LRUCache", "RecentCache"),
                      "`{cls}(capacity)`; `get(key)` returns the value or -1 if absent (and marks the key as most "
                      "recently used); `put(key, value)` returns None, stores the value (marking it most recent) "
                      "and, when more than capacity keys are stored, evicts the least recently used key.",
                      "class {cls}:\n    def __init__(self, capacity):\n        self.cap = capacity\n"
                      "        self.data = {{}}\n\n    def get(self, key):\n        if key not in self.data:\n"
                      "            return -1\n        self.data[key] = self.data.pop(key)\n        return self.data[key]\n\n"
                      "    def put(self, key, value):\n        self.data.pop(key, None)\n        self.data[key] = value\n"
                      "        if len(self.data) > self.cap:\n            del self.data[next(iter(self.data))]\n",
                      _lru_ops, split="heldout",
                      traps=(((1,), [("put", "a", 1), ("put", "b", 2), ("get", "a"), ("get", "b")]),
                             ((2,), [("put", "a", 1), ("put", "b", 2), ("put", "a", 3), ("put", "c", 4), ("get", "b"),
                                     ("get", "a"), ("get", "c")]),
                             ((2,), [("put", "a", 1), ("get", "a"), ("put", "b", 2), ("put", "c", 3), ("get", "a"),
                                     ("get", "b")]))),
    ],
}


def class_tests(cls: str, source: str, scripts: Sequence[Script], prefix: str = "test") -> str:
    """One pytest function per script; expected results come from running the reference."""
    runner = RUNNER.format(cls=cls)
    namespace: dict[str, Any] = {}
    exec(compile(source + runner, "<reference>", "exec"), namespace)
    lines = [f"from solution import {cls}", runner.rstrip(), ""]
    for i, (init, ops) in enumerate(scripts):
        expected = namespace["_run"](init, ops)
        lines += ["", f"def {prefix}_{cls.lower()}_{i}():", f"    assert _run({init!r}, {ops!r}) == {expected!r}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _overlaps(script: Script, others: Sequence[Script]) -> bool:
    """Whether replaying ``script``'s outputs passes one of ``others``: the same constructor arguments, and one's
    calls a prefix of the other's (a class that answers the shown script's calls in order passes a shorter one)."""
    init, ops = script
    return any(init == i and (ops[: len(o)] == o or o[: len(ops)] == ops) for i, o in others)


def _class_one(rng: random.Random, split: str, d: int, i: int, seed: int) -> Task:
    pool = [t for t in CLASSES[min(d, 3)] if t.split == split]
    t = rng.choice(pool)
    cls = rng.choice(t.names)
    source = t.source.format(cls=cls)
    run_reference(source, cls)  # fails loudly if a template is broken
    scripts = [t.script(rng) for _ in range(3 + d)]
    spec = t.spec.format(cls=cls)
    traps = [s for s in t.traps if s not in scripts]  # traps stay apart from the main scripts
    prompt = f"Write `solution.py` defining the class `{cls}`. Spec: {spec}"
    visible = {}
    graded = scripts
    if d < MAX_DIFFICULTY:  # the visible script is drawn apart from the graded ones: hard-coding it earns nothing
        shown = next((s for s in (t.script(rng) for _ in range(50)) if not _overlaps(s, [*scripts, *traps])), None)
        if shown is None:
            shown, graded = scripts[0], scripts[1:]
        visible = {"test_visible.py": class_tests(cls, source, [shown])}
        prompt += " " + VISIBLE_NOTE
    return coding_task(
        family="class_spec", split=split, seed=seed, difficulty=d, index=i, unseen=False, prompt=prompt,
        tests={f"test_{cls.lower()}.py": class_tests(cls, source, graded)}, expected_tests=len(graded),
        reference_files={"solution.py": source},
        files={"solution.py": f"class {cls}:\n    pass  # implement the spec from the task\n"},
        visible_tests=visible, key=f"{t.key}-{cls}", extra_metadata={"class": cls},
        traps={f"test_{cls.lower()}_traps.py": class_tests(cls, source, traps, "test_trap")},
        expected_traps=len(traps),
    )


def _make_class_spec(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
    return generate("class_spec", split, n, seed, difficulty, _class_one)


FAMILIES = [
    FamilySpec("parsing", "coding", "parse a small text format (int lists, key=value, INI, CSV, roman, RPN)",
               True, template_family("parsing", PARSING, unseen=True)),
    FamilySpec("class_spec", "coding", "implement a small class to a spec (counter, stack, bank account, LRU)",
               False, _make_class_spec),
]

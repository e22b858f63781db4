"""The ``sandgym.tasks`` entry point: suite name -> ``make(split, n, seed, difficulty) -> list[Task]``."""

from __future__ import annotations

import random
from collections.abc import Callable

from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier


def make_arith(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
    """Arithmetic questions answered with a number (match verifier, number matcher)."""
    tasks = []
    for i in range(n):
        d = difficulty or 1 + i % 3
        rng = random.Random(f"arith/{split}/{seed}/{d}/{i}")
        a, b = rng.randint(2, 10 ** (d + 1)), rng.randint(2, 10 ** d)
        op = rng.choice("+-*")
        answer = str(eval(f"{a} {op} {b}"))  # our own two integers and an operator: trusted
        tasks.append(Task(
            id=f"arith/{split}/d{d}/s{seed}-{i}", domain="arith", family="arith", split=split,  # type: ignore[arg-type]
            prompt=f"What is {a} {op} {b}? Submit only the number.",
            verifier=Verifier(kind="match", answer=answer, matcher="number"),
            reference=Reference(answer=answer), limits=TaskLimits(max_turns=3), difficulty=d,
            metadata={"placement": "inline"},
        ))
    return tasks


def suites() -> dict[str, Callable[[str, int, int, int | None], list[Task]]]:
    return {"arith": make_arith}

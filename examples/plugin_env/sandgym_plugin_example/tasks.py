"""The ``sandgym.tasks`` entry point: suite name -> ``make(split, n, seed, difficulty) -> list[Task]``."""

from __future__ import annotations

import json
import random
import statistics
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


def _stats_tasks(family: str, asked: tuple[str, ...], split: str, n: int, seed: int,
                 difficulty: int | None, *, unseen: bool = False) -> list[Task]:
    tasks = []
    for i in range(n):
        d = difficulty or 1 + i % 3
        rng = random.Random(f"stats/{family}/{split}/{seed}/{d}/{i}")
        data = [round(rng.uniform(-100, 100), 3) for _ in range(5 * 2 ** d)]
        ref = {"mean": statistics.fmean(data), "std": statistics.pstdev(data), "median": statistics.median(data)}
        names = " and ".join(f'"{a}"' for a in asked)
        tasks.append(Task(
            id=f"stats/{family}/{split}/d{d}/s{seed}-{i}", domain="stats", family=family,
            split=split,  # type: ignore[arg-type]
            prompt=(f"data.csv has one number per line. Write result.json with the keys {names} (population "
                    "statistics of those numbers, as JSON numbers), then submit."),
            files={"data.csv": "\n".join(map(str, data)) + "\n"},
            verifier=Verifier(kind="host", host="plugin_example.stats@v1"),
            reference=Reference(files={"result.json": json.dumps({a: ref[a] for a in asked})}),
            limits=TaskLimits(max_turns=6), difficulty=d, unseen=unseen,
            metadata={"data": data, "statistics": list(asked), "rtol": 1e-6},
        ))
    return tasks


def make_moments(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
    """Mean and standard deviation of a file of numbers (host-side verifier with numpy)."""
    return _stats_tasks("moments", ("mean", "std"), split, n, seed, difficulty)


def make_median(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
    """Median of a file of numbers (host-side verifier with numpy); an unseen family: heldout of ``stats`` only."""
    return _stats_tasks("median", ("median",), split, n, seed, difficulty, unseen=True)


make_median.unseen = True  # type: ignore[attr-defined]


def suites() -> dict[str, Callable[[str, int, int, int | None], list[Task]]]:
    """Suites ``arith``, ``stats/moments`` and ``stats/median`` (sandgym groups the last two as domain ``stats``)."""
    return {"arith": make_arith, "stats/moments": make_moments, "stats/median": make_median}

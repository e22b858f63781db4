"""Trap tests of the built-in coding families: present, deterministic, apart from the main tests, and meaningful
(a plausible-but-wrong solution passes every main hidden test yet fails a trap, in the real sandbox)."""

from __future__ import annotations

import importlib.util
import random

import pytest

from sandgym.tasks.suites import MAX_DIFFICULTY, get_family
from sandgym.tasks.suites.base import Template, function_task
from sandgym.tasks.suites.coding_basic import NUMBERS, STRINGS
from sandgym.tasks.suites.coding_spec import PARSING

TRAP_FAMILIES = ("strings", "lists", "numbers", "parsing", "class_spec", "bugfix", "repo_fix")


@pytest.mark.parametrize("name", TRAP_FAMILIES)
def test_every_instance_carries_traps_apart_from_main_tests(name: str) -> None:
    fam = get_family("coding", name)
    for split in ("train", "heldout"):
        for d in range(1, MAX_DIFFICULTY + 1):
            for task in fam.make(split, 3, 5, d):
                v = task.verifier
                assert v.traps and v.expected_traps > 0, task.id
                assert not set(v.traps) & set(v.tests), "trap files are separate files"
                assert sum(src.count("\ndef test_") for src in v.traps.values()) == v.expected_traps
                main = "".join(v.tests.values())
                for src in v.traps.values():  # no trap repeats a main case
                    for line in src.splitlines():
                        if line.strip().startswith("assert "):
                            assert line not in main, (task.id, line)
    assert fam.make("train", 4, 1, None) == fam.make("train", 4, 1, None)


def _tpl(table: dict[int, list[Template]], key: str) -> Template:
    return next(t for ts in table.values() for t in ts if t.key == key)


# Plausible-but-wrong bodies: right on the everyday inputs the main tests draw, wrong on an edge case.
WRONG = [
    (NUMBERS, "is_even", "    return int(x / 2) * 2 == x\n"),  # float division loses precision past 2**53
    (NUMBERS, "fib", "    phi = (1 + 5 ** 0.5) / 2\n    return round(phi ** n / 5 ** 0.5)\n"),  # Binet: floats
    (STRINGS, "strip", '    return s.replace(" ", "")\n'),  # also removes inner spaces
    (PARSING, "kv_pair", '    return tuple(s.split("="))\n'),  # breaks on '=' inside the value
]


def _wrong_task(table: dict[int, list[Template]], key: str, body: str) -> tuple[object, str]:
    problem = _tpl(table, key).instantiate(random.Random(f"traps-demo/{key}"))
    task = function_task(problem, family="demo", split="train", seed=0, difficulty=1, index=0)
    return task, f"{problem.signature}\n{body}"


HAS_LOCAL = importlib.util.find_spec("sandgym.sandbox.local") is not None


@pytest.fixture(scope="module")
def sandbox():
    if not HAS_LOCAL:
        pytest.skip("sandgym.sandbox.local is not available")
    from sandgym.sandbox import LocalSandbox

    try:
        sb = LocalSandbox()
    except Exception as exc:  # no namespaces on this machine: the sandbox's own tests cover that
        pytest.skip(f"local sandbox unavailable: {exc}")
    yield sb
    sb.close()


@pytest.mark.parametrize(("table", "key", "body"), WRONG, ids=[w[1] for w in WRONG])
def test_plausible_wrong_solution_passes_main_tests_but_fails_traps(sandbox, table, key, body) -> None:
    task, source = _wrong_task(table, key, body)
    v = task.verifier
    sandbox.exec("find . -mindepth 1 -delete")
    sandbox.write_file("solution.py", source)
    main = sandbox.run_tests(v.tests, expected=v.expected_tests, timeout=60)
    assert main.all_passed, (key, [o for o in main.outcomes if o.outcome != "passed"])
    traps = sandbox.run_tests(v.traps, expected=v.expected_traps, timeout=60)
    assert traps.report_found and traps.passed < v.expected_traps, (key, traps.outcomes)
    sandbox.write_file("solution.py", task.reference.files["solution.py"])  # the reference passes both
    assert sandbox.run_tests(v.traps, expected=v.expected_traps, timeout=60).all_passed

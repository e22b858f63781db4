"""Trap (edge-case) inputs of the built-in coding families, kept apart from the main hidden tests.

Traps probe what a plausible answer misses: empty input, boundaries, large numbers (where float shortcuts lose
precision), unicode, duplicates and ordering. Each one stays inside the problem's stated domain (a template whose
doc says "never empty" gets no empty trap), and the expected values come from the reference, so the reference
passes every trap by construction (``trap_tests`` fails loudly when the reference cannot handle one).

Traps are graded separately (``Verifier.traps``): ``completion`` is decided by the main hidden tests alone, and
``traps@v1`` scores the share of traps passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.suites.reference import call_args, copy_value, run_reference

__all__ = ["BIG", "DEFAULT_TRAPS", "default_traps", "trap_file", "trap_tests"]

BIG = 2**64 + 1
"""Beyond 64-bit integers and beyond exact floats: ``x / 2`` and ``n ** 0.5`` shortcuts break here."""

DEFAULT_TRAPS: dict[str, tuple[tuple[Any, ...], ...]] = {
    "s: str": (("",), ("ñandú über",), ("ab ab",)),
    "xs: list[int]": (([],), ([7],), ([3, 3, 3],), ([BIG, -BIG, BIG],), ([5, -1, 5, 0, -1],)),
    "x: int": ((0,), (-1,), (BIG,), (-(10**20),), (2**60 + 2,)),
    "words: list[str]": (([],), (["a", "a"],), (["ünï", "é"],)),
    "xss: list[list[int]]": (([],), ([[]],), ([[1], [], [2, 2]],)),
    "a: dict[str, int], b: dict[str, int]": (({}, {}), ({"a": 1}, {}), ({}, {"b": 2}), ({"a": BIG}, {"a": BIG})),
}
"""Edge inputs by parameter list, for templates that take any value of their type."""


def default_traps(params: str) -> tuple[tuple[Any, ...], ...]:
    """The default traps of a parameter list (empty when there is no default for it)."""
    return DEFAULT_TRAPS.get(params, ())


def trap_file(name: str) -> str:
    """The hidden file name of a problem's traps (distinct from its main test file)."""
    return f"test_{name}_traps.py"


def trap_tests(
    name: str, source: str, traps: Sequence[tuple[Any, ...]], exclude: Sequence[tuple[Any, ...]] = ()
) -> tuple[str, int]:
    """(pytest source with one test per trap, number of tests); inputs already in ``exclude`` are left out.

    Raises TaskError when the reference raises on a trap (the trap is outside the problem's domain).
    """
    fn = run_reference(source, name)
    seen = {repr(a) for a in exclude}
    lines = [f"from solution import {name}", ""]
    n = 0
    for args in traps:
        if repr(args) in seen:
            continue
        seen.add(repr(args))
        try:
            expected = fn(*[copy_value(a) for a in args])
        except Exception as exc:
            raise TaskError(f"trap {name}({call_args(args)}) makes the reference raise {exc!r}; "
                            "give the template explicit traps inside its domain") from exc
        lines += ["", f"def test_trap_{name}_{n}():", f"    assert {name}({call_args(args)}) == {expected!r}", ""]
        n += 1
    return "\n".join(lines).rstrip() + "\n", n

"""Running our own generated reference solutions (trusted code) to compute expected values, shared by the
suite builders (``base``) and the trap builders (``traps``)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

__all__ = ["call_args", "copy_value", "run_reference"]


def run_reference(source: str, name: str) -> Any:
    """Execute our own (trusted, generated) reference source and return the object ``name`` it defines."""
    namespace: dict[str, Any] = {"__name__": "solution"}
    exec(compile(source, "<reference solution.py>", "exec"), namespace)
    return namespace[name]


def call_args(args: Sequence[Any]) -> str:
    return ", ".join(repr(a) for a in args)


def copy_value(value: Any) -> Any:
    """A deep copy, so a reference that mutates its input cannot change the test case."""
    return copy.deepcopy(value)

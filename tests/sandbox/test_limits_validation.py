"""A sandbox ``Limits`` that is zero, negative, NaN, infinite or not a number is a ValueError naming the
field and the fix when it is made (``exec_timeout_s = 0`` used to reach the sandbox and kill every call)."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from sandgym.sandbox import Limits

FIELDS = [f.name for f in fields(Limits)]


def test_every_limit_field_is_checked() -> None:
    assert {"timeout_s", "memory_mb", "max_procs", "workspace_mb", "tmp_mb", "max_output_bytes",
            "max_file_mb"} <= set(FIELDS)


@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("bad", [0, -1, -0.5, math.nan, math.inf, -math.inf, True, "10", None])
def test_bad_limits_name_the_field_and_the_fix(name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=rf"Limits\.{name}=.*must be a finite number > 0; pass a positive value, "
                                         rf"e\.g\. {name}="):
        Limits(**{name: bad})  # type: ignore[arg-type]


def test_exec_timeout_zero_says_where_it_comes_from() -> None:
    with pytest.raises(ValueError, match=r"Limits\.timeout_s=0 \(a task's limits\.exec_timeout_s sets it\)"):
        Limits(timeout_s=0)


def test_good_limits_pass() -> None:
    assert Limits() == Limits(**{f.name: f.default for f in fields(Limits)})
    small = Limits(timeout_s=0.5, memory_mb=64, max_procs=1, workspace_mb=1, tmp_mb=1, max_output_bytes=1,
                   max_file_mb=1)
    assert small.timeout_s == 0.5 and small.workspace_mb == 1

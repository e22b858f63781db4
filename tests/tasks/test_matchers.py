"""Matchers: small pure functions deciding an answer against the expected one."""

from __future__ import annotations

import pytest

from sandgym.errors import TaskError
from sandgym.tasks.matchers import MATCHER_FUNCTIONS, match, parse_number
from sandgym.tasks.task import MATCHERS


@pytest.mark.parametrize(
    ("answer", "expected", "matcher", "ok"),
    [
        ("E123", "E123", "exact", True),
        (" E123\n", "E123", "exact", True),
        ("e123", "E123", "exact", False),
        ("  The Amber.  ", "amber", "normalized", False),
        ("`Amber`.", "amber", "normalized", True),
        ("AMBER", "amber", "normalized", True),
        ("The total is 1,234.", "1234", "number", True),
        ("42.0", "42", "number", True),
        ("-7", "7", "number", False),
        ("no number", "7", "number", False),
        ("the database is Amber", "amber", "contains", True),
        ("basalt", "amber", "contains", False),
        ("E123", r"E\d+", "regex", True),
        ("xE123", r"E\d+", "regex", False),
        ("b, a; C", "a,b,c", "set", True),
        ("[a, b]", "a, b, c", "set", False),
    ],
)
def test_matchers(answer: str, expected: str, matcher: str, ok: bool) -> None:
    assert match(answer, expected, matcher) is ok


def test_every_declared_matcher_exists() -> None:
    assert set(MATCHER_FUNCTIONS) == set(MATCHERS)


def test_errors_and_parsing() -> None:
    with pytest.raises(TaskError, match="unknown matcher 'fuzzy'"):
        match("a", "a", "fuzzy")
    with pytest.raises(TaskError, match="not a valid regex"):
        match("a", "(", "regex")
    assert parse_number("between 3 and 4.5e1") == 45.0

"""What a repository's own tests need across the grading boundary, and what it must never let through.

The solution runs in a process of its own (``solution_host.py``); the tests reach it through handles
(``grader_link.py``). Real test suites pass callbacks and iterators in, check ``isinstance`` against the project's
classes, read docstrings and compare dates, decimals and paths: each works here. Callbacks never become a way
around a failed check: an assertion a callback raises fails the test even when the solution swallows it, and a
handle to the test's objects never leads to the grader's modules.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandgym.sandbox import LocalSandbox

SOLUTION = '''
import datetime, decimal, fractions, pathlib, uuid

class Shape:
    """A shape."""
class Square(Shape):
    def __init__(self, side): self.side = side

def apply(f, xs): return [f(x) for x in xs]
def apply_kw(f, x): return f(x, scale=3)
def total(iterable): return sum(iterable)
def first_two(seq): return [seq[0], seq[1], len(seq), 2 in seq]
def make(kind): return kind(4)
def later(day): return day + datetime.timedelta(days=1)
def values():
    return [datetime.datetime(2024, 5, 6, 7, 8, 9), datetime.date(2024, 1, 2), decimal.Decimal("1.10"),
            fractions.Fraction(1, 3), pathlib.PurePosixPath("a/b"), uuid.UUID(int=5)]
def swallow(check, x):
    try:
        check(x)
    except BaseException:
        pass
    return x
def reach(obj):
    out = []
    for name in ("__globals__", "__dict__", "__code__", "__closure__", "__self__", "__wrapped__"):
        try:
            out.append(repr(getattr(obj, name)))
        except Exception as exc:
            out.append(type(exc).__name__)
    return out
'''

TESTS = {"test_cb.py": '''
import datetime, decimal, fractions, operator, pathlib, uuid
import pytest
import solution
from solution import Shape, Square, apply, apply_kw, total, first_two, make, later, values, swallow, reach

def test_callbacks():
    seen = []
    assert apply(lambda x: x * 2, [1, 2]) == [2, 4]
    assert apply(seen.append, [1, 2]) == [None, None] and seen == [1, 2]
    assert apply(len, ["ab", "c"]) == [2, 1]
    assert apply(operator.neg, [1]) == [-1]
    assert apply_kw(lambda x, scale: x * scale, 2) == 6
    with pytest.raises(ZeroDivisionError):
        apply(lambda x: 1 // x, [0])

def test_iterators_and_sequences():
    assert total(iter((1, 2, 3))) == 6
    assert total(x for x in range(4)) == 6
    class Seq:
        def __getitem__(self, i): return [7, 8][i]
        def __len__(self): return 2
        def __contains__(self, x): return x == 2
    assert first_two(Seq()) == [7, 8, 2, True]
    assert make(str) == "4" and make(float) == 4.0

def test_isinstance_and_doc():
    sq = Square(2)
    assert isinstance(sq, Square) and isinstance(sq, Shape) and not isinstance(3, Shape)
    assert isinstance(sq, (int, Shape))
    assert issubclass(Square, Shape) and not issubclass(Shape, Square)
    assert Shape.__doc__ == "A shape."

def test_values_cross_by_value():
    assert later(datetime.date(2024, 2, 28)) == datetime.date(2024, 2, 29)
    assert values() == [datetime.datetime(2024, 5, 6, 7, 8, 9), datetime.date(2024, 1, 2), decimal.Decimal("1.10"),
                        fractions.Fraction(1, 3), pathlib.PurePosixPath("a/b"), uuid.UUID(int=5)]

def test_swallowed_assertion_still_fails():
    def check(x):
        assert x > 10, "too small"
    swallow(check, 3)

def test_swallowed_pytest_fail_still_fails():
    swallow(lambda x: pytest.fail("never"), 3)

def test_handles_do_not_reach_the_grader():
    seen = []
    out = reach(lambda: None) + reach(seen.append) + reach(pytest.fail)
    assert all(o in ("AttributeError",) for o in out), out
'''}


@pytest.fixture(scope="module")
def sb() -> Iterator[LocalSandbox]:
    with LocalSandbox() as box:
        box.write_file("solution.py", SOLUTION)
        yield box


def test_repository_style_tests_pass_and_a_swallowed_failed_check_still_fails(sb: LocalSandbox) -> None:
    rep = sb.run_tests(TESTS, expected=7)
    by_name = {o.name.rsplit("::", 1)[-1]: o for o in rep.outcomes}
    for name in ("test_callbacks", "test_iterators_and_sequences", "test_isinstance_and_doc",
                 "test_values_cross_by_value", "test_handles_do_not_reach_the_grader"):
        assert by_name[name].outcome == "passed", (name, by_name[name].message[-800:])
    assert by_name["test_swallowed_assertion_still_fails"].outcome == "failed"
    assert "too small" in by_name["test_swallowed_assertion_still_fails"].message
    assert by_name["test_swallowed_pytest_fail_still_fails"].outcome == "failed"


def test_the_solutions_warnings_meet_the_tests_filters(sb: LocalSandbox) -> None:
    sb.write_file("legacy.py", "import warnings\nclass Old(DeprecationWarning):\n    pass\n"
                               "def area(w, h):\n    warnings.warn('use rect', Old)\n    return w * h\n"
                               "def quiet(w, h):\n    return w * h\n")
    tests = {"pytest.ini": "[pytest]\nfilterwarnings =\n    error\n", "test_warn.py": (
        "import pytest\nfrom legacy import area, quiet, Old\n\n"
        "def test_warns():\n    with pytest.warns(DeprecationWarning, match='use rect'):\n        assert area(2, 3) == 6\n\n"
        "def test_error_filter():\n    with pytest.raises(Old):\n        area(1, 1)\n\n"
        "def test_unexpected_warning_fails():\n    assert area(1, 1) == 1\n\n"
        "def test_quiet():\n    assert quiet(2, 2) == 4\n")}
    rep = sb.run_tests(tests, expected=4)
    by_name = {o.name.rsplit("::", 1)[-1]: o.outcome for o in rep.outcomes}
    assert by_name == {"test_warns": "passed", "test_error_filter": "passed", "test_unexpected_warning_fails": "failed",
                       "test_quiet": "passed"}

"""Answer matchers for ``match`` verifiers: small pure functions ``(answer, expected) -> bool``.

>>> match("  The Answer. ", "the answer", "normalized")
True
>>> match("about 42.0 units", "42", "number")
True
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable

from sandgym.errors import TaskError
from sandgym.tasks.task import MATCHERS

_NUMBER = re.compile(r"[-+]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def normalize(text: str) -> str:
    """Lower-case, strip surrounding quotes/backticks/punctuation, collapse whitespace."""
    text = " ".join(text.strip().lower().split())
    return text.strip(string.punctuation.replace("#", "") + " ")


def exact(answer: str, expected: str) -> bool:
    """Identical after stripping surrounding whitespace."""
    return answer.strip() == expected.strip()


def normalized(answer: str, expected: str) -> bool:
    """Equal after ``normalize`` (case, surrounding punctuation and whitespace ignored)."""
    return normalize(answer) == normalize(expected)


def parse_number(text: str) -> float | None:
    """The last number in ``text`` (commas as thousands separators allowed), or None."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def number(answer: str, expected: str, *, rel_tol: float = 1e-6) -> bool:
    """The last number in the answer equals the expected number (relative tolerance 1e-6)."""
    got, want = parse_number(answer), parse_number(expected)
    if got is None or want is None:
        return False
    return abs(got - want) <= rel_tol * max(1.0, abs(want))


def contains(answer: str, expected: str) -> bool:
    """The normalised expected text occurs in the normalised answer."""
    want = normalize(expected)
    return bool(want) and want in normalize(answer)


def regex(answer: str, expected: str) -> bool:
    """``expected`` is a regular expression that must match the whole stripped answer."""
    try:
        return re.fullmatch(expected, answer.strip()) is not None
    except re.error as exc:
        raise TaskError(f"matcher 'regex': expected answer {expected!r} is not a valid regex ({exc}); fix it") from exc


def as_set(answer: str, expected: str) -> bool:
    """Same items ignoring order, case and duplicates; items are separated by commas, semicolons or newlines."""

    def items(text: str) -> set[str]:
        return {normalize(p) for p in re.split(r"[,;\n]", text.strip().strip("[]{}()")) if normalize(p)}

    return items(answer) == items(expected)


MATCHER_FUNCTIONS: dict[str, Callable[[str, str], bool]] = {
    "exact": exact,
    "normalized": normalized,
    "number": number,
    "contains": contains,
    "regex": regex,
    "set": as_set,
}
assert set(MATCHER_FUNCTIONS) == set(MATCHERS)


def match(answer: str, expected: str, matcher: str = "normalized") -> bool:
    """Decide ``answer`` against ``expected`` with the named matcher; TaskError for an unknown name."""
    fn = MATCHER_FUNCTIONS.get(matcher)
    if fn is None:
        raise TaskError(f"unknown matcher {matcher!r}; use one of {tuple(MATCHER_FUNCTIONS)}")
    return fn(answer, expected)

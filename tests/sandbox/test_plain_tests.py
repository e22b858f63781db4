"""Plain hidden test files run without pytest, with the outcomes and failure lines pytest gives."""

from __future__ import annotations

import os

import pytest

import sandgym.sandbox.local as local
from sandgym.envs.builtin_tools import failure_summary
from sandgym.sandbox.local import LocalSandbox
from sandgym.sandbox.plain_tests import plain_test_file, plain_test_files

PLAIN = "from solution import f\n\nLIMIT = 3\n\n\ndef test_a():\n    assert f(1) == 2\n"


@pytest.mark.parametrize(("source", "plain"), [
    (PLAIN, True),
    ('"""doc"""\nimport math\nfrom solution import f\n\ndef helper():\n    return 1\n\ndef test_b():\n    assert f(helper())\n', True),
    ("import pytest\n\ndef test_a():\n    with pytest.raises(ValueError):\n        pass\n", False),
    ("from solution import f\n\n@decorate\ndef test_a():\n    pass\n", False),
    ("def test_a(tmp_path):\n    pass\n", False),
    ("class TestA:\n    def test_a(self):\n        pass\n", False),
    ("def test_a():\n    yield 1\n", False),
    ("print('import-time code')\n\ndef test_a():\n    pass\n", False),
    ("from helpers import test_shared\n\ndef test_a():\n    pass\n", False),
    ("pytestmark = 1\n\ndef test_a():\n    pass\n", False),
    ("def helper():\n    pass\n", False),  # no test: pytest decides what an empty file means
    ("def test_a(:\n", False),  # a syntax error is pytest's collection error
])
def test_which_files_are_plain(source: str, plain: bool) -> None:
    assert plain_test_file(source) is plain


def test_a_set_is_plain_only_without_conftest_helpers_or_folders() -> None:
    assert plain_test_files({"test_a.py": PLAIN, "data.txt": "x"})
    assert not plain_test_files({"test_a.py": PLAIN, "conftest.py": ""})
    assert not plain_test_files({"test_a.py": PLAIN, "helpers.py": ""})
    assert not plain_test_files({"tests/test_a.py": PLAIN})


TESTS = {
    "test_one.py": ("from solution import stretch\n\n\ndef test_ok():\n    assert stretch('a') == 'aa'\n\n\n"
                    "def test_wrong():\n    assert stretch('ab') == 'aabb'\n\n\ndef test_raises():\n"
                    "    assert stretch(None) == ''\n\n\ndef test_exit():\n    raise SystemExit(0)\n"),
    "test_two.py": "from solution import missing\n\n\ndef test_never():\n    assert missing()\n",
}
SOLUTION = "def stretch(s):\n    return 'aa' if s == 'a' else ''.join(c * 3 for c in s)\n"


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs /usr/bin/python3")
def test_plain_run_reports_what_pytest_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plain_test_files(TESTS)
    reports = {}
    with LocalSandbox() as box:
        box.write_file("solution.py", SOLUTION)
        for plain in (False, True):
            monkeypatch.setattr(local, "PLAIN_TESTS", plain)
            reports[plain] = box.run_tests(TESTS, expected=5)
    by_pytest, by_plain = reports[False], reports[True]
    assert sorted((o.name, o.outcome) for o in by_plain.outcomes) == sorted(
        (o.name, o.outcome) for o in by_pytest.outcomes)
    assert by_plain.passed == 1 and by_plain.report_found
    for a, b in zip(sorted(by_pytest.outcomes, key=str), sorted(by_plain.outcomes, key=str), strict=True):
        if a.outcome == "failed":  # what the agent is shown of a failure is the same line and error
            assert failure_summary(b.message) == failure_summary(a.message), (a.message, b.message)
    wrong = next(o for o in by_plain.outcomes if o.name.endswith("test_wrong"))
    assert failure_summary(wrong.message) == "assert stretch('ab') == 'aabb' | AssertionError: assert 'aaabbb' == 'aabb'"

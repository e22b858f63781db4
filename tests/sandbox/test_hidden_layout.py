"""Hidden tests keep a repository's layout: nested test folders, the task's own conftest.py fixtures, helper
modules, data files and package-relative imports work, in both isolation modes; a conftest.py the agent writes in
the workspace still never loads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandgym.sandbox import LocalSandbox

HIDDEN = {
    "tests/__init__.py": "",
    "tests/conftest.py": "import pytest\n\n@pytest.fixture\ndef numbers():\n    return [1, 2, 3]\n",
    "tests/helpers.py": "def expected_total(xs):\n    return sum(xs)\n",
    "tests/data/cases.txt": "4 5\n",
    "tests/unit/__init__.py": "",
    "tests/unit/test_calc.py": (
        "import os\nfrom mypkg.calc import total\nfrom ..helpers import expected_total\n\n"
        "def test_fixture(numbers):\n    assert total(numbers) == expected_total(numbers)\n\n"
        "def test_data():\n"
        "    path = os.path.join(os.path.dirname(__file__), '..', 'data', 'cases.txt')\n"
        "    xs = [int(x) for x in open(path).read().split()]\n"
        "    assert total(xs) == 9\n"),
}


@pytest.fixture(scope="module")
def sb() -> Iterator[LocalSandbox]:
    box = LocalSandbox()
    box.write_file("mypkg/__init__.py", "")
    box.write_file("mypkg/calc.py", "def total(xs):\n    return sum(xs)\n")
    yield box
    box.close()


@pytest.mark.parametrize("isolation", ["process", "in-process"])
def test_repository_layout_runs(sb: LocalSandbox, isolation: str) -> None:
    rep = sb.run_tests(HIDDEN, expected=2, isolation=isolation)
    assert rep.passed == 2, [(o.name, o.message[-300:]) for o in rep.outcomes]
    assert {o.name for o in rep.outcomes} == {"tests/unit/test_calc.py::test_fixture",
                                              "tests/unit/test_calc.py::test_data"}
    # the whole hidden tree is gone again (only the solution's empty links folder stays, bound into its zygote)
    assert sb.exec("ls -A /.grader").stdout in ("", "links\n")
    assert sb.exec("ls -A /.grader/links 2>/dev/null").stdout == ""


def test_agent_conftest_never_loads_next_to_task_conftest(sb: LocalSandbox) -> None:
    hack = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
    sb.write_file("conftest.py", hack)
    sb.write_file("tests/conftest.py", hack)
    sb.write_file("mypkg/calc.py", "def total(xs):\n    return -1\n")
    try:
        assert sb.run_tests(HIDDEN, expected=2).passed == 0
    finally:
        sb.write_file("mypkg/calc.py", "def total(xs):\n    return sum(xs)\n")


def test_hidden_set_needs_a_test_file(sb: LocalSandbox) -> None:
    with pytest.raises(ValueError, match="no test file"):
        sb.run_tests({"tests/conftest.py": ""}, expected=1)
    with pytest.raises(ValueError, match="inside the workspace|relative path"):
        sb.run_tests({"../test_x.py": ""}, expected=1)


def test_a_root_pytest_ini_among_the_hidden_files_is_the_one_pytest_runs_with(sb: LocalSandbox) -> None:
    warns = ("import warnings\n\nimport pytest\n\n\n@pytest.mark.slow\ndef test_warns_as_error():\n"
             "    with pytest.raises(UserWarning):\n        warnings.warn('x')\n")
    ini = "[pytest]\nfilterwarnings = error\nmarkers = slow: a slow test\naddopts = --strict-markers\n"
    sb.write_file("pytest.ini", "[pytest]\naddopts = -p no:python\n")  # the workspace's never applies
    try:
        assert sb.run_tests({"pytest.ini": ini, "tests/test_w.py": warns}, expected=1, isolation="in-process").passed == 1
        without = sb.run_tests({"tests/test_w.py": warns}, expected=1, isolation="in-process")
        assert without.passed == 0 and without.reported == 1  # no warning filter: nothing raised
    finally:
        sb.exec("rm -f pytest.ini")
    with pytest.raises(ValueError, match="only at their root"):
        sb.run_tests({"tests/pytest.ini": ini, "tests/test_w.py": warns}, expected=1)

"""Which Harbor test.sh files become sandgym's own ``tests`` verifier (pure parsing, no sandbox)."""

from __future__ import annotations

import pytest

from sandgym.interop.harbor_pytest import PytestPlan, count_tests, hidden_tests, pytest_plan
from tests.interop.harbor_fixture import TEST_OUTPUTS, TEST_SH, TEST_SH_TRAP, TEST_SH_UVX

TESTS = {"test.sh": "", "test_outputs.py": TEST_OUTPUTS, "test_other.py": "def test_x():\n    pass\n",
         "expected.json": '{"path": "/app/out.txt", "here": "/tests/expected.json"}'}


@pytest.mark.parametrize("script", [
    TEST_SH, TEST_SH_UVX, TEST_SH_TRAP,
    "cd /app\npython -m pytest -q -p no:cacheprovider --tb=short /tests/test_outputs.py\n",
    "#!/bin/bash\nmkdir -p /logs/verifier\npip install pytest==8.4.1\nuv run --with pytest pytest -rA -v "
    "$TEST_DIR/test_outputs.py > /logs/verifier/out.txt 2>&1\necho $? > /logs/verifier/reward.txt\n",
])
def test_pytest_only_scripts_are_recognised(script: str) -> None:
    plan = pytest_plan(script, TESTS, "/app")
    assert isinstance(plan, PytestPlan), plan
    assert plan.files == ["test_outputs.py"]
    assert plan.requirements == (["numpy"] if script == TEST_SH_TRAP else [])


@pytest.mark.parametrize(("script", "why"), [
    ("pytest /tests/test_outputs.py -k fast\n", "option '-k'"),
    ("cd /tmp\npytest /tests/test_outputs.py\n", "changes to '/tmp'"),
    ("pytest /tests/test_outputs.py\npython3 /tests/check.py\n", "'python3' is not a setup"),
    ("pytest /tests\npython3 - <<'EOF'\nprint(1)\nEOF\n", "here-document"),
    ("pytest /tests/test_outputs.py::test_file\n", "not a test file or folder under /tests"),
    ("pytest tests/test_outputs.py\n", "not a test file or folder under /tests"),
    ("bash /tests/run.sh\n", "runs another script"),
    ("export FOO=1\npytest /tests\n", "exports FOO"),
    ("pytest /tests > /tmp/out\n", "output goes to /tmp/out"),
    ("echo 1 > /logs/verifier/reward.txt\n", "does not run pytest"),
])
def test_scripts_that_do_more_keep_the_script_verifier_with_the_reason(script: str, why: str) -> None:
    plan = pytest_plan(script, TESTS, "/app")
    assert isinstance(plan, str) and why in plan, plan


def test_hidden_files_map_paths_and_leave_out_test_files_test_sh_does_not_run() -> None:
    out = hidden_tests(PytestPlan(["test_outputs.py"]), TESTS, "/app", "/workspace")
    assert not isinstance(out, str)
    files, expected = out
    assert sorted(files) == ["expected.json", "test_outputs.py"] and expected == 2
    assert files["expected.json"] == '{"path": "/workspace/out.txt", "here": "/.grader/expected.json"}'
    assert "/app" not in files["test_outputs.py"]
    logs = hidden_tests(PytestPlan(["test_outputs.py"]), {"test_outputs.py": "open('/logs/x')\n"}, "/app", "/w")
    assert isinstance(logs, str) and "/logs" in logs


def test_test_cases_are_counted_from_the_source_or_not_at_all() -> None:
    src = ("import pytest, unittest\n\n@pytest.mark.parametrize('a,b', [(1, 2), (3, 4), pytest.param(5, 6)])\n"
           "@pytest.mark.parametrize('c', [0, 1])\ndef test_p(a, b, c):\n    pass\n\ndef helper():\n    pass\n\n"
           "class TestA:\n    def test_1(self):\n        pass\n    def util(self):\n        pass\n\n"
           "class Case(unittest.TestCase):\n    def test_u(self):\n        pass\n\n"
           "class TestSkipped:\n    def __init__(self):\n        pass\n    def test_never(self):\n        pass\n")
    assert count_tests(src) == 6 + 1 + 1
    assert count_tests("import pytest\n@pytest.mark.parametrize('x', range(3))\ndef test_a(x):\n    pass\n") is None
    assert count_tests("import pytest\n@pytest.fixture(params=[1, 2])\ndef f(request):\n    pass\n") is None
    assert count_tests("import pytest\n@pytest.mark.skip\ndef test_a():\n    pass\n") is None

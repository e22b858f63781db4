"""Reward hacking is closed, checked through the env with the real sandbox (the demo ``add`` task)."""

from __future__ import annotations

import pytest

from sandgym.agents.scripted import call
from sandgym.envs.demo_tasks import demo_tasks
from sandgym.envs.tool_env import ToolEnv

STUB = "def add(a: int, b: int) -> int:\n    raise NotImplementedError\n"
FAKE_SOLUTION = (
    "import sys, types\n"
    "m = types.ModuleType('solution'); m.add = lambda a, b: a + b; sys.modules['solution'] = m\n"
)
FORCE_PASS = FAKE_SOLUTION + (
    "import pytest\n\n\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    outcome.get_result().outcome = 'passed'\n"
)


@pytest.fixture
def env(local_ok):
    e = ToolEnv(demo_tasks())
    yield e
    e.close()


def _episode(env: ToolEnv, *turns: str) -> tuple[float, dict]:
    env.reset(options={"task": "demo/add"})
    info: dict = {}
    reward = 0.0
    for text in (*turns, call("submit", answer="done")):
        _, reward, terminated, truncated, info = env.step(text)
        if terminated or truncated:
            break
    return float(reward), info


def test_reference_solution_scores_one(env) -> None:
    reward, info = _episode(env, call("write_file", path="solution.py", content="def add(a, b):\n    return a + b\n"))
    assert reward == pytest.approx(1.0) and info["outcome"].failure_mode == "success"


def test_os_exit_zero_in_the_solution_earns_nothing(env) -> None:
    hack = "import os\nos._exit(0)\n" + STUB
    reward, info = _episode(env, call("write_file", path="solution.py", content=hack))
    assert info["reward_components"]["correctness@v1"] == 0.0
    assert reward <= 0.0 and info["outcome"].grade.tests_passed == 0


@pytest.mark.parametrize("name, content", [("conftest.py", FORCE_PASS), ("tests/conftest.py", FORCE_PASS),
                                           ("sitecustomize.py", FAKE_SOLUTION),
                                           ("usercustomize.py", FAKE_SOLUTION)])
def test_planted_files_do_not_affect_the_grader(env, name: str, content: str) -> None:
    reward, info = _episode(env, call("write_file", path=name, content=content))
    assert info["outcome"].grade.tests_passed == 0, f"planted {name} changed the hidden test result"
    assert reward <= 0.0


def test_hidden_tests_are_never_visible_during_the_episode(env) -> None:
    env.reset(options={"task": "demo/add"})
    hidden_marker = "test_negative"  # a name that only the hidden test file contains
    _, _, _, _, info = env.step(
        call("grep", pattern=hidden_marker)
        + call("bash", command="find / -maxdepth 4 \\( -path /proc -o -path /sys -o -path /usr \\) -prune "
                               "-o -name 'test_*.py' -print 2>/dev/null | head -20")
        + call("list_files")
    )
    grep_out, find_out, files = (m["content"] for m in info["messages"][:3])
    assert "no matches" in grep_out
    assert "test_add.py" not in find_out and "test_visible.py" in find_out  # the search itself works
    assert "test_add.py" not in files and "test_visible.py" in files  # visible tests are visible

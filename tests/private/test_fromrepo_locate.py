"""``--kinds locate``: a bug found from a user's report across the whole repository, never told where it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
from sandgym.private.fromrepo import FromRepoConfig, FromRepoResult, bug_report, run, unique_edit
from sandgym.sandbox.protocol import TestOutcome as Outcome
from sandgym.sandbox.protocol import TestReport as Report
from tests.private.conftest import sandbox_or_skip

FIXTURE = Path(__file__).parent / "fixtures" / "minicalc"


@pytest.fixture(scope="module")
def located(tmp_path_factory: pytest.TempPathFactory) -> FromRepoResult:
    sandbox_or_skip()
    out = tmp_path_factory.mktemp("minicalc_locate")
    return run(FromRepoConfig(repo=str(FIXTURE), out=str(out), kinds=("locate",), seed=0, max_tasks=4))


def test_the_prompt_is_a_bug_report_that_never_says_where(located: FromRepoResult) -> None:
    assert located.made > 0
    for task in located.tasks:
        assert task.family == "repo_locate" and "entry_file" not in task.metadata
        source = task.metadata["source_file"]
        assert source not in task.prompt  # (a test's own file name may echo it, as in a real report)
        assert task.metadata["hidden_tests"][0] in task.prompt and "```" in task.prompt
        assert task.metadata["tokens"] == sum(len(t) for t in task.files.values()) // 4 > 0


def test_oracle_searches_and_fixes_noop_fails(located: FromRepoResult) -> None:
    from sandgym.envs.builtin_tools import builtin_tools
    from sandgym.envs.tool_env import ToolEnv

    tools = builtin_tools(["list_files", "read_file", "grep", "edit_file", "write_file", "submit"])
    env = ToolEnv(tasks=list(located.tasks), reuse_sandbox=True, tools=tools)
    try:
        oracle = [run_episode(env, OracleAgent(), t) for t in located.tasks]
        noop = [run_episode(env, NoopAgent(), t) for t in located.tasks]
    finally:
        env.close()
    assert all(r.success for r in oracle) and not any(r.success for r in noop)
    plan = OracleAgent().plan(located.tasks[0])  # a search, a read, one edit: never the whole file written
    assert ['"grep"' in t for t in plan[:3]] == [True, False, False] and '"edit_file"' in plan[2]
    assert all('"write_file"' not in t for t in plan)


def test_every_demonstrated_argument_comes_from_the_prompt_or_an_observation(tmp_path: Path) -> None:
    """The oracle's demonstrations are what a model imitates: it greps for the definition (the function a
    re-implementation names, the test a bug fix names, the report a bug report gives), then reads from a line the grep
    showed, a window at a time, and edits; no read starts at a line nothing before it showed."""
    import json
    import re

    from sandgym.envs.builtin_tools import builtin_tools
    from sandgym.envs.tool_env import ToolEnv

    sandbox_or_skip()
    made = run(FromRepoConfig(repo=str(FIXTURE), out=str(tmp_path), kinds=("reimplement", "bugfix", "locate"),
                              seed=0, max_tasks=9))
    assert {t.family for t in made.tasks} == {"repo_reimplement", "repo_bugfix", "repo_locate"}
    tools = builtin_tools(["list_files", "read_file", "grep", "edit_file", "write_file", "submit"])
    env = ToolEnv(tasks=list(made.tasks), reuse_sandbox=True, tools=tools)
    try:
        for task in made.tasks:
            result = run_episode(env, OracleAgent(), task)
            assert result.success, task.id
            shown: set[int] = set()  # line numbers the episode's observations showed so far
            for msg in result.messages:
                if msg["role"] == "assistant":
                    for call in re.findall(r"<tool_call>(.*?)</tool_call>", msg["content"], re.S):
                        args = json.loads(call)["arguments"]
                        if "start_line" in args:
                            assert args["start_line"] in shown, (task.id, args, sorted(shown))
                            shown.add(args["end_line"] + 1)  # the next window starts where this one ends
                else:
                    shown |= {int(n) for n in re.findall(r"^[^\s:]+\.py:(\d+):", msg["content"], re.M)}
            assert '"grep"' in OracleAgent().plan(task)[0], task.id
    finally:
        env.close()


def test_bug_report_keeps_the_test_line_and_errors_without_paths() -> None:
    message = ("    def test_add():\n>       assert add(2, 3) == 5\nE       assert -1 == 5\nE        +  where -1 = add(2, 3)\n"
               "\nminicalc/arith.py:4: in add\n    return a - b\nE   File \"/workspace/minicalc/arith.py\", line 4\n"
               "raised in the solution's process:\nTraceback ...  minicalc/arith.py")
    report = Report(expected=1, outcomes=(Outcome("tests/test_arith.py::test_add", "failed", message),))
    text = bug_report(report)
    assert text.splitlines()[0] == "assert add(2, 3) == 5"
    assert "assert -1 == 5" in text and ".py" not in text and "return a - b" not in text


def test_unique_edit_grows_until_the_old_text_occurs_once() -> None:
    mutated = "def f(x):\n    return x - 1\n\ndef g(x):\n    return x - 1\n"
    original = "def f(x):\n    return x - 1\n\ndef g(x):\n    return x + 1\n"
    old, new = unique_edit(mutated, original)
    assert mutated.count(old) == 1 and mutated.replace(old, new) == original


def test_unique_edit_of_a_removed_body() -> None:
    original = "def f(x):\n    y = x + 1\n    return y\n\ndef g():\n    return 0\n"
    mutated = "def f(x):\n    raise NotImplementedError\n\ndef g():\n    return 0\n"
    old, new = unique_edit(mutated, original)
    assert mutated.count(old) == 1 and mutated.replace(old, new) == original

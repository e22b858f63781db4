"""A verifier's Python is the one its author ran: ``sys.executable``, PATH, the working directory and the environment.

Real test suites start the interpreter themselves (``subprocess.run([sys.executable, "cli.py", ...])``,
``python -m pkg``). Every path that runs Python in the local sandbox (``exec``, ``run_python``, hidden pytest tests in
both isolations, and the processes they start) must give them a working interpreter, the sandbox's PATH and the
workspace as working directory. Before the fix, ``run_python`` and the grader ran with an empty environment, so a
``python3`` started by name from there had ``sys.executable == ""``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from sandgym.errors import SandboxError
from sandgym.sandbox import Limits, LocalSandbox

LIMITS = Limits(timeout_s=20, memory_mb=768, max_procs=64, max_file_mb=8, max_output_bytes=64 << 10)
WORDCOUNT = "import sys\nprint(len(open(sys.argv[1]).read().split()))\n"
PROBE = """import json, os, subprocess, sys
child = subprocess.run(["python3", "-c", "import os, sys; print(repr(sys.executable), os.environ.get('PATH'))"],
                       capture_output=True, text=True)
print(json.dumps({"exe": sys.executable, "path": os.environ.get("PATH"), "cwd": os.getcwd(),
                  "home": os.environ.get("HOME"), "child": child.stdout.strip(), "child_err": child.stderr[-300:]}))
"""
CLI_TESTS = {"test_cli.py": """import os
import subprocess
import sys


def test_script_by_path():
    r = subprocess.run([sys.executable, "wordcount.py", "words.txt"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


def test_module_with_dash_m():
    r = subprocess.run([sys.executable, "-m", "wordcount", "words.txt"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


def test_python3_on_path_and_pytest_importable():
    r = subprocess.run(["python3", "-c", "import sys, pytest; print(sys.executable)"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("python3")
    assert os.path.exists("words.txt")  # the working directory is the workspace
"""}


@pytest.fixture(scope="module")
def sb() -> Iterator[LocalSandbox]:
    try:
        box = LocalSandbox(LIMITS)
        box.wait_ready()
    except SandboxError as exc:
        if os.environ.get("SANDGYM_REQUIRE_SANDBOX"):
            raise
        pytest.skip(f"local sandbox unavailable here: {exc}")
    yield box
    box.close()


def _probe(out: str) -> dict[str, str]:
    return json.loads(out.strip().splitlines()[-1])


def test_run_python_has_an_interpreter_path_and_workspace(sb: LocalSandbox) -> None:
    got = _probe(sb.run_python(PROBE).stdout)
    assert got["exe"] and os.path.basename(got["exe"]).startswith("python"), got
    assert got["path"] and "/usr/bin" in got["path"].split(":"), got
    assert got["cwd"] == sb.workdir and got["home"], got
    assert got["child"].startswith("'/") and "/usr/bin" in got["child"], got  # python3 by name: a real executable


def test_exec_and_run_python_see_the_same_environment(sb: LocalSandbox) -> None:
    dump = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k not in ('PWD', '_')}))"
    from_exec = json.loads(sb.exec(["python3", "-c", dump]).stdout)
    from_python = json.loads(sb.run_python(dump).stdout)
    for key in ("PATH", "HOME", "LANG", "TMPDIR", "PYTHONPATH"):
        assert from_python.get(key) == from_exec.get(key), key


@pytest.mark.parametrize("isolation", ["process", "in-process"])
def test_hidden_tests_can_run_the_solution_as_a_cli(sb: LocalSandbox, isolation: str) -> None:
    sb.write_file("words.txt", "a b c\n")
    sb.write_file("wordcount.py", WORDCOUNT)
    report = sb.run_tests(CLI_TESTS, expected=3, isolation=isolation)
    assert report.all_passed, [(o.name, o.message[-400:]) for o in report.outcomes]


def test_a_wrong_cli_still_fails_its_tests(sb: LocalSandbox) -> None:
    sb.write_file("words.txt", "a b c\n")
    sb.write_file("wordcount.py", "print(0)\n")
    report = sb.run_tests(CLI_TESTS, expected=3)
    assert report.passed == 1 and not report.all_passed  # only the interpreter check passes


def test_a_tests_task_that_runs_its_solution_as_a_cli_is_solved_by_the_oracle_only() -> None:
    """The same through an env episode: hidden pytest tests, graded the way training grades them."""
    import gymnasium as gym

    import sandgym  # noqa: F401
    from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
    from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier

    task = Task(id="demo/wordcount-cli", domain="coding", family="demo", split="train",
                prompt="Write wordcount.py: `python wordcount.py FILE` prints the number of words in FILE.",
                files={"words.txt": "a b c\n", "wordcount.py": "raise SystemExit('not written yet')\n"},
                verifier=Verifier(kind="tests", tests=CLI_TESTS, expected_tests=3),
                reference=Reference(files={"wordcount.py": WORDCOUNT}), limits=TaskLimits(max_turns=4))
    env = gym.make("sandgym/Coding-v0", tasks=[task])
    try:
        good = run_episode(env.unwrapped, OracleAgent(), task)
        bad = run_episode(env.unwrapped, NoopAgent(), task)
    finally:
        env.close()
    assert good.reward_components["correctness@v1"] == 1.0, good.outcome
    assert bad.reward_components["correctness@v1"] < 1.0, bad.outcome

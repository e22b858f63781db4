"""A verifier that cannot run is the task's error, not the agent's: excluded like an infra failure, counted apart,
shown with its own error, and caught by ``tasks validate --check-references``. The agent cannot fake one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandgym.agents.scripted import OracleAgent
from sandgym.cli import main
from sandgym.envs.tool_env import ToolEnv
from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier

GOOD_SOLUTION = "def double(x):\n    return 2 * x\n"


def _tests_task(test_src: str, solution: str = GOOD_SOLUTION, tid: str = "user/t/0") -> Task:
    return Task(id=tid, domain="user", family="t", split="heldout", prompt="Write double(x) in solution.py.",
                files={"solution.py": "def double(x):\n    raise NotImplementedError\n"},
                verifier=Verifier(kind="tests", tests={"test_double.py": test_src}, expected_tests=1),
                reference=Reference(files={"solution.py": solution}), limits=TaskLimits(max_turns=3))


def _script_task(script: str, answer: str = "42") -> Task:
    return Task(id="user/s/0", domain="user", family="s", split="heldout", prompt="What is 6 * 7?",
                verifier=Verifier(kind="script", script=script), reference=Reference(answer=answer),
                limits=TaskLimits(max_turns=2))


MISSING_LIB_TEST = "import no_such_library_xyz\nfrom solution import double\n\ndef test_d():\n    assert double(2) == 4\n"
SCRIPT_MISSING_LIB = "import no_such_library_xyz\nprint('{\"score\": 1.0}')\n"
SCRIPT_OK = ("import json\nans = open('answer.txt').read().strip()\n"
             "print(json.dumps({'score': float(float(ans) == 42)}))\n")


class _Played:
    def __init__(self, reward: float, info: dict) -> None:
        self.reward, self.info, self.success = reward, info, info["outcome"].success


def run_episode(env: ToolEnv, agent: OracleAgent, task: Task) -> _Played:
    """Play the oracle and keep the terminal info (it carries the error text)."""
    obs, info = env.reset(options={"task": task})
    agent.reset(task)
    done, reward = False, 0.0
    while not done:
        obs, r, term, trunc, info = env.step(agent.act(obs, info))
        done, reward = term or trunc, float(r)
    return _Played(reward, info)


@pytest.fixture(scope="module")
def env():
    e = ToolEnv(max_turns=3)
    yield e
    e.close()


def test_missing_library_in_hidden_test_is_a_task_error(env: ToolEnv) -> None:
    result = run_episode(env, OracleAgent(), _tests_task(MISSING_LIB_TEST))
    info = result.info
    assert info["failure_mode"] == "task_error" and info["infra_failure"] is True
    assert info["outcome"].task_error and "no_such_library_xyz" in info["error"]
    assert result.reward == 0.0


def test_agent_cannot_pass_its_own_import_error_as_a_task_error(env: ToolEnv) -> None:
    """A solution that raises ModuleNotFoundError itself (or is missing) stays the agent's failure."""
    liar = "raise ModuleNotFoundError(\"No module named 'no_such_library_xyz'\")\n"
    test = "from solution import double\n\ndef test_d():\n    assert double(2) == 4\n"
    for reference in (liar, "# nothing here\n"):
        result = run_episode(env, OracleAgent(), _tests_task(test, solution=reference))
        assert result.info["failure_mode"] != "task_error" and not result.info["infra_failure"], result.info
    task = _tests_task(test, solution=liar)
    result = run_episode(env, OracleAgent(), Task(**{**task.__dict__, "files": {}}))
    assert not result.info["infra_failure"]


def test_a_solution_that_blanks_its_traceback_still_owns_its_import_error(env: ToolEnv) -> None:
    """An exploit regression: the solution emptied ``traceback.format_exception`` so its reply carried no
    traceback, and its ModuleNotFoundError for a library outside the task passed for the verifier's own failure
    (a task error: the failed episode was excluded from scoring and from training)."""
    blanked = ("import traceback as _tb\n_tb.format_exception = lambda *a, **k: []\n"
               "raise ModuleNotFoundError(\"No module named 'numpy'\")\n")
    test = "from solution import double\n\ndef test_d():\n    assert double(2) == 4\n"
    result = run_episode(env, OracleAgent(), _tests_task(test, solution=blanked))
    assert result.info["failure_mode"] != "task_error" and not result.info["infra_failure"], result.info
    assert result.reward <= 0.0 and not result.success


@pytest.mark.parametrize("plant", ["mkdir answer.txt", "ln -s /etc/hostname answer.txt",
                                   "mkdir -p answer.txt/x && chmod 000 answer.txt"])
def test_what_the_agent_leaves_at_answer_txt_cannot_make_grading_an_infra_failure(env: ToolEnv, plant: str) -> None:
    """An exploit regression: a directory or symlink at ``answer.txt`` made writing the answer fail, and the
    episode became an infra failure (excluded from scoring). The check script now gets the submitted answer
    whatever was there: a wrong answer scores 0, the right one 1."""
    for answer, solved in (("41", False), ("42", True)):
        env.reset(options={"task": _script_task(SCRIPT_OK)})
        env.step(json.dumps({"name": "bash", "arguments": {"command": plant}}).join(["<tool_call>", "</tool_call>"]))
        call = json.dumps({"name": "submit", "arguments": {"answer": answer}})
        _, reward, _, _, info = env.step(f"<tool_call>{call}</tool_call>")
        assert not info["infra_failure"] and info["failure_mode"] != "task_error", (plant, info.get("error"))
        assert info["outcome"].success is solved, (plant, answer, info.get("error"))


def test_broken_check_script_is_a_task_error_but_a_junk_answer_is_not(env: ToolEnv) -> None:
    result = run_episode(env, OracleAgent(), _script_task(SCRIPT_MISSING_LIB))
    assert result.info["failure_mode"] == "task_error" and "no_such_library_xyz" in result.info["error"]
    junk = "x\nModuleNotFoundError: No module named 'zz'"  # crashes float() with that text in the message
    result = run_episode(env, OracleAgent(), _script_task(SCRIPT_OK, answer=junk))
    assert result.info["failure_mode"] != "task_error" and not result.info["infra_failure"], result.info
    result = run_episode(env, OracleAgent(), _script_task(SCRIPT_OK))
    assert result.success


def test_validate_check_references_fails_on_broken_verifiers(tmp_path: Path, capsys) -> None:
    from sandgym.tasks.load import save_jsonl

    good, broken, bad_script = tmp_path / "good.jsonl", tmp_path / "broken.jsonl", tmp_path / "script.jsonl"
    save_jsonl([_tests_task("from solution import double\n\ndef test_d():\n    assert double(2) == 4\n")], good)
    save_jsonl([_tests_task(MISSING_LIB_TEST)], broken)
    save_jsonl([_script_task(SCRIPT_MISSING_LIB)], bad_script)
    assert main(["tasks", "validate", str(good), "--check-references"]) == 0
    assert main(["tasks", "validate", str(broken)]) == 0  # static validation cannot know
    capsys.readouterr()
    assert main(["tasks", "validate", str(broken), "--check-references"]) == 1
    out = capsys.readouterr().out
    assert "the verifier fails on its own" in out and "no_such_library_xyz" in out
    assert main(["tasks", "validate", str(bad_script), "--check-references"]) == 1
    assert "no_such_library_xyz" in capsys.readouterr().out
    json.loads(good.read_text().splitlines()[0])  # the files stay valid JSONL


def test_without_a_reference_a_missing_module_stays_the_agents(env: ToolEnv) -> None:
    """A task with no reference cannot tell 'the agent never wrote helpers.py' from a missing library."""
    test = "from helpers import double\n\ndef test_d():\n    assert double(2) == 4\n"
    task = Task(id="user/noref/0", domain="user", family="t", split="heldout", prompt="Write helpers.py.",
                verifier=Verifier(kind="tests", tests={"test_double.py": test}, expected_tests=1),
                limits=TaskLimits(max_turns=2))
    obs, info = env.reset(options={"task": task})
    _, _, _, _, info = env.step('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
    assert info["failure_mode"] != "task_error" and not info["infra_failure"], info.get("error")

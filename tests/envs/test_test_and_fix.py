"""``code_action="test"`` (test-and-fix) in the real local sandbox, and the behaviours the env counts for it."""

import re
import time
from pathlib import Path

import pytest

from sandgym.agents.scripted import call
from sandgym.envs.builtin_tools import builtin_tools
from sandgym.envs.tool_env import ToolEnv
from sandgym.tasks.registry import load_suite


@pytest.fixture
def task(local_ok):
    if not local_ok:
        pytest.skip("the local sandbox cannot run here")
    t = load_suite("coding/numbers:train", n=1, seed=0, difficulty=1)[0]
    assert t.visible_tests, "difficulty 1 ships visible tests"
    return t


def block(code: str) -> str:
    return f"```python\n{code}\n```"


def broken(task) -> str:
    src = task.reference.files["solution.py"]
    return src.replace("return ", "return None and ", 1)


def play(env, task, turns):
    env.reset(options={"task": task})
    out = []
    for text in turns:
        out.append(env.step(text))
        if out[-1][2] or out[-1][3]:
            break
    return out


def test_block_runs_visible_tests_then_submit_word_submits(task):
    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=4)
    steps = play(env, task, [block(broken(task)), block(task.reference.files["solution.py"]), "SUBMIT"])
    env.close()
    first, second, last = steps
    assert "not passed" in first[0] and "FAILED" in first[0] and not first[2]
    # compact failures: the failing assertion with its input, then the error line with the value the code gave
    assert re.search(r"FAILED test_\w+: assert \w+\(.*\) == .+ \| .*None", first[0]) and len(first[0]) < 800
    assert "2 passed, 0 not passed" in second[0] and not second[2]
    obs, reward, terminated, truncated, info = last
    assert terminated and not truncated and info["outcome"].success and reward > 0.99
    a = info["outcome"].actions
    assert (a.test_runs, a.first_test_passed, a.tested_before_submit, a.submitted) == (2, False, True, True)
    assert a.format_errors == 0


def test_correct_first_block_then_submit(task):
    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=4)
    steps = play(env, task, [block(task.reference.files["solution.py"]), "I should not submit yet.", "Submit."])
    assert "No tool call" in steps[1][0] and not steps[1][2]  # a sentence mentioning submit is not SUBMIT
    obs, reward, terminated, _, info = steps[-1]
    env.close()
    a = info["outcome"].actions
    assert terminated and info["outcome"].success
    assert (a.test_runs, a.first_test_passed, a.last_test_passed, a.tested_before_submit) == (1, True, True, True)


def test_prose_without_submit_is_a_no_call_turn_and_out_of_turns_is_still_graded(task):
    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=2)
    steps = play(env, task, [block(task.reference.files["solution.py"]), "The function looks right."])
    env.close()
    obs, reward, terminated, truncated, info = steps[-1]
    assert truncated and not terminated
    o = info["outcome"]
    assert o.grade.solved and o.success  # graded on what the workspace holds
    assert o.actions.no_call_turns == 1 and not o.actions.submitted and not o.actions.tested_before_submit
    assert "code block" in obs or "budget" in obs


def test_change_after_the_last_test_run_is_not_verified(task):
    env = ToolEnv(tasks=[], code_action=None, max_turns=6)
    ref = task.reference.files["solution.py"]
    calls = [
        call("write_file", path="solution.py", content=ref),
        '<tool_call>{"name": "run_tests", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "write_file", "arguments": {"path": "notes.txt", "content": "x"}}</tool_call>',
        '<tool_call>{"name": "submit", "arguments": {"answer": "done"}}</tool_call>',
    ]
    *_, (_, _, terminated, _, info) = play(env, task, calls)
    env.close()
    a = info["outcome"].actions
    assert terminated and (a.test_runs, a.first_test_passed, a.tested_before_submit) == (1, True, False)


def test_generation_time_does_not_count_against_the_episode_timeout(task):
    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=4,
                  episode_timeout_s=4.0)
    env.reset(options={"task": task})
    env.step(block(broken(task)))
    time.sleep(4.5)  # the model "thinking" longer than the whole episode limit
    obs, reward, terminated, truncated, info = env.step(block(task.reference.files["solution.py"]))
    assert not truncated, obs
    *_, info = env.step("SUBMIT")
    env.close()
    assert info["outcome"].success and info["runtime"]["env_s"] < info["runtime"]["episode_s"]


def test_a_run_on_the_untouched_start_is_not_the_first_attempt(task):
    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["run_tests", "submit"]), max_turns=4)
    steps = play(env, task, [call("run_tests"), block(broken(task)), "SUBMIT"])
    env.close()
    a = steps[-1][4]["outcome"].actions
    assert steps[0][4]["actions"].test_runs == 1 and steps[0][4]["actions"].first_test_passed is None
    assert (a.test_runs, a.first_test_passed, a.last_test_passed, a.submitted) == (2, False, False, True)


def test_each_test_run_ends_with_the_step_it_calls_for_and_hints_can_be_turned_off(task):
    from sandgym.envs.tool_env import TEST_HINTS

    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=4)
    failing, passing, _ = play(env, task, [block(broken(task)), block(task.reference.files["solution.py"]), "SUBMIT"])
    env.close()
    last_line = lambda obs: obs.replace("</tool_response>", "").rstrip().splitlines()[-1]  # noqa: E731
    assert last_line(failing[0]) == TEST_HINTS[False] and TEST_HINTS[True] not in failing[0]
    assert last_line(passing[0]) == TEST_HINTS[True] and TEST_HINTS[False] not in passing[0]
    assert "SUBMIT" not in failing[0]  # the failing run never suggests submitting
    bare = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=4, test_hints=False)
    (obs, *_), = play(bare, task, [block(broken(task))])
    bare.close()
    assert obs.rstrip() and all(h not in obs for h in TEST_HINTS.values())


def test_hints_follow_only_code_action_test_runs_not_a_run_tests_call(task):
    from sandgym.envs.tool_env import TEST_HINTS

    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["run_tests", "submit"]), max_turns=4)
    (obs, *_), = play(env, task, [call("run_tests")])
    env.close()
    assert all(h not in obs for h in TEST_HINTS.values())


def test_imported_visible_tests_run_in_the_test_and_fix_loop(local_ok) -> None:
    """The test-and-fix code action runs an imported record's visible asserts in the real sandbox: the stub
    fails them, the reference passes them and is then submitted and solves the task."""
    if not local_ok:
        pytest.skip("the local sandbox cannot run here")
    from sandgym.tasks.importers import import_humaneval

    data = Path(__file__).parents[1] / "tasks" / "data" / "humaneval_sample.jsonl"
    task = import_humaneval(data, visible=2)[1]
    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=3)
    env.reset(options={"task": task})
    stub, _, _, _, _ = env.step(f"```python\n{task.files['solution.py']}```")
    fixed, _, _, _, _ = env.step(f"```python\n{task.reference.files['solution.py']}```")
    _, reward, terminated, _, info = env.step("SUBMIT")
    env.close()
    assert "0 passed, 2 not passed" in stub and "NotImplementedError" in stub
    assert "2 passed, 0 not passed" in fixed
    assert terminated and info["outcome"].success and reward > 0.99


def test_by_example_the_fix_copies_the_expected_value_and_hard_coding_the_visible_cases_earns_nothing(local_ok) -> None:
    """A ``by_example`` task in the real loop: the oracle's guess fails with the expected value in the failure,
    the fix passes and solves the task (a recovery); a block that hard-codes the visible cases passes them but
    not the hidden tests (an exploit regression: the visible tests are not the grade)."""
    if not local_ok:
        pytest.skip("the local sandbox cannot run here")
    from sandgym.agents.scripted import OracleAgent

    task = load_suite("coding/by_example:heldout", n=1, seed=0, difficulty=2)[0]
    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=3)
    steps = play(env, task, OracleAgent(style="fix").plan(task))
    expected = re.findall(r"== (.+)", task.visible_tests["test_visible.py"])
    assert len(steps) == 3 and "0 passed, 2 not passed" in steps[0][0] and expected[0] in steps[0][0]
    a = steps[-1][4]["outcome"].actions
    assert steps[-1][4]["outcome"].success and (a.first_test_passed, a.last_test_passed) == (False, True)

    name = task.metadata["function"]
    cases = re.findall(rf"assert {name}\((.*)\) == (.+)", task.visible_tests["test_visible.py"])
    code = f"def {name}(*args):\n" + "".join(f"    if args == ({c},):\n        return {e}\n" for c, e in cases)
    steps = play(env, task, [block(code + "    return ''"), "SUBMIT"])
    wrong = play(env, task, [block(task.metadata["guess"]), "SUBMIT"])  # an honest attempt, wrong constant
    env.close()
    assert "2 passed, 0 not passed" in steps[0][0]
    assert not steps[-1][4]["outcome"].success and steps[-1][1] <= wrong[-1][1]


@pytest.mark.parametrize("family", ["strings", "bugfix"])
def test_hard_coding_what_the_task_shows_earns_no_correctness(local_ok, family) -> None:
    """An exploit regression in the real loop: a block that returns the shown outputs for the shown inputs (the
    visible tests and the prompt's example) passes the visible tests, yet earns 0 of ``correctness@v1``: no
    graded input is one the agent was shown (before the fix it earned 2 of 6)."""
    if not local_ok:
        pytest.skip("the local sandbox cannot run here")
    task = load_suite(f"coding/{family}:heldout", n=1, seed=0, difficulty=1)[0]
    name = task.metadata["function"]
    shown = re.findall(rf"assert {name}\((.*)\) == (.+)", task.visible_tests["test_visible.py"])
    shown += re.findall(rf"`{name}\((.*)\)` should return (.+?) but returns", task.prompt)
    shown += re.findall(rf"Example: `{name}\((.*)\) == (.+)`\.", task.prompt)
    code = f"def {name}(*args):\n" + "".join(f"    if args == ({c},):\n        return {e}\n" for c, e in shown)
    env = ToolEnv(tasks=[], code_action="test", tools=builtin_tools(["submit"]), max_turns=3)
    steps = play(env, task, [block(code + "    return None"), "SUBMIT"])
    env.close()
    assert "2 passed, 0 not passed" in steps[0][0] or "1 passed, 0 not passed" in steps[0][0]
    outcome = steps[-1][4]["outcome"]
    assert outcome.actions.submitted and not outcome.success
    assert steps[-1][4]["reward_components"]["correctness@v1"] == 0.0

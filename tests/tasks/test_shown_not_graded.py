"""What a coding task shows the agent (its visible tests, the prompt's example) is never among the graded inputs:
an exploit regression (hard-coding the shown cases earned 2 of 6 hidden tests of ``correctness@v1``, session 17)."""

import re

import pytest

from sandgym.tasks.registry import load_suite

FUNCTION_FAMILIES = ("strings", "lists", "numbers", "parsing", "bugfix", "by_example")


def calls(text: str) -> set[str]:
    """The calls ``f(args)`` an assert or an example line checks (the left side of ``==``)."""
    found = {m.group(1) for m in re.finditer(r"assert (\w+\(.*\)) == ", text)}
    found |= {m.group(1) for m in re.finditer(r"`(\w+\([^`]*\))(?: == [^`]*)?`", text)}
    return found


@pytest.mark.parametrize("family", FUNCTION_FAMILIES)
@pytest.mark.parametrize("split", ["train", "heldout"])
def test_no_shown_input_is_graded(family, split):
    for difficulty in (1, 2, 3, 4):
        for task in load_suite(f"coding/{family}:{split}", n=12, seed=3, difficulty=difficulty):
            hidden = calls("\n".join(task.verifier.tests.values()))
            shown = calls("\n".join(task.visible_tests.values())) | calls(task.prompt)
            assert hidden and len(hidden) == task.verifier.expected_tests, task.id
            assert shown or difficulty > 2, task.id  # low levels show the agent an input
            assert not hidden & shown, f"{task.id}: graded inputs the agent is shown: {sorted(hidden & shown)}"


def test_shown_inputs_are_drawn_apart_so_the_graded_ones_stay_six():
    tasks = load_suite("coding/strings:heldout", n=20, seed=0, difficulty=1)
    assert {t.verifier.expected_tests for t in tasks} == {6}
    assert all(len(calls(t.visible_tests["test_visible.py"])) == 2 for t in tasks)


def test_bugfix_prompt_shows_an_input_the_bug_changes_and_the_hidden_tests_still_catch_the_bug():
    from sandgym.tasks.suites.base import run_reference

    for task in load_suite("coding/bugfix:train", n=12, seed=1, difficulty=1):
        name = task.metadata["function"]
        good = run_reference(task.reference.files["solution.py"], name)
        bad = run_reference(task.files["solution.py"], name)
        shown = re.search(rf"For example `{name}\((.*)\)` should return", task.prompt).group(1)
        args = eval(f"({shown},)")  # the call's arguments as the prompt prints them
        assert good(*args) != bad(*args), task.id
        hidden = re.findall(rf"assert {name}\((.*)\) == ", task.verifier.tests[f"test_{name}.py"])
        assert any(good(*eval(f"({h},)")) != bad(*eval(f"({h},)")) for h in hidden), task.id


@pytest.mark.parametrize("family", ["class_spec", "repo_fix"])
def test_visible_tests_of_class_and_repo_tasks_check_inputs_the_hidden_tests_do_not(family):
    """class_spec's visible script and repo_fix's visible call are drawn apart from the graded ones (service_queue's
    visible tests are behaviour runs of the real service, three of its hidden ones: not a shortcut to hard-code)."""
    for split in ("train", "heldout"):
        for difficulty in (1, 2, 3):
            for task in load_suite(f"coding/{family}:{split}", n=6, seed=2, difficulty=difficulty):
                hidden = [line.strip() for src in task.verifier.tests.values() for line in src.splitlines()
                          if line.strip().startswith("assert ")]
                shown = [line.strip() for src in task.visible_tests.values() for line in src.splitlines()
                         if line.strip().startswith("assert ")]
                assert len(shown) == 1 and shown[0] not in hidden, task.id
                assert len(hidden) == task.verifier.expected_tests, task.id

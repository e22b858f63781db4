"""What a coding task shows the agent (its visible tests, the prompt's example) is never among the graded inputs:
an exploit regression (hard-coding the shown cases earned 2 of 6 hidden tests of ``correctness@v1``)."""

import re

import pytest

from sandgym.tasks.registry import load_suite

FUNCTION_FAMILIES = ("strings", "lists", "numbers", "parsing", "bugfix", "by_example")


def calls(text: str) -> set[str]:
    """The calls ``f(args)`` an assert or an example line checks (the left side of ``==``)."""
    found = {m.group(1) for m in re.finditer(r"assert (\w+\(.*\)) == ", text)}
    for m in re.finditer(r"`(\w+\([^`]*)`", text):  # an example `f(x) == y` or a bug report's `f(x)`
        call = m.group(1).split(" == ")[0]
        if call.endswith(")"):
            found.add(call)
    return found


def inputs(found: set[str]) -> list[tuple]:
    """The argument tuples of calls ``f(args)`` (Python literals), to compare as Python does."""
    return [eval("(" + c[c.index("(") + 1 : -1] + ",)") for c in found]


@pytest.mark.parametrize("family", FUNCTION_FAMILIES)
@pytest.mark.parametrize("split", ["train", "heldout"])
def test_no_shown_input_is_graded(family, split):
    for difficulty in (1, 2, 3, 4):
        for task in load_suite(f"coding/{family}:{split}", n=12, seed=3, difficulty=difficulty):
            hidden = calls("\n".join(task.verifier.tests.values()))
            shown = calls("\n".join(task.visible_tests.values())) | calls(task.prompt)
            traps = calls("\n".join(task.verifier.traps.values()))
            assert hidden and len(hidden) == task.verifier.expected_tests, task.id
            assert shown or difficulty > 2, task.id  # low levels show the agent an input
            assert not hidden & shown, f"{task.id}: graded inputs the agent is shown: {sorted(hidden & shown)}"
            equal = [a for a in inputs(shown) if any(a == b for b in inputs(hidden | traps))]
            assert not equal, f"{task.id}: shown inputs equal to graded ones: {equal}"


def test_review_cases_stay_fixed():
    """Tasks an adversarial review found, each a way to earn credit from what is shown."""
    from sandgym.tasks.suites.base import run_reference

    # a dict input equal to a graded one but printed in another key order (a lookup table matches it)
    task = load_suite("coding/lists:heldout", n=2966, seed=4, difficulty=3)[2965]
    hidden, shown = calls(task.verifier.tests[f"test_{task.metadata['function']}.py"]), calls(task.visible_tests["test_visible.py"])
    assert not [a for a in inputs(shown) if any(a == b for b in inputs(hidden))]
    # bugfix whose bug changes few inputs: the fallback showed the only graded input the bug changes
    task = load_suite("coding/bugfix:heldout", n=25, seed=4, difficulty=3)[24]
    name = task.metadata["function"]
    good, bad = run_reference(task.reference.files["solution.py"], name), run_reference(task.files["solution.py"], name)
    hidden_args = inputs(calls(task.verifier.tests[f"test_{name}.py"]))
    shown_args = inputs(calls(task.visible_tests["test_visible.py"]))
    assert [a for a in hidden_args if good(*a) != bad(*a) and a not in shown_args]
    # repo_fix: the visible call was also a hidden trap
    task = load_suite("coding/repo_fix:heldout", n=178, seed=12, difficulty=2)[177]
    (line,) = [x.strip() for x in task.visible_tests["test_visible.py"].splitlines() if "assert" in x]
    assert line not in "\n".join(task.verifier.traps.values())


def test_class_spec_visible_script_is_no_prefix_of_a_graded_one_or_the_reverse():
    """A class replaying the visible script's outputs in order passes any graded script that is its prefix."""
    for split in ("train", "heldout"):
        for task in load_suite(f"coding/class_spec:{split}", n=40, seed=0, difficulty=1):
            (shown,) = re.findall(r"assert _run\((.*)\) == ", task.visible_tests["test_visible.py"])
            init, ops = eval(f"({shown})")
            for graded in re.findall(r"assert _run\((.*)\) == ", "\n".join(task.verifier.tests.values())):
                g_init, g_ops = eval(f"({graded})")
                assert not (init == g_init and (ops[: len(g_ops)] == g_ops or g_ops[: len(ops)] == ops)), task.id


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

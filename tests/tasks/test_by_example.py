"""The ``by_example`` family: constants that only the visible tests show, disjoint between train and heldout."""

import random
import re

import pytest

from sandgym.tasks.registry import load_suite
from sandgym.tasks.suites.base import MAX_DIFFICULTY
from sandgym.tasks.suites.coding_examples import LEVELS, MARKS, TOKENS
from sandgym.tasks.suites.reference import run_reference

SPECS = [s for specs in LEVELS.values() for s in specs]


@pytest.mark.parametrize("spec", SPECS, ids=[s.key for s in SPECS])
def test_heldout_constants_are_never_training_constants(spec) -> None:
    rng = random.Random(0)
    drawn = {split: [spec.knobs(rng, split) for _ in range(300)] for split in ("train", "heldout")}
    train = {v for k in drawn["train"] for v in k.values()}
    held = {v for k in drawn["heldout"] for v in k.values()}
    assert not train & held
    for split, other in (("train", "heldout"), ("heldout", "train")):
        for knobs in drawn[split]:  # each constant carries a mark or word of its own split's pools, none of the other's
            for value in knobs.values():
                assert any(c in MARKS[split] for c in value) or any(t in value.lower() for t in TOKENS[split])
                assert not any(c in MARKS[other] for c in value)
    assert len(train) >= 20, "too few training constants: a model could memorise them"


def test_no_word_of_one_split_is_part_of_a_word_of_the_other() -> None:
    for word in TOKENS["train"]:
        assert not any(word in w or w in word for w in TOKENS["heldout"]), word


def visible_cases(task) -> list[tuple[str, str]]:
    """(call, expected) of each visible assert."""
    return re.findall(r"assert (\w+\(.*\)) == (.+)", task.visible_tests["test_visible.py"])


@pytest.mark.parametrize("split", ["train", "heldout"])
@pytest.mark.parametrize("difficulty", [1, 2])
def test_the_prompt_never_states_the_expected_output(split, difficulty) -> None:
    for task in load_suite(f"coding/by_example:{split}", n=24, seed=3, difficulty=difficulty):
        assert "Example:" not in task.prompt and "visible tests expect" in task.prompt
        for _, expected in visible_cases(task):
            assert eval(expected) not in task.prompt  # noqa: S307 (our own generated literal)


def test_hidden_tests_leave_the_visible_cases_out() -> None:
    """Hard-coding the visible cases must earn no partial credit (correctness@v1 counts hidden tests passed)."""
    for task in load_suite("coding/by_example:train", n=12, seed=0, difficulty=1):
        hidden = next(iter(task.verifier.tests.values()))
        assert task.verifier.expected_tests == 4
        for call, _ in visible_cases(task):
            assert f"assert {call} ==" not in hidden


def test_the_hardest_level_has_no_visible_tests_and_shows_an_example_instead() -> None:
    (task,) = load_suite("coding/by_example:heldout", n=1, seed=0, difficulty=MAX_DIFFICULTY)
    assert not task.visible_tests and "\nExample: `" in task.prompt and "the example's" in task.prompt


def test_the_oracles_guess_differs_from_the_reference_and_fails_the_visible_tests() -> None:
    tasks = [t for d in (1, 2) for split in ("train", "heldout")
             for t in load_suite(f"coding/by_example:{split}", n=16, seed=1, difficulty=d)]
    for task in tasks:
        name = task.metadata["function"]
        guess = run_reference(task.metadata["guess"], name)
        ref = run_reference(task.reference.files["solution.py"], name)
        calls = visible_cases(task)
        assert len(calls) == 2
        for call, expected in calls:
            args = eval(f"({call[len(name) + 1:-1]},)")  # noqa: S307 (our own generated literal)
            assert repr(ref(*args)) == expected
            assert guess(*args) != ref(*args)

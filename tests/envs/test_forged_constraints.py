"""Regression tests for the forgeries found by an adversarial pass over the JSON track: each earned reward (or hid a
failure) without solving the task, through the JSON tool-calling env on the real local sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sandgym.envs.tool_env import ToolEnv
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def play(env: ToolEnv, task: Task, *turns: str) -> dict:
    """Write files with the given turns, then submit; the terminal info."""
    env.reset(options={"task": task})
    info: dict = {}
    for text in (*turns, call("submit")):
        _, _, term, trunc, info = env.step(text)
        if term or trunc:
            break
    return info


@pytest.fixture(scope="module")
def refactors() -> tuple[Task, Task]:
    (glob,) = load_suite("coding/refactor:train", n=1, difficulty=1)
    (dup,) = load_suite("coding/refactor:train", n=1, difficulty=3)
    return glob, dup


@pytest.fixture(scope="module")
def env(refactors: tuple[Task, Task]) -> Iterator[ToolEnv]:
    e = ToolEnv(list(refactors), code_action=None)
    yield e
    e.close()


def _passed(info: dict) -> int:
    return info["outcome"].grade.tests_passed


def test_a_solution_cannot_point_its_file_at_a_clean_copy(env: ToolEnv, refactors: tuple[Task, Task]) -> None:
    """The constraint test read the source at the module's ``__file__``, which the solution's process reported:
    ``__file__ = '.../clean.py'`` passed the no-``global`` check with the ``global`` statement kept."""
    task = refactors[0]
    start = task.files["solution.py"]
    fn = start.split("def ", 1)[1].split("(", 1)[0]
    var = start.split(" = 0", 1)[0]
    kept = f"{var} = 0\n\ndef {fn}(xs):\n    global {var}\n    {var} = 0\n    for x in xs:\n        {var} += x\n    return {var}\n"
    honest = play(env, task, call("write_file", path="solution.py", content=kept))
    forged = play(env, task, call("write_file", path="clean.py", content="x = 1\n"),
                  call("write_file", path="solution.py",
                       content=kept + "__file__ = __file__.replace('solution.py', 'clean.py')\n"))
    assert not honest["outcome"].success and not forged["outcome"].success
    assert _passed(forged) == _passed(honest) == task.verifier.expected_tests - 1
    fixed = play(env, task, call("write_file", path="solution.py", content=f"def {fn}(xs):\n    return sum(xs)\n"))
    assert fixed["outcome"].success


def test_a_solution_cannot_patch_what_reports_its_source(env: ToolEnv, refactors: tuple[Task, Task]) -> None:
    """The helper test asked the solution's process for its functions' source: a solution that patched
    ``inspect.getsource`` there passed "both call normalize" with an unused helper."""
    task = refactors[1]
    unused = task.files["solution.py"] + "\n\ndef normalize(s):\n    return s.strip().lower().replace('_', ' ')\n"
    patched = unused + ("\nimport inspect as _i\n_g = _i.getsource\n"
                        "_i.getsource = lambda o: _g(o) + '  # normalize(s)'\n")
    late = unused + "\n\ndef _late():\n    return normalize('x')\n"
    results = [play(env, task, call("write_file", path="solution.py", content=src)) for src in (unused, patched, late)]
    assert not any(r["outcome"].success for r in results)
    assert len({_passed(r) for r in results}) == 1
    reference = task.reference.files["solution.py"]
    assert play(env, task, call("write_file", path="solution.py", content=reference))["outcome"].success

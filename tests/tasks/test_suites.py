"""Built-in suites: determinism, train/heldout disjointness, every family at every difficulty."""

from __future__ import annotations

import pytest

from sandgym.errors import TaskError
from sandgym.tasks import Task
from sandgym.tasks.matchers import match
from sandgym.tasks.suites import MAX_DIFFICULTY, builtin_suites, families, get_family

FAMILIES = families()
IDS = [f.suite for f in FAMILIES]


def test_family_counts_and_unseen_marks() -> None:
    coding = [f for f in FAMILIES if f.domain == "coding"]
    lc = [f for f in FAMILIES if f.domain == "long_context"]
    assert len(coding) >= 8 and len(lc) >= 5
    assert sum(f.unseen for f in coding) >= 2 and sum(f.unseen for f in lc) >= 2
    assert {"parsing", "refactor"} <= {f.name for f in coding if f.unseen}
    assert {"aggregation", "constraints"} <= {f.name for f in lc if f.unseen}
    assert "repo_fix" in {f.name for f in coding}


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_deterministic(fam) -> None:
    assert fam.make("train", 3, 7, None) == fam.make("train", 3, 7, None)
    assert fam.make("train", 2, 7, 1) != fam.make("train", 2, 8, 1)


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_every_difficulty_and_split(fam) -> None:
    for split in ("train", "heldout"):
        for d in range(1, MAX_DIFFICULTY + 1):
            (task,) = fam.make(split, 1, 0, d)
            assert isinstance(task, Task)
            assert (task.split, task.difficulty, task.family, task.domain) == (split, d, fam.name, fam.domain)
            assert task.unseen == fam.unseen
            assert task.reference is not None
            if task.verifier.kind == "tests":
                assert task.metadata["entry_file"] in task.reference.files
                assert task.files, "the agent edits files in a starting workspace"
            else:
                assert task.metadata["placement"] in ("inline", "file")


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_train_heldout_disjoint(fam) -> None:
    train = fam.make("train", 8, 0, None)
    held = fam.make("heldout", 8, 0, None)
    # by_example states its constants only in the visible tests: its prompts repeat, its tests never do
    def spec(t: Task) -> str:
        return t.prompt + ("".join(t.visible_tests.values()) if "guess" in t.metadata else "")

    assert not {spec(t) for t in train} & {spec(t) for t in held}
    assert not {t.id for t in train} & {t.id for t in held}
    if fam.domain == "coding":
        assert not {t.metadata["problem"] for t in train} & {t.metadata["problem"] for t in held}
    else:
        docs = [{t.prompt + "".join(t.files.values()) for t in ts} for ts in (train, held)]
        assert not docs[0] & docs[1]


def test_long_context_name_pools_disjoint() -> None:
    from sandgym.tasks.suites.long_context import _POOLS, pool

    for kind in _POOLS:
        assert pool(kind, "train") and not set(pool(kind, "train")) & set(pool(kind, "heldout"))


def test_difficulty_one_is_one_liner() -> None:
    for name in ("strings", "lists", "numbers"):
        for task in get_family("coding", name).make("train", 6, 0, 1):
            body = [ln for ln in task.reference.files["solution.py"].splitlines() if ln.startswith("    ")]
            assert len(body) == 2, task.reference.files  # docstring + one return line


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.domain == "long_context"], ids=lambda f: f.name)
def test_match_reference_and_wrong_answer(fam) -> None:
    for task in fam.make("heldout", 4, 3, None):
        v = task.verifier
        assert match(task.reference.answer, v.answer, v.matcher)
        assert not match("definitely wrong 123456789", v.answer, v.matcher)
        assert match(f"  {v.answer}  ", v.answer, v.matcher)


def test_long_context_lengths_and_placement() -> None:
    make = get_family("long_context", "needle").make
    small, big = make("train", 1, 0, 1)[0], make("train", 1, 0, 4)[0]
    assert small.metadata["placement"] == "inline" and not small.files
    assert big.metadata["placement"] == "file" and 55_000 < big.metadata["tokens"] < 70_000
    doc = big.files[big.metadata["document"]]
    assert doc not in big.prompt and big.metadata["document"] in big.prompt
    custom = make("train", 1, 0, 1, tokens=8000, placement="file")[0]
    assert 7000 < custom.metadata["tokens"] < 9000 and custom.files


def test_tracking_checkpoints_point_at_lines() -> None:
    (task,) = get_family("long_context", "tracking").make("train", 1, 0, 2)
    lines = task.files[task.metadata["document"]].splitlines()
    cps = task.metadata["checkpoints"]
    assert len(cps) >= 3 and str(cps[-1]["value"]) == task.verifier.answer
    for cp in cps:
        assert task.metadata["variable"] in lines[cp["line"] - 1]


def test_constraint_stated_early() -> None:
    (task,) = get_family("long_context", "constraints").make("train", 1, 0, 3)
    lines = task.files[task.metadata["document"]].splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("POLICY:"))
    assert at <= len(lines) // 10 + 1


def test_bad_arguments_name_the_fix() -> None:
    fam = get_family("coding", "strings")
    with pytest.raises(TaskError, match="split='test'"):
        fam.make("test", 1, 0, 1)
    with pytest.raises(TaskError, match="difficulty=9"):
        fam.make("train", 1, 0, 9)
    with pytest.raises(TaskError, match="Did you mean 'coding/strings'"):
        get_family("coding", "string")


def test_builtin_suites_entry_point_shape() -> None:
    suites = builtin_suites()
    assert {"coding", "long_context", "coding/strings", "long_context/needle"} <= set(suites)
    train = suites["coding"]("train", 16, 0, 1)
    assert len(train) == 16 and not any(t.unseen for t in train)
    held = suites["coding"]("heldout", 16, 0, 1)
    assert {"parsing", "refactor"} <= {t.family for t in held}


def test_deterministic_across_processes() -> None:
    import os
    import subprocess
    import sys

    code = ("import hashlib, json\nfrom sandgym.tasks.registry import load_suite\n"
            "from sandgym.tasks.load import task_to_dict\n"
            "ts = load_suite('coding', n=24, seed=3) + load_suite('long_context', n=5, seed=3, difficulty=1)\n"
            "print(hashlib.sha256(json.dumps([task_to_dict(t) for t in ts], sort_keys=True).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(digests) == 1


def test_the_oracles_searches_solve_every_long_context_family_in_a_real_sandbox() -> None:
    """The searches the demonstrations make (grep for the question's terms, one hop per turn) find the answer at
    8K tokens in every family, through the env's real grep: what the long-context track's warm start shows."""
    from sandgym.agents.scripted import OracleAgent, run_episode
    from sandgym.envs.builtin_tools import builtin_tools
    from sandgym.envs.tool_env import ToolEnv
    from sandgym.tasks.registry import load_suite

    env = ToolEnv(max_turns=8, tools=builtin_tools(["grep", "read_file", "submit"]), code_action=None)
    try:
        for task in load_suite("long_context:heldout@5?tokens=8192&placement=file"):
            result = run_episode(env, OracleAgent(), task)
            assert result.outcome.success, (task.id, result.outcome.failure_mode)
    finally:
        env.close()

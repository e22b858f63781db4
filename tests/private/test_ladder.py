"""The ladder of task forms from one repository (``sandgym.private.rungs``): every rung from the same verified
candidates, one split for all of them, no held-out body in any training prompt or demonstration, no target's body in
its own prompt, and the lower rungs solved by their oracle and by nothing less."""

from __future__ import annotations

import dataclasses
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from sandgym.agents.scripted import OracleAgent
from sandgym.envs.tool_env import ToolEnv
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.experiments.ladder import name_baseline, name_guess
from sandgym.private.fromrepo import KINDS, FromRepoConfig, FromRepoResult, run
from sandgym.private.rungs import LADDER
from sandgym.tasks.definitions import definition_source
from sandgym.tasks.load import save_jsonl
from sandgym.tasks.task import Task
from tests.private.conftest import sandbox_or_skip

FIXTURES = Path(__file__).parent / "fixtures"

ONE_MODULE = '''"""Text helpers in one module: the project is split by top-level definition."""


def shout(text: str) -> str:
    """Upper case with an exclamation mark."""
    loud = text.upper()
    return loud + "!"


def whisper(text: str) -> str:
    """Lower case in dots."""
    quiet = text.lower()
    return "..." + quiet + "..."


def repeat_word(word: str, times: int) -> str:
    """The word ``times`` times, space separated."""
    parts = [word] * times
    return " ".join(parts)


def count_vowels(text: str) -> int:
    """How many of a, e, i, o, u (any case)."""
    total = 0
    for ch in text.lower():
        if ch in "aeiou":
            total += 1
    return total


def initials_of(name: str) -> str:
    """First letters of each word, upper case."""
    words = name.split()
    return "".join(w[0].upper() for w in words if w)


def pad_left(text: str, width: int) -> str:
    """Right-aligned to ``width`` with spaces."""
    missing = width - len(text)
    return " " * max(0, missing) + text
'''

ONE_MODULE_TESTS = '''from words import count_vowels, initials_of, pad_left, repeat_word, shout, whisper


def test_shout():
    assert shout("hi") == "HI!"


def test_whisper():
    assert whisper("Hi") == "...hi..."


def test_repeat_word():
    assert repeat_word("ab", 3) == "ab ab ab"
    assert repeat_word("x", 1) == "x"


def test_count_vowels():
    assert count_vowels("Education") == 5
    assert count_vowels("xyz") == 0


def test_initials_of():
    assert initials_of("ada  lovelace") == "AL"


def test_pad_left():
    assert pad_left("ab", 4) == "  ab"
    assert pad_left("abcde", 2) == "abcde"
'''


def _suite(repo: Path, out: Path) -> FromRepoResult:
    return run(FromRepoConfig(repo=str(repo), out=str(out), kinds=KINDS, seed=0, heldout_fraction=0.4))


@pytest.fixture(scope="module")
def ladders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FromRepoResult]:
    """Every rung of the fixture project (split by file) and of a one-module project (split by definition)."""
    sandbox_or_skip()
    words = tmp_path_factory.mktemp("words")
    (words / "words.py").write_text(ONE_MODULE)
    (words / "tests").mkdir()
    (words / "tests" / "test_words.py").write_text(ONE_MODULE_TESTS)
    return {"minicalc": _suite(FIXTURES / "minicalc", tmp_path_factory.mktemp("minicalc_ladder")),
            "words": _suite(words, tmp_path_factory.mktemp("words_ladder"))}


def _body(task: Task) -> str:
    """The target's reference body: its definition without the signature and docstring lines."""
    assert task.reference is not None
    file = str(task.metadata.get("entry_file") or task.metadata["edit"]["path"])
    source = definition_source(task.reference.files[file], str(task.metadata["function"]))
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith(":")) + 1
    if lines[start].strip().startswith(('"""', "'''")):
        quote = lines[start].strip()[:3]
        start += 1 if lines[start].strip().count(quote) >= 2 else next(
            i for i, line in enumerate(lines[start + 1:], start + 1) if quote in line) - start + 1
    return _flat(textwrap.dedent("\n".join(lines[start:])))


def _flat(text: str) -> str:
    """Each line stripped: a body matches wherever it sits, indented in a module or at column 0 in a reply."""
    return "\n".join(line.strip() for line in text.strip().splitlines())


def _demonstration(task: Task) -> str:
    plan = OracleAgent("code" if task.metadata["kind"] in ("complete", "find") else
                       "fix" if task.metadata["kind"] == "fix" else "tools").plan(task)
    return "\n".join(plan)


@pytest.mark.parametrize("project", ["minicalc", "words"])
def test_every_rung_shares_one_split_and_no_heldout_body_is_trained_on(project: str,
                                                                       ladders: dict[str, FromRepoResult]) -> None:
    result = ladders[project]
    tasks = list(result.tasks)
    assert {t.metadata["kind"] for t in tasks} >= {"complete", "fix", "find"}
    split_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    for t in tasks:
        split_of[(t.metadata["source_file"], str(t.metadata["function"]).split(".")[0])].add(t.split)
    assert all(len(s) == 1 for s in split_of.values()), split_of  # one split per definition, at every rung
    assert {t.split for t in tasks} == {"train", "heldout"}
    heldout_bodies = {_body(t) for t in tasks if t.split == "heldout" and t.metadata["kind"] != "find"}
    heldout_bodies = {b for b in heldout_bodies if len(b) >= 20}  # a one-word body can occur anywhere
    assert heldout_bodies
    for t in tasks:
        if t.metadata["kind"] != "find":  # a find task's prompt is a bug report; it has no workspace at all
            assert _body(t) not in _flat(t.prompt), f"{t.id}: its own body is in its prompt"
        if t.split != "train":
            continue
        seen = _flat(t.prompt + "\n" + (_demonstration(t) if t.metadata["kind"] in ("complete", "fix", "find")
                                         else ""))
        for body in heldout_bodies:
            assert body not in seen, f"{t.id}: a held-out body is in a training prompt or demonstration:\n{body}"


def test_a_one_module_project_hides_heldout_bodies_from_train_prompts(ladders: dict[str, FromRepoResult]) -> None:
    """The case that needs the cut: held-out and train definitions share the module a train prompt shows."""
    tasks = ladders["words"].tasks
    assert ladders["words"].report()["split_unit"] == "definition"
    train = [t for t in tasks if t.metadata["kind"] == "complete" and t.split == "train"]
    held = {str(t.metadata["function"]) for t in tasks if t.split == "heldout"}
    assert train and held
    for t in train:
        for name in held:  # the held-out neighbour is in view, its body is not
            if f"def {name}(" in t.prompt:
                after = t.prompt.split(f"def {name}(", 1)[1]
                assert "raise NotImplementedError" in after.split("\ndef ", 1)[0]


def test_train_definitions_get_more_tasks_than_heldout_ones(ladders: dict[str, FromRepoResult]) -> None:
    """Extra demonstrations from the same verified candidates: cut points of ``complete``, more mutants of ``fix``;
    a held-out definition is posed once per rung."""
    tasks = [t for r in ladders.values() for t in r.tasks]
    variants = [t for t in tasks if t.metadata.get("variant")]
    assert all(t.split == "train" for t in variants)
    cuts = [t for t in variants if t.metadata["kind"] == "complete"]
    mutants = [t for t in variants if t.metadata["kind"] == "fix"]
    assert cuts and mutants and {t.metadata["kind"] for t in variants} == {"complete", "fix"}
    for v in cuts:
        assert "the rest of the body" in v.prompt and _body(v) not in _flat(v.prompt)
    for v in mutants:  # another verified bug of a definition that already has a fix task
        first = [t for t in tasks if t.metadata["kind"] == "fix" and not t.metadata.get("variant")
                 and t.metadata["function"] == v.metadata["function"] and t.metadata["repo"] == v.metadata["repo"]]
        assert first and first[0].metadata["mutation"] != v.metadata["mutation"] and first[0].id != v.id


@pytest.mark.parametrize("kind,code_action,style", [("complete", "submit", "code"), ("fix", "test", "fix"),
                                                    ("find", "submit", "code")])
def test_lower_rungs_are_solved_by_their_oracle_and_not_by_a_wrong_definition(
        kind: str, code_action: str, style: str, ladders: dict[str, FromRepoResult]) -> None:
    tasks = [t for t in ladders["minicalc"].tasks if t.metadata["kind"] == kind][:2]
    assert tasks and LADDER.index(kind) < LADDER.index("reimplement")
    for task in tasks:
        env = ToolEnv(tasks=[task], code_action=code_action)  # type: ignore[arg-type]
        try:
            obs, info = env.reset(options={"task": task})
            agent = OracleAgent(style)
            agent.reset(task)
            done, reward = False, 0.0
            while not done:
                obs, reward, term, trunc, info = env.step(agent.act(obs, info))
                done = term or trunc
            assert reward == 1.0 and info["outcome"].success, (task.id, obs)
            name = str(task.metadata["function"]).rsplit(".", 1)[-1]
            obs, info = env.reset(options={"task": task})
            wrong = (f"```python\ndef {name}(*args, **kwargs):\n    return None\n```" if kind != "find"
                     else f"```python\n{name}_helper\n```")
            obs, reward, term, trunc, info = env.step(wrong)
            if not term:
                obs, reward, term, trunc, info = env.step("SUBMIT")
            assert reward < 1.0 and not info["outcome"].success
        finally:
            env.close()


def test_the_test_name_guess_counts_what_a_find_task_gives_away(ladders: dict[str, FromRepoResult],
                                                                  tmp_path: Path) -> None:
    """The report's baseline without a model: the failing test's name less ``test_``. It names a definition whose
    test is called after it, not one whose test is called otherwise, and counts the policy's successes beyond it."""
    finds = [t for t in ladders["minicalc"].tasks if t.metadata["kind"] == "find"]
    named = [t for t in finds if name_guess(t)]
    assert named, [t.metadata["hidden_tests"] for t in finds]
    for t in named:
        test = t.metadata["hidden_tests"][0].split("[", 1)[0]  # a parametrized test's id less its parameters
        assert test.endswith(f"::test_{str(t.verifier.answer).rsplit('.', 1)[-1]}")
    renamed = dataclasses.replace(named[0], id=f"{named[0].id}-renamed",
                                  metadata={**named[0].metadata, "hidden_tests": ["tests/t.py::test_other"]})
    assert not name_guess(renamed)
    heldout = [dataclasses.replace(t, split="heldout") for t in (named[0], renamed)]
    save_jsonl(heldout, tmp_path / "find.jsonl")
    rows = [EpisodeRow(seed=0, task_id=t.id, domain="coding", family="repo_find", unseen=False, sample=0,
                       success=True, reward=1.0, failure_mode="none", turns=1, gen_tokens=4, sandbox_s=0.0,
                       truncated=False, infra_failure=False) for t in heldout]
    assert name_baseline(tmp_path / "find.jsonl", rows) == {"tasks": 2, "guessed": 1, "solved_beyond": 1}

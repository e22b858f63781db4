"""reasoning-gym entries (from the real package, nothing downloaded) imported as tasks: long documents in workspace
files with their length recorded, answers graded as reasoning-gym grades them, bad records named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandgym.cli import main
from sandgym.errors import ConfigError, TaskError
from sandgym.tasks.importers import import_file
from sandgym.tasks.importers.reasoning_gym import write_entries
from sandgym.tasks.load import load_jsonl
from sandgym.tasks.matchers import match

reasoning_gym = pytest.importorskip("reasoning_gym")


def haystack(tmp_path: Path, statements: int, size: int = 3, seed: int = 0) -> Path:
    return write_entries("needle_haystack", tmp_path / "rg.jsonl", size=size, seed=seed,
                         min_num_statements=statements, max_num_statements=statements)


def test_a_long_haystack_is_a_file_one_statement_a_line(tmp_path: Path) -> None:
    tasks = import_file("reasoning_gym", haystack(tmp_path, 1040))
    entries = [json.loads(x) for x in (tmp_path / "rg.jsonl").read_text().splitlines()]
    assert len(tasks) == 3
    for task, entry in zip(tasks, entries, strict=True):
        doc = task.files["document.txt"]
        lines = doc.splitlines()
        assert task.domain == "long_context" and task.unseen and task.metadata["placement"] == "file"
        assert len(lines) == 1040 and all(line.endswith(".") for line in lines)
        assert 7000 < task.metadata["tokens"] < 9000  # the per-length report's 8K bucket
        assert entry["metadata"]["question"] in task.prompt and "document.txt" in task.prompt
        assert entry["question"][:200] not in task.prompt  # the haystack is only in the file
        needle = [line for line in lines if line.startswith(entry["answer"] + " ")]
        asked = entry["metadata"]["question"].split("?")[0].split(" ", 2)[1:]  # "Who <verb> <subject>?"
        assert any(" ".join(asked) in line for line in needle)
        assert task.verifier.answer == entry["answer"]
        assert task.id.startswith("reasoning_gym/needle_haystack/")


def test_a_short_haystack_is_inline(tmp_path: Path) -> None:
    (task,) = import_file("reasoning_gym", haystack(tmp_path, 130, size=1))
    assert task.metadata["placement"] == "inline" and not task.files
    assert "<document>" in task.prompt and 800 < task.metadata["tokens"] < 1300


def test_placement_file_puts_even_a_short_haystack_in_the_workspace(tmp_path: Path) -> None:
    path = write_entries("needle_haystack", tmp_path / "rg.jsonl", size=1, seed=0, placement="file",
                         min_num_statements=130, max_num_statements=130)
    (task,) = import_file("reasoning_gym", path)
    assert task.metadata["placement"] == "file" and "document.txt" in task.files and "<document>" not in task.prompt
    with pytest.raises(ConfigError, match="placement"):
        write_entries("needle_haystack", tmp_path / "x.jsonl", size=1, placement="disk")


def test_grading_agrees_with_reasoning_gyms_own_scorer(tmp_path: Path) -> None:
    """What reasoning-gym's ``score_answer`` accepts, the task's matcher accepts; other names in the haystack fail."""
    dataset = reasoning_gym.create_dataset("needle_haystack", size=5, seed=3, min_num_statements=50,
                                           max_num_statements=50)
    path = tmp_path / "rg.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), **e}) + "\n" for i, e in enumerate(dataset)))
    for task, entry in zip(import_file("reasoning_gym", path), dataset, strict=True):
        others = {line.split(" ")[0] for line in entry["question"].split(". ")[:20]} - {entry["answer"]}
        for answer in (entry["answer"], entry["answer"].lower(), entry["answer"].upper(), *sorted(others)[:5]):
            theirs = dataset.score_answer(answer, entry) == 1.0
            assert match(answer, task.verifier.answer, task.verifier.matcher) == theirs, answer


def test_entries_without_a_document_are_asked_inline(tmp_path: Path) -> None:
    path = write_entries("basic_arithmetic", tmp_path / "ba.jsonl", size=3, seed=1)
    tasks = import_file("reasoning_gym", path)
    assert [t.domain for t in tasks] == ["reasoning"] * 3
    assert all(not t.files and t.metadata["source_dataset"] == "basic_arithmetic" for t in tasks)


@pytest.mark.parametrize(("record", "field", "says"), [
    ({"id": "a", "question": "q?", "answer": None, "metadata": {}}, "answer", "own code"),
    ({"id": "a", "answer": "x", "metadata": {}}, "question", "missing"),
    ({"id": "a", "question": "q?", "answer": "x", "metadata": []}, "metadata", "expected dict"),
    ({"id": "a", "question": "q?", "answer": "  ", "metadata": {}}, "answer", "empty"),
    ({"id": "a", "question": "q?", "answer": "x", "metadata": {}, "placement": "disk"}, "placement", "not 'inline'"),
    ({"id": "a", "question": "q?", "answer": True, "metadata": {}}, "answer", "not an answer text"),
    ({"id": "a", "question": "q?", "answer": float("nan"), "metadata": {}}, "answer", "not an answer text"),
    ({"id": "a", "question": " ", "answer": "x", "metadata": {}}, "question", "blank"),
    ({"id": "a", "question": "A likes tea. B likes tea. C likes jam. D likes ham. E likes rye. Who likes tea? Reply only with a name.",
      "answer": "A", "metadata": {"question": "Who likes tea? Reply only with a name."}}, "question", "['B']"),
])
def test_bad_records_are_named_with_line_field_and_fix(tmp_path: Path, record: dict, field: str, says: str) -> None:
    path = tmp_path / "bad.jsonl"
    good = {"id": "g", "question": "What is 1+1?", "answer": "2", "metadata": {}}
    path.write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(TaskError) as err:
        import_file("reasoning_gym", path)
    text = str(err.value)
    assert f"{path}:2" in text and field in text and says in text


def test_a_haystack_stating_the_answer_of_two_people_is_refused_and_never_written(tmp_path: Path) -> None:
    """reasoning-gym keeps triples unique, not (verb, subject) pairs: seed 7's entry 90 asks "Who covets
    philosophy?" of a haystack where Tymoteusz and Louis both do, and grades only Tymoteusz."""
    entry = reasoning_gym.create_dataset("needle_haystack", size=200, seed=7, min_num_statements=200,
                                         max_num_statements=200)[90]
    path = tmp_path / "two.jsonl"
    path.write_text(json.dumps({"id": "x", **entry}) + "\n")
    with pytest.raises(TaskError, match="Louis"):
        import_file("reasoning_gym", path)
    written = write_entries("needle_haystack", tmp_path / "ok.jsonl", size=100, seed=7, min_num_statements=200,
                            max_num_statements=200)
    records = [json.loads(x) for x in written.read_text().splitlines()]
    assert len(records) == 100 and entry["question"] not in {r["question"] for r in records}
    assert len(import_file("reasoning_gym", written)) == 100


def test_neighbouring_seeds_repeat_entries_and_the_import_says_so(tmp_path: Path) -> None:
    write_entries("needle_haystack", tmp_path / "rg.jsonl", size=2, seed=0, min_num_statements=40,
                  max_num_statements=40)
    path = write_entries("needle_haystack", tmp_path / "rg.jsonl", size=2, seed=1, min_num_statements=40,
                         max_num_statements=40)
    with pytest.raises(TaskError, match="seeds at least --size apart"):
        import_file("reasoning_gym", path)


def test_answers_and_dataset_names_are_written_as_an_agent_would_see_them(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    path.write_text(json.dumps({"question": "What is 6*2?", "answer": 12.0,
                                "metadata": {"source_dataset": "my data/set v1", "source_index": 3}}) + "\n")
    (task,) = import_file("reasoning_gym", path)
    assert task.verifier.answer == "12" and task.family == "my-data-set-v1"
    assert task.id == "reasoning_gym/my-data-set-v1/my-data-set-v1-3"


def test_repeated_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    rec = {"id": "same", "question": "What is 1+1?", "answer": "2", "metadata": {"source_dataset": "x"}}
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "question": "What is 2+2?"}) + "\n")
    with pytest.raises(TaskError, match="repeats line 1"):
        import_file("reasoning_gym", path)


def test_two_lengths_of_one_seed_get_distinct_ids(tmp_path: Path) -> None:
    haystack(tmp_path, 130, size=2)
    path = haystack(tmp_path, 260, size=2)  # appended
    ids = [t.id for t in import_file("reasoning_gym", path)]
    assert len(ids) == len(set(ids)) == 4


def test_a_bad_dataset_or_option_names_it() -> None:
    with pytest.raises(ConfigError, match="nosuch"):
        write_entries("nosuch", "/tmp/never.jsonl", size=1)
    with pytest.raises(ConfigError, match="bogus"):
        write_entries("needle_haystack", "/tmp/never.jsonl", size=1, bogus=1)


def test_cli_writes_entries_then_imports_them(tmp_path: Path, capsys) -> None:
    raw, out = tmp_path / "rg.jsonl", tmp_path / "tasks.jsonl"
    assert main(["tasks", "reasoning-gym", "needle_haystack", "--size", "2", "--set", "min_num_statements=300",
                 "--set", "max_num_statements=300", "-o", str(raw)]) == 0
    assert main(["tasks", "import", "--format", "reasoning_gym", str(raw), "-o", str(out)]) == 0
    tasks = load_jsonl(out)
    assert len(tasks) == 2 and all(t.metadata["placement"] == "file" for t in tasks)
    assert main(["tasks", "reasoning-gym", "needle_haystack", "--set", "oops", "-o", str(raw)]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err

"""Loaders and validation: round trips, and every problem named with file, line, field and fix."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sandgym.errors import TaskError
from sandgym.tasks.load import (
    load_folder,
    load_hf,
    load_jsonl,
    load_path,
    save_folder,
    save_jsonl,
    task_from_dict,
    task_to_dict,
    validate_path,
)
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task, Verifier, encode_data
from sandgym.tasks.validate import Problem


@pytest.fixture(scope="module")
def sample():
    return load_suite("coding", n=16, seed=1) + load_suite("long_context", n=10, seed=1, difficulty=1)


def test_jsonl_round_trip(tmp_path: Path, sample) -> None:
    path = save_jsonl(sample, tmp_path / "out" / "tasks.jsonl")
    assert load_jsonl(path) == sample
    assert load_suite(f"{path}:heldout@2") == [t for t in sample if t.split == "heldout"][:2]


def test_folder_round_trip(tmp_path: Path, sample) -> None:
    for i, task in enumerate(sample):
        save_folder(task, tmp_path / f"task{i:02d}")
        assert load_folder(tmp_path / f"task{i:02d}") == [task]
    assert load_path(tmp_path) == sample
    assert load_suite(str(tmp_path / "task00")) == sample[:1]


def test_problem_is_frozen() -> None:
    p = Problem("f.jsonl", 3, "prompt", "missing", "add it")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.line = 4  # type: ignore[misc]
    assert str(p) == "f.jsonl:3: prompt: missing (fix: add it)"


def _good() -> dict:
    return {"id": "t1", "domain": "coding", "family": "demo", "split": "train", "prompt": "Say hi.",
            "verifier": {"kind": "match", "answer": "hi", "matcher": "normalized"}}


def test_validate_reports_every_problem(tmp_path: Path) -> None:
    good = _good()
    missing = {k: v for k, v in _good().items() if k != "prompt"} | {"id": "t2"}
    wrong = _good() | {"id": "t3", "verifier": {"kind": "tests", "tests": {"test_a.py": "def test_a(): pass"},
                                                 "expected_tests": "three"}}
    unknown = _good() | {"id": "t4", "promt": "typo"}
    nested = _good() | {"id": "t5", "limits": {"max_turn": 3}, "verifier": {"kind": "match", "answer": "x",
                                                                             "matcher": "fuzzy"}}
    lines = [json.dumps(good), "{not json", json.dumps(missing), json.dumps(wrong), "", json.dumps(unknown),
             json.dumps(good), json.dumps(nested)]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    problems = validate_path(path)
    found = {(p.line, p.field) for p in problems}
    assert found == {(2, ""), (3, "prompt"), (4, "verifier.expected_tests"), (6, "promt"), (7, "id"),
                     (8, "limits.max_turn"), (8, "verifier.matcher")}
    by = {(p.line, p.field): p for p in problems}
    assert all(p.file == str(path) for p in problems)
    assert "invalid JSON" in by[(2, "")].message
    assert "missing" in by[(3, "prompt")].message and "add prompt" in by[(3, "prompt")].fix
    assert "integer" in by[(4, "verifier.expected_tests")].message and "'three'" in by[(4, "verifier.expected_tests")].message
    assert "'prompt'" in by[(6, "promt")].fix and "did you mean" in by[(6, "promt")].fix
    assert "'limits.max_turns'" in by[(8, "limits.max_turn")].fix
    assert "'fuzzy'" in by[(8, "verifier.matcher")].message
    assert "duplicate" in by[(7, "id")].message
    with pytest.raises(TaskError) as err:
        load_jsonl(path)
    assert f"{path}:6: promt:" in str(err.value) and "7 problem(s)" in str(err.value)


def test_semantic_problems(tmp_path: Path) -> None:
    rec = _good() | {"verifier": {"kind": "tests", "tests": {}, "expected_tests": 0}}
    bad_name = _good() | {"id": "t2", "verifier": {"kind": "tests", "tests": {"sub/helper.py": "x"},
                                                    "expected_tests": 1}}
    escape = _good() | {"id": "t3", "files": {"../evil.py": ""}}
    path = tmp_path / "sem.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (rec, bad_name, escape)) + "\n")
    found = {(p.line, p.field) for p in validate_path(path)}
    assert {(1, "verifier.tests"), (1, "verifier.expected_tests"), (2, "verifier.tests"), (3, "files")} <= found


def test_binary_files_round_trip_as_base64_and_bad_base64_is_named(tmp_path: Path) -> None:
    task = Task(id="b", domain="coding", family="demo", split="train", prompt="Do it.",
                files={"pkg/__init__.py": ""}, data_files=encode_data({"pkg/x.mo": b"\x00\xde"}),
                verifier=Verifier(kind="tests", tests={"test_x.py": "def test_a(): pass\n"}, expected_tests=1,
                                  data=encode_data({"data/elf": b"\x7fELF\x00"})))
    (back,) = load_jsonl(save_jsonl([task], tmp_path / "b.jsonl"))
    assert back == task and back.workspace_files["pkg/x.mo"] == b"\x00\xde"
    assert back.verifier.hidden_files == {"data/elf": b"\x7fELF\x00", "test_x.py": "def test_a(): pass\n"}
    (folder,) = load_folder(save_folder(task, tmp_path / "b"))  # as plain files in files/ and tests/
    assert folder == task and (tmp_path / "b" / "tests" / "data" / "elf").read_bytes() == b"\x7fELF\x00"
    with pytest.raises(TaskError, match=r"data_files\['pkg/x.mo'\] is not base64"):
        dataclasses.replace(task, data_files={"pkg/x.mo": "not base64!"})


def test_hidden_pytest_ini_only_at_the_root_and_with_a_pytest_section(tmp_path: Path) -> None:
    def rec(i: int, ini_path: str, ini: str) -> dict:  # type: ignore[type-arg]
        return _good() | {"id": f"t{i}", "verifier": {"kind": "tests", "expected_tests": 1, "tests": {
            ini_path: ini, "test_x.py": "def test_a():\n    pass\n"}}}

    path = tmp_path / "ini.jsonl"
    recs = (rec(1, "pytest.ini", "[pytest]\nfilterwarnings = error\n"), rec(2, "tests/pytest.ini", "[pytest]\n"),
            rec(3, "pytest.ini", "filterwarnings = error\n"))
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    problems = validate_path(path)
    assert [(p.line, p.field) for p in problems] == [(2, "verifier.tests"), (3, "verifier.tests")]
    assert "below the root" in problems[0].message and "[pytest]" in problems[1].message


def test_folder_problems_have_toml_lines(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_x.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    (folder / "task.toml").write_text(
        'id = "x"\ndomain = "coding"\nfamily = "demo"\nsplit = "train"\nprompt = """\nDo it.\nkind = no\n"""\n\n'
        '[verifier]\nkind = "tests"\nmatcer = "exact"\n'
    )
    problems = validate_path(folder)
    assert [(p.line, p.field) for p in problems] == [(12, "verifier.matcer")]
    assert "'verifier.matcher'" in problems[0].fix and problems[0].file.endswith("task.toml")
    (folder / "task.toml").write_text((folder / "task.toml").read_text().replace('matcer = "exact"\n', ""))
    (task,) = load_folder(folder)
    assert task.verifier.expected_tests == 2 and task.prompt == "Do it.\nkind = no\n"
    (folder / "task.toml").write_text('id = "x"\nsplit = \n')
    (p,) = validate_path(folder)
    assert p.line == 2 and "invalid TOML" in p.message


def test_missing_path_and_empty_dir(tmp_path: Path) -> None:
    assert "no such file" in validate_path(tmp_path / "nope.jsonl")[0].message
    assert "no tasks found" in validate_path(tmp_path)[0].message


def test_task_from_dict_defaults() -> None:
    task = task_from_dict(_good())
    assert task.limits.max_turns == 8 and task.reference is None
    assert task_from_dict(task_to_dict(task)) == task


def test_hf_local_files_and_disk(tmp_path: Path, sample) -> None:
    datasets = pytest.importorskip("datasets")
    path = save_jsonl(sample, tmp_path / "tasks.jsonl")
    assert load_hf("json", data_files=str(path)) == sample
    assert load_hf(str(path)) == sample
    records = [task_to_dict(t) | {k: json.dumps(task_to_dict(t)[k]) for k in ("files", "metadata")}
               for t in sample]
    ds = datasets.Dataset.from_list(records)
    ds.save_to_disk(str(tmp_path / "disk"))
    assert load_hf(str(tmp_path / "disk")) == sample
    datasets.DatasetDict({"heldout": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(TaskError, match="no split 'train'"):
        load_hf(str(tmp_path / "dd"))
    assert load_hf(str(tmp_path / "dd"), split="heldout") == sample

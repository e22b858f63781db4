"""The examples in docs/TASKS.md load and validate as written."""

from __future__ import annotations

import re
from pathlib import Path

from sandgym.tasks.load import load_folder, load_jsonl, validate_path

DOC = (Path(__file__).parents[2] / "docs" / "TASKS.md").read_text()


def _block(lang: str, contains: str) -> str:
    return next(b for b in re.findall(rf"```{lang}\n(.*?)```", DOC, re.S) if contains in b)


def test_jsonl_example(tmp_path: Path) -> None:
    path = tmp_path / "example.jsonl"
    path.write_text(_block("jsonl", '"demo/add-one"'))
    assert validate_path(path) == []
    tasks = load_jsonl(path)
    assert [t.verifier.kind for t in tasks] == ["tests", "match"]


def test_folder_example(tmp_path: Path) -> None:
    folder = tmp_path / "add_one"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(_block("toml", 'id = "demo/add-one"'))
    (folder / "tests" / "test_add_one.py").write_text("from solution import add_one\n\n\ndef test_a():\n"
                                                     "    assert add_one(1) == 2\n")
    (task,) = load_folder(folder)
    assert task.verifier.expected_tests == 1 and task.limits.max_turns == 4


def test_plugin_example() -> None:
    namespace: dict = {}
    exec(_block("python", "def suites()"), namespace)
    (suite,) = namespace["suites"]().values()
    train, held = suite("train", 3, 0, None), suite("heldout", 3, 0, None)
    assert len(train) == 3 and not {t.prompt for t in train} & {t.prompt for t in held}

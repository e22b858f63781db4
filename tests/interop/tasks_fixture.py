"""One tiny coding task (the docs/TASKS.md example), written as a JSONL suite file."""

from __future__ import annotations

from pathlib import Path

from sandgym.tasks.load import save_jsonl
from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier

ADD_ONE = Task(
    id="demo/add-one", domain="coding", family="demo", split="train",
    prompt="Write `solution.py` defining `add_one(x: int) -> int` that returns x + 1.",
    files={"solution.py": "def add_one(x: int) -> int:\n    raise NotImplementedError\n"},
    verifier=Verifier(kind="tests", tests={"test_add_one.py": "from solution import add_one\n\n\ndef test_small():\n"
                                           "    assert add_one(1) == 2\n\n\ndef test_negative():\n"
                                           "    assert add_one(-5) == -4\n"}, expected_tests=2),
    reference=Reference(files={"solution.py": "def add_one(x: int) -> int:\n    return x + 1\n"}),
    limits=TaskLimits(max_turns=4),
)


def write_suite(path: Path) -> Path:
    save_jsonl([ADD_ONE], path)
    return path

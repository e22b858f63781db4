"""Three tiny hand-made tasks (one per verifier style) for ``ToolEnv()`` without a suite, tests and smoke runs."""

from __future__ import annotations

from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier

__all__ = ["demo_tasks"]

_ADD_TESTS = """from solution import add


def test_small():
    assert add(1, 2) == 3


def test_negative():
    assert add(-5, 2) == -3
"""


def demo_tasks() -> list[Task]:
    """A coding task (hidden tests + a visible test), a file-placement question and an inline question."""
    doc = "\n".join(f"line {i}: nothing to see" for i in range(1, 400))
    doc = doc.replace("line 287: nothing to see", "line 287: the vault code is 4417")
    return [
        Task(
            id="demo/add",
            domain="coding",
            family="demo",
            split="train",
            prompt="Write solution.py defining add(a: int, b: int) -> int that returns a + b.",
            verifier=Verifier(kind="tests", tests={"test_add.py": _ADD_TESTS}, expected_tests=2),
            files={"solution.py": "def add(a: int, b: int) -> int:\n    raise NotImplementedError\n"},
            visible_tests={"test_visible.py": "from solution import add\n\n\ndef test_one():\n    assert add(1, 1) == 2\n"},
            reference=Reference(files={"solution.py": "def add(a: int, b: int) -> int:\n    return a + b\n"}),
            limits=TaskLimits(max_turns=6),
        ),
        Task(
            id="demo/vault",
            domain="long_context",
            family="demo",
            split="train",
            prompt="The file notes.txt is a long log. What is the vault code? Submit only the number.",
            verifier=Verifier(kind="match", answer="4417", matcher="number"),
            files={"notes.txt": doc},
            reference=Reference(answer="4417"),
            limits=TaskLimits(max_turns=6),
            metadata={"placement": "file"},
        ),
        Task(
            id="demo/capital",
            domain="long_context",
            family="demo",
            split="train",
            prompt="Document:\nThe capital of Freedonia is Fredville.\n\nQuestion: what is the capital of Freedonia?",
            verifier=Verifier(kind="match", answer="Fredville", matcher="normalized"),
            reference=Reference(answer="Fredville"),
            limits=TaskLimits(max_turns=4),
            metadata={"placement": "inline"},
        ),
    ]

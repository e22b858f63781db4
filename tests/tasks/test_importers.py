"""HumanEval- and MBPP-style importers on small sample files written for these tests."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sandgym.cli import main
from sandgym.errors import TaskError
from sandgym.sandbox import protocol
from sandgym.tasks.importers import (
    check_reference,
    import_file,
    import_humaneval,
    import_mbpp,
    verify_references,
)
from sandgym.tasks.importers.humaneval import split_check
from sandgym.tasks.load import load_jsonl, save_jsonl
from tests.fake_sandbox import FakeSandbox

DATA = Path(__file__).parent / "data"


def test_humaneval_sample() -> None:
    tasks = import_humaneval(DATA / "humaneval_sample.jsonl")
    assert [t.id for t in tasks] == ["humaneval/HumanEval/0", "humaneval/HumanEval/1", "humaneval/HumanEval/2"]
    assert [t.verifier.expected_tests for t in tasks] == [3, 4, 1]  # the loop-based check stays one test
    for t in tasks:
        assert (t.domain, t.family, t.split) == ("coding", "humaneval", "heldout")
        (src,) = t.verifier.tests.values()
        assert f"\nfrom solution import {t.metadata['function']}\n" in "\n" + src  # after the prompt's helpers
        assert "raise NotImplementedError" in t.files["solution.py"]
        assert t.reference.files["solution.py"].startswith(t.files["solution.py"].split("    raise")[0][:20])
    assert "check(words_upper)" in tasks[2].verifier.tests["test_words_upper.py"]
    assert import_file("humaneval", DATA / "humaneval_sample.jsonl", split="train")[0].split == "train"


def test_mbpp_sample(tmp_path: Path) -> None:
    tasks = import_mbpp(DATA / "mbpp_sample.jsonl")
    assert [t.metadata["function"] for t in tasks] == ["remove_Occ", "circle_area", "similar_elements"]
    assert [t.verifier.expected_tests for t in tasks] == [3, 2, 3]
    src = tasks[1].verifier.tests["test_circle_area.py"]
    assert "import math\nfrom solution import circle_area" in src and src.count("\ndef test_") == 2
    assert "\r" not in tasks[0].reference.files["solution.py"]
    assert "remove_Occ(s, ch)" in tasks[0].prompt
    assert load_jsonl(save_jsonl(tasks, tmp_path / "m.jsonl")) == tasks


def test_split_check_falls_back_for_non_assert_bodies() -> None:
    assert len(split_check("def check(c):\n    assert c(1) == 2\n    assert c(2) == 3\n", "f")) == 2
    assert split_check("def check(c):\n    x = 1\n    assert c(x) == 2\n", "f") == []
    assert split_check("def nope(c):\n    assert c(1)\n", "f") == []


def test_bad_records_name_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    rows = [json.dumps({"task_id": "a", "prompt": "def f():\n", "test": "", "entry_point": "f"}), "{oops",
            json.dumps({"task_id": "b", "prompt": 3, "canonical_solution": "", "test": "", "entry_point": "f"})]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(TaskError) as err:
        import_humaneval(path)
    text = str(err.value)
    assert f"{path}:1: canonical_solution: missing field" in text
    assert f"{path}:2: invalid JSON" in text
    assert f"{path}:3: prompt: expected str, got int" in text
    mb = tmp_path / "mb.jsonl"
    mb.write_text(json.dumps({"task_id": 1, "text": "t", "code": "def g():\n    return 1\n",
                              "test_list": ["assert h() == 1"]}) + "\n")
    with pytest.raises(TaskError, match="test_list: the tests call no function defined"):
        import_mbpp(mb)
    with pytest.raises(TaskError, match="unknown import format 'apps'"):
        import_file("apps", mb)


class FixedReportSandbox(FakeSandbox):
    """The shared fake with a fixed ``run_tests`` report: the first ``passed`` tests pass, the rest fail with
    "boom" (no test runs)."""

    def __init__(self, passed: int) -> None:
        super().__init__()
        self.passed = passed

    def run_tests(self, tests, *, expected, timeout=None, isolation="process"):  # type: ignore[no-untyped-def]
        outcomes = tuple(protocol.TestOutcome(f"t{i}", "passed" if i < self.passed else "failed", "boom")
                         for i in range(expected))
        return protocol.TestReport(expected=expected, outcomes=outcomes, report_found=True)


def test_verify_references_reports_failures() -> None:
    tasks = import_humaneval(DATA / "humaneval_sample.jsonl")
    box = FixedReportSandbox(passed=1)
    results = verify_references(tasks, lambda: box)
    assert box.closed and [r.ok for r in results] == [False, False, True]
    assert results[0].passed == 1 and results[0].expected == 3 and "t1: failed boom" in results[0].message
    assert box.written["solution.py"] == tasks[-1].reference.files["solution.py"]


def test_verify_references_in_real_sandbox() -> None:
    pytest.importorskip("sandgym.sandbox.local")
    from sandgym.sandbox import LocalSandbox

    tasks = import_humaneval(DATA / "humaneval_sample.jsonl") + import_mbpp(DATA / "mbpp_sample.jsonl")
    try:
        box = LocalSandbox()
    except Exception as exc:
        pytest.skip(f"local sandbox unavailable: {exc}")
    results = verify_references(tasks, lambda: box)
    assert all(r.ok for r in results), [r for r in results if not r.ok]
    broken = tasks[0]
    (noop,) = verify_references([_without_reference_code(broken)], LocalSandbox)
    assert not noop.ok


def _without_reference_code(task):
    import dataclasses

    return dataclasses.replace(task, reference=dataclasses.replace(task.reference, files=dict(task.files)))


def test_check_reference_match_task() -> None:
    from sandgym.tasks.registry import load_suite

    (task,) = load_suite("long_context/needle:train@1", difficulty=1)
    with FixedReportSandbox(0) as box:
        assert check_reference(task, box).ok


MBPP_SETUP = [
    {"task_id": 927, "text": "Write a function to find the height of the given binary tree.",
     "code": "class Node:\n    def __init__(self, data):\n        self.data, self.left, self.right = data, None, None\n\n"
             "def max_height(node):\n    if node is None:\n        return 0\n"
             "    return 1 + max(max_height(node.left), max_height(node.right))\n",
     "test_setup_code": "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(4)\nlone = Node(7)\n"
                        "depth_two = max_height(root.left)",
     "test_list": ["assert max_height(root) == 3", "assert max_height(lone) == 1", "assert depth_two == 2"]},
]


def test_mbpp_setup_code_runs_before_the_asserts_with_the_solutions_names(tmp_path: Path) -> None:
    path = tmp_path / "mbpp_setup.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in MBPP_SETUP))
    (task,) = import_mbpp(path)
    src = task.verifier.tests["test_max_height.py"]
    assert "from solution import Node, max_height\n\nroot = Node(1)" in src
    out = tmp_path / "out.jsonl"
    try:
        assert main(["tasks", "import", str(path), "--format", "mbpp", "-o", str(out), "--check-references"]) == 0
    except Exception as exc:  # pragma: no cover - no namespaces here
        pytest.skip(f"local sandbox unavailable: {exc}")
    assert load_jsonl(out)[0].verifier.expected_tests == 3
    bad = [MBPP_SETUP[0] | {"test_list": ["assert max_height(root) == 4"]}]
    path.write_text(json.dumps(bad[0]) + "\n")
    out.unlink()
    assert main(["tasks", "import", str(path), "--format", "mbpp", "-o", str(out), "--check-references"]) == 1
    assert not out.exists()


def test_visible_ships_the_first_asserts_as_visible_tests(tmp_path: Path) -> None:
    from sandgym.tasks.task import VISIBLE_NOTE

    plain, shown = import_humaneval(DATA / "humaneval_sample.jsonl"), import_humaneval(
        DATA / "humaneval_sample.jsonl", visible=2)
    assert [t.verifier for t in shown] == [t.verifier for t in plain]  # the hidden tests do not change
    first = shown[0].visible_tests["test_visible.py"]
    assert first.count("\ndef test_") == 2 and "candidate(2, 3) == 5" in first and "candidate(0, 0)" not in first
    assert "def check" not in first and "METADATA = " in first  # no hidden assert leaks; constants stay
    assert shown[0].prompt == plain[0].prompt + "\n" + VISIBLE_NOTE and not plain[0].visible_tests
    assert not shown[2].visible_tests and VISIBLE_NOTE not in shown[2].prompt  # a loop-based check shows nothing
    mb = import_mbpp(DATA / "mbpp_sample.jsonl", visible=1)
    assert all(t.visible_tests["test_visible.py"].count("\ndef test_") == 1 for t in mb)
    assert "from solution import circle_area" in mb[1].visible_tests["test_visible.py"]
    assert import_file("humaneval", DATA / "humaneval_sample.jsonl", visible=2) == shown
    with pytest.raises(TaskError, match="--visible -1: give how many"):
        import_humaneval(DATA / "humaneval_sample.jsonl", visible=-1)
    with pytest.raises(TaskError, match="--visible 0.5"):
        import_file("humaneval", DATA / "humaneval_sample.jsonl", visible=0.5)  # type: ignore[arg-type]
    out = tmp_path / "he.jsonl"
    assert main(["tasks", "import", str(DATA / "humaneval_sample.jsonl"), "--format", "humaneval", "--visible", "2",
                 "-o", str(out)]) == 0
    assert load_jsonl(out) == shown


def test_visible_needs_a_format_with_asserts(tmp_path: Path) -> None:
    from sandgym.tasks.importers import IMPORTERS, register_importer

    register_importer("plain", lambda path, *, split="heldout": [])
    register_importer("kw", lambda path, **kw: [kw])  # type: ignore[list-item]
    try:
        with pytest.raises(TaskError, match="format 'plain' has no asserts to show; drop --visible"):
            import_file("plain", tmp_path, visible=1)
        with pytest.raises(TaskError, match="--visible -1"):
            import_file("plain", tmp_path, visible=-1)
        assert import_file("plain", tmp_path) == []
        assert import_file("kw", tmp_path, visible=2) == [{"split": "heldout", "visible": 2}]
    finally:
        IMPORTERS.pop("plain")
        IMPORTERS.pop("kw")


def test_visible_skips_placeholder_asserts_keeps_one_hidden_and_runs_against_the_reference(tmp_path: Path) -> None:
    """HumanEval-style edge cases: an ``assert True`` placeholder first, a trailing ``check(f)`` call, helper
    constants; a record with one assert shows none; MBPP with setup code. Every visible file runs against its
    reference in the real sandbox (``check_reference`` runs visible tests too) and fails the stub."""
    pytest.importorskip("sandgym.sandbox.local")
    from sandgym.sandbox import LocalSandbox

    test = ("SCALE = 10\n\n\ndef check(candidate):\n    assert True, 'placeholder'\n"
            "    assert candidate(1) == SCALE\n    assert candidate(2) == 2 * SCALE\n    assert candidate(3) == 30\n\n"
            "check(times_ten)\n")
    rows = [{"task_id": "E/0", "prompt": "def times_ten(x):\n    \"\"\"x times ten.\"\"\"\n",
             "canonical_solution": "    return 10 * x\n", "test": test, "entry_point": "times_ten"},
            {"task_id": "E/1", "prompt": "def one():\n", "canonical_solution": "    return 1\n",
             "test": "def check(candidate):\n    assert candidate() == 1\n", "entry_point": "one"}]
    path = tmp_path / "edge.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shown, single = import_humaneval(path, visible=5)
    v = shown.visible_tests["test_visible.py"]
    assert v.count("\ndef test_") == 2 and "assert True" not in v and "candidate(3) == 30" not in v  # 1 hidden only
    assert "SCALE = 10" in v and "check(" not in v
    assert not single.visible_tests  # its one assert stays hidden
    mb = tmp_path / "mb.jsonl"
    mb.write_text(json.dumps({"task_id": 7, "text": "Double it.", "code": "def dbl(x):\n    return 2 * x\n",
                              "test_setup_code": "K = 3", "test_list": ["assert dbl(K) == 6", "assert dbl(0) == 0"]})
                  + "\n")
    (m,) = import_mbpp(mb, visible=5)
    assert m.visible_tests["test_visible.py"].count("\ndef test_") == 1 and "K = 3" in m.visible_tests["test_visible.py"]
    results = verify_references([shown, m], LocalSandbox)
    assert all(r.ok for r in results), results
    stubbed = [dataclasses.replace(t, verifier=dataclasses.replace(t.verifier, tests={"test_none.py": "def test_ok():\n    pass\n"}, expected_tests=1),
                                   reference=dataclasses.replace(t.reference, files=dict(t.files))) for t in (shown, m)]
    failed = verify_references(stubbed, LocalSandbox)  # hidden tests pass, the visible ones fail on the stub
    assert [r.ok for r in failed] == [False, False] and all("visible tests:" in r.message for r in failed)


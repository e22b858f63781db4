"""From-repo tasks grade with the agent's code out of the grader's process, so the reward cannot be forged.

Before, a repository's tests imported the agent's code into the grader: on a from-repo suite of a real package
``always_equal``, ``always_true`` and ``pytest_reporter_gc`` earned up to 0.75 against noop's 0.25, and
``pytest_report_patch`` / ``forged_report_fds`` earned 1.00 on another. Each attack is pinned here on a suite of a
fixture project, and a test that only works in the code's own process (a subclass of the project's class) is
dropped or, with ``allow_in_process``, kept and marked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandgym.private.fromrepo import REPORT_NAME, TASKS_NAME, FromRepoConfig, FromRepoResult, run
from sandgym.rollout.audit import audit
from sandgym.tasks.registry import load_suite
from tests.private.conftest import sandbox_or_skip

FIXTURE = Path(__file__).parent / "fixtures" / "minicalc"
FORMER_HACKS = ("always_equal", "always_true", "pytest_report_patch", "pytest_reporter_gc", "forged_report_fds",
                "patched_builtins", "pytest_runtest_noop")

GEO = {
    "geo/__init__.py": "",
    "geo/shapes.py": (
        "class Shape:\n    sides = 0\n\n    def describe(self):\n        return f'{type(self).__name__} with {self.sides} sides'\n\n\n"
        "def scale(values, k):\n    out = []\n    for v in values:\n        out.append(v * k)\n    return out\n\n\n"
        "def apply(f, values):\n    return [f(v) for v in values]\n"),
    "tests/test_shapes.py": (
        "from geo.shapes import Shape, apply, scale\n\n\n"
        "class Square(Shape):\n    sides = 4\n\n\n"
        "def test_describe_subclass():  # needs the project's class in the test's own process\n"
        "    assert Square().describe() == 'Square with 4 sides'\n\n\n"
        "def test_scale():\n    assert scale([1, 2], 3) == [3, 6]\n\n\n"
        "def test_apply_callback():\n    seen = []\n    assert apply(lambda v: seen.append(v) or v + 1, [1, 2]) == [2, 3]\n"
        "    assert seen == [1, 2]\n"),
}


@pytest.fixture(scope="module")
def minicalc(tmp_path_factory: pytest.TempPathFactory) -> tuple[FromRepoResult, Path]:
    sandbox_or_skip()
    out = tmp_path_factory.mktemp("minicalc_integrity")
    return run(FromRepoConfig(repo=str(FIXTURE), out=str(out), seed=0, max_tasks=8)), out


def test_from_repo_tasks_grade_out_of_process(minicalc: tuple[FromRepoResult, Path]) -> None:
    result, out = minicalc
    assert result.made > 0 and {t.verifier.isolation for t in result.tasks} == {"process"}
    report = json.loads((out / REPORT_NAME).read_text())
    assert report["made_by_isolation"] == {"process": result.made}


def test_former_hacks_earn_no_more_than_noop(minicalc: tuple[FromRepoResult, Path]) -> None:
    _, out = minicalc
    tasks = load_suite(str(out / TASKS_NAME))
    result = audit(tasks, per_family=1, attacks=list(FORMER_HACKS), reuse=False)
    assert {c.family for c in result.cells} == {"coding/repo_reimplement", "coding/repo_bugfix"}
    assert result.clean, result.to_markdown()


def _geo(tmp_path: Path) -> Path:
    for rel, text in GEO.items():
        (tmp_path / "geo_repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "geo_repo" / rel).write_text(text)
    return tmp_path / "geo_repo"


def test_a_test_that_needs_the_codes_process_is_dropped_or_kept_marked(tmp_path: Path) -> None:
    sandbox_or_skip()
    repo = _geo(tmp_path)
    safe = run(FromRepoConfig(repo=str(repo), out=str(tmp_path / "safe"), kinds=("reimplement",), seed=0))
    by_fn = {t.metadata["function"]: t for t in safe.tasks}
    assert set(by_fn) == {"scale", "apply"}  # callbacks cross the boundary; the subclass test does not
    assert all(t.verifier.isolation == "process" for t in safe.tasks)
    assert [d.reason for d in safe.discards if d.candidate.startswith("geo/shapes.py::Shape.describe")] == \
        ["needs_in_process"]
    marked = run(FromRepoConfig(repo=str(repo), out=str(tmp_path / "marked"), kinds=("reimplement",), seed=0,
                                allow_in_process=True))
    describe = [t for t in marked.tasks if t.metadata["function"] == "Shape.describe"]
    assert len(describe) == 1 and describe[0].verifier.isolation == "in-process"
    assert marked.report()["made_by_isolation"] == {"process": 2, "in-process": 1}

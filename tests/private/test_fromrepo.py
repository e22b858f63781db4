"""``sandgym tasks from-repo`` end to end in the real sandbox: the fixture project and the vendored toolz sdist."""

from __future__ import annotations

import json
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest

from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
from sandgym.private.fromrepo import REPORT_NAME, TASKS_NAME, FromRepoConfig, FromRepoResult, run
from sandgym.tasks.registry import load_suite
from tests.fake_sandbox import FakeSandbox
from tests.private.conftest import sandbox_or_skip

FIXTURES = Path(__file__).parent / "fixtures"
TOOLZ_SDIST = FIXTURES / "toolz-0.12.1.tar.gz"  # `pip download --no-deps --no-binary :all: toolz==0.12.1`


@pytest.fixture(scope="module")
def minicalc(tmp_path_factory: pytest.TempPathFactory) -> tuple[FromRepoResult, Path]:
    sandbox_or_skip()
    out = tmp_path_factory.mktemp("minicalc_suite")
    return run(FromRepoConfig(repo=str(FIXTURES / "minicalc"), out=str(out), seed=0)), out


@pytest.fixture(scope="module")
def toolz(tmp_path_factory: pytest.TempPathFactory) -> tuple[FromRepoResult, Path]:
    sandbox_or_skip()
    src = tmp_path_factory.mktemp("toolz_src")
    with tarfile.open(TOOLZ_SDIST) as tar:
        tar.extractall(src, filter="data")
    out = tmp_path_factory.mktemp("toolz_suite")
    config = FromRepoConfig(repo=str(src / "toolz-0.12.1"), out=str(out), name="toolz", max_tasks=6, seed=0)
    return run(config), out


def test_vendored_sdist_is_small_and_real() -> None:
    assert TOOLZ_SDIST.stat().st_size < 1_000_000
    with tarfile.open(TOOLZ_SDIST) as tar:
        names = tar.getnames()
    assert "toolz-0.12.1/PKG-INFO" in names and any(n.endswith("tests/test_itertoolz.py") for n in names)


@pytest.mark.parametrize("which", ["minicalc", "toolz"])
def test_tasks_made_and_report_written(which: str, request: pytest.FixtureRequest) -> None:
    result, out = request.getfixturevalue(which)
    assert result.made > 0
    report = json.loads((out / REPORT_NAME).read_text())
    assert report["made"] == result.made
    assert report["discarded"] == len(report["discards"]) == sum(report["discarded_by_reason"].values())
    assert report["discarded"] > 0 and all(d["reason"] for d in report["discards"])
    tasks = load_suite(str(out / TASKS_NAME))
    assert len(tasks) == result.made and len(load_suite(str(out))) == result.made  # the folder loads too
    assert {t.metadata["kind"] for t in tasks} == {"reimplement", "bugfix"}
    for t in tasks:
        entry = t.metadata["entry_file"]
        assert t.files[entry] != t.reference.files[entry]  # type: ignore[union-attr]
        assert any(name.split("/")[-1].startswith("test_") for name in t.verifier.tests)  # the repo's layout
        assert not any("tests/" in p for p in t.files)  # hidden tests are not in the workspace
        if t.metadata["kind"] == "reimplement":
            assert "raise NotImplementedError" in t.files[entry]


def test_minicalc_discard_reasons_and_hidden_tests(minicalc: tuple[FromRepoResult, Path]) -> None:
    result, _ = minicalc
    reasons = result.report()["discarded_by_reason"]
    assert reasons["not_referenced_by_tests"] >= 1  # unused_helper
    assert reasons["not_exercised"] >= 1  # double(): its only test fails at baseline
    assert reasons["mutation_survived"] >= 1
    assert result.baseline["passed"] < result.baseline["collected"]
    for t in result.tasks:
        hidden = "\n".join(t.verifier.tests.values())
        assert "def test_known_failure" not in hidden  # fails at baseline: never decides a task
    # the repo's conftest.py travels with the hidden tests, so a test using its fixture can decide a task
    fixture_users = [t for t in result.tasks if "tests/test_stack.py::test_uses_conftest_fixture"
                     in t.metadata["hidden_tests"]]
    assert fixture_users and all("tests/conftest.py" in t.verifier.tests for t in fixture_users)
    ids = {t.id for t in result.tasks}
    assert "minicalc/reimplement/minicalc.arith.clamp" in ids
    # a special method runs through syntax (Stack() calls __init__): naming its class makes it a candidate
    assert "minicalc/reimplement/minicalc.stack.Stack.__init__" in ids
    assert not any("unused_helper" in i or ".double" in i for i in ids)


def test_split_is_by_source_file(minicalc: tuple[FromRepoResult, Path], toolz: tuple[FromRepoResult, Path]) -> None:
    for result, _ in (minicalc, toolz):
        splits: dict[str, set[str]] = defaultdict(set)
        for t in result.tasks:
            splits[t.metadata["entry_file"]].add(t.split)
            assert t.split == result.splits[t.metadata["entry_file"]]
        assert all(len(s) == 1 for s in splits.values())
    assert {t.split for t in minicalc[0].tasks} == {"train", "heldout"}
    train_files = {t.metadata["entry_file"] for t in minicalc[0].tasks if t.split == "train"}
    heldout_files = {t.metadata["entry_file"] for t in minicalc[0].tasks if t.split == "heldout"}
    assert train_files and heldout_files and not train_files & heldout_files


def test_secrets_scrubbed_from_task_files(minicalc: tuple[FromRepoResult, Path]) -> None:
    result, out = minicalc
    text = (out / TASKS_NAME).read_text()
    assert "AKIAIOSFODNN7EXAMPLE" not in text and "ops-team@minicalc-corp.example.com" not in text
    assert "f3a9c2e7b1d84a6c" not in text and "<REDACTED:aws_access_key>" in text
    kinds = {(f["kind"], f["file"]) for f in json.loads((out / REPORT_NAME).read_text())["scrub"]["findings"]}
    assert {("email", "minicalc/settings.py"), ("aws_access_key", "minicalc/settings.py"),
            ("secret_assignment", "minicalc/settings.py")} <= kinds


def _rate(tasks: list, agent_cls: type) -> float:
    from sandgym.envs.tool_env import ToolEnv

    env = ToolEnv(tasks=tasks, reuse_sandbox=True)
    try:
        wins = [run_episode(env, agent_cls(), task).success for task in tasks]
    finally:
        env.close()
    return sum(wins) / len(wins)


@pytest.mark.parametrize("which", ["minicalc", "toolz"])
def test_oracle_solves_all_and_noop_none(which: str, request: pytest.FixtureRequest) -> None:
    result, out = request.getfixturevalue(which)
    tasks = load_suite(str(out / TASKS_NAME))
    assert _rate(tasks, OracleAgent) == 1.0
    assert _rate(tasks, NoopAgent) == 0.0


def test_cli_from_repo_smoke(tmp_path: Path) -> None:
    sandbox_or_skip()
    from sandgym.cli import main

    code = main(["tasks", "from-repo", str(FIXTURES / "minicalc"), "--out", str(tmp_path), "--max-tasks", "2",
                 "--kinds", "bugfix", "--seed", "3"])
    assert code == 0
    tasks = load_suite(str(tmp_path / TASKS_NAME))
    assert len(tasks) == 2 and all(t.metadata["kind"] == "bugfix" for t in tasks)
    splits = {t.split for t in tasks}
    assert (tmp_path / "train.toml").is_file() == ("train" in splits)
    assert (tmp_path / "eval.toml").is_file() == ("heldout" in splits)


def test_config_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="kinds"):
        FromRepoConfig(repo=".", out="x", kinds=("rewrite",))
    with pytest.raises(ValueError, match="heldout_fraction"):
        FromRepoConfig(repo=".", out="x", heldout_fraction=1.5)


def test_runner_survives_a_dead_sandbox() -> None:
    from sandgym.errors import SandboxError
    from sandgym.private.fromrepo import _Runner

    class DiesInTests(FakeSandbox):
        def run_tests(self, tests, *, expected, timeout=None, isolation="process"):  # type: ignore[no-untyped-def]
            raise SandboxError("worker died")

    made: list[DiesInTests] = []

    def make(timeout: float) -> DiesInTests:
        made.append(DiesInTests())
        return made[-1]

    runner = _Runner(make, {"pkg/m.py": "x = 1\n"}, 5.0)
    report = runner.run({"test_m.py": ""}, 1, swap=("pkg/m.py", "x = 2\n"))
    assert not report.report_found and runner.restarts == 1
    assert made[0].closed and made[1].written == {"pkg/m.py": "x = 1\n"}
    runner.close()

"""Suite specs, load_suite over built-in and plugin suites, and the ``sandgym tasks`` CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sandgym.cli import main
from sandgym.errors import TaskError
from sandgym.tasks import Task, registry
from sandgym.tasks.registry import SuiteSpec, list_suites, load_suite, parse_suite_spec

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("coding", SuiteSpec("coding")),
        ("coding:train", SuiteSpec("coding", "train")),
        ("coding/strings:heldout", SuiteSpec("coding/strings", "heldout")),
        ("long_context/needle", SuiteSpec("long_context/needle")),
        ("coding@5", SuiteSpec("coding", None, 5)),
        ("coding/repo_fix:train@3", SuiteSpec("coding/repo_fix", "train", 3)),
        ("long_context:heldout@8?tokens=4096&placement=file",
         SuiteSpec("long_context", "heldout", 8, (("tokens", 4096), ("placement", "file")))),
        ("long_context/needle?tokens=1024", SuiteSpec("long_context/needle", None, None, (("tokens", 1024),))),
    ],
)
def test_parse_suite_spec(spec: str, parsed: SuiteSpec) -> None:
    assert parse_suite_spec(spec) == parsed
    assert str(parsed) == spec


@pytest.mark.parametrize(("spec", "message"), [("coding:trian", "Did you mean 'train'"), ("coding@x", "@10"),
                                               ("coding@0", "positive"), ("", "empty suite spec"),
                                               ("long_context?tokens", "key=value"), ("long_context?=3", "key=value"),
                                               ("long_context?tokens=1&tokens=2", "given twice")])
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(TaskError, match=message):
        parse_suite_spec(spec)


def test_load_suite_counts_and_splits() -> None:
    both = load_suite("coding/strings")
    assert len(both) == 8 and {t.split for t in both} == {"train", "heldout"}
    assert len(load_suite("coding/strings:train")) == 4
    assert len(load_suite("coding:heldout", n=9)) == 9
    assert len(load_suite("coding:heldout@3", n=9)) == 3
    train = load_suite("coding:train", n=24, difficulty=1)
    assert not any(t.unseen for t in train) and {t.difficulty for t in train} == {1}
    assert load_suite("long_context", n=4, seed=3) == load_suite("long_context", n=4, seed=3)


def test_load_suite_errors() -> None:
    with pytest.raises(TaskError, match="Did you mean 'coding'"):
        load_suite("codng")
    with pytest.raises(TaskError, match=r"does not take option\(s\) \['tokens'\]"):
        load_suite("coding:train", n=2, tokens=1000)
    tasks = load_suite("long_context:train", n=3, tokens=2000, placement="file")
    assert all(t.metadata["placement"] == "file" for t in tasks)
    with pytest.raises(TaskError, match="does not take option"):
        load_suite("coding:train?tokens=1000", n=2)
    with pytest.raises(TaskError, match=r"\['tokens'\] that the caller also passes"):
        load_suite("long_context:train?tokens=1000", n=2, tokens=2000)


def test_spec_options_choose_the_document_length_and_name_distinct_tasks() -> None:
    """``?tokens=`` in a spec (configs and --suite take it) sets the length; the same question at two lengths is
    two tasks with two ids, and the default ids do not change."""
    short = load_suite("long_context/needle:heldout@2?tokens=1024&placement=file")
    long = load_suite("long_context/needle:heldout@2?tokens=8192&placement=file")
    assert [t.metadata["placement"] for t in short + long] == ["file"] * 4
    assert all(900 < t.metadata["tokens"] < 1200 for t in short) and all(t.metadata["tokens"] > 7800 for t in long)
    assert {t.id for t in short}.isdisjoint(t.id for t in long)
    assert [t.verifier.answer for t in short] == [t.verifier.answer for t in long]  # same questions, paired by length
    assert [t.id for t in load_suite("long_context/needle:heldout@2")] == [
        "long_context/needle/heldout/d1/s0-0", "long_context/needle/heldout/d2/s0-1"]


def _plugin_suite(split: str, n: int, seed: int, difficulty: int | None) -> list[Task]:
    """A one-family plugin suite for tests."""
    return load_suite(f"coding/numbers:{split}", n=n, seed=seed, difficulty=difficulty)


class _EP:
    def __init__(self, name: str, value: str, obj: object) -> None:
        self.name, self.value, self._obj = name, value, obj

    def load(self) -> object:
        return self._obj


def test_plugin_suites(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [_EP("builtin", registry.BUILTIN_ENTRY_POINT, None),
           _EP("mine", "my_pkg.tasks:suites", lambda: {"mine/numbers": _plugin_suite})]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps)
    registry._plugin_suites.cache_clear()
    try:
        assert "mine/numbers" in list_suites() and "A one-family plugin" in list_suites()["mine/numbers"]
        assert len(load_suite("mine/numbers:heldout@2")) == 2
        eps.append(_EP("clash", "x:y", {"coding": _plugin_suite}))
        registry._plugin_suites.cache_clear()
        with pytest.raises(TaskError, match="clashes"):
            load_suite("coding")
    finally:
        registry._plugin_suites.cache_clear()


def test_cli_list_show_validate_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list"]) == 0
    assert "coding/refactor" in capsys.readouterr().out
    assert main(["tasks", "show", "coding/strings:train", "--n", "2", "--difficulty", "1"]) == 0
    out = capsys.readouterr().out
    assert "coding/strings" in out and "Example" in out
    out_path = tmp_path / "he.jsonl"
    assert main(["tasks", "import", "--format", "humaneval", str(DATA / "humaneval_sample.jsonl"),
                 "-o", str(out_path)]) == 0
    assert main(["tasks", "validate", str(out_path)]) == 0
    assert "3 task(s), no problems" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    assert main(["tasks", "validate", str(bad)]) == 1
    assert f"{bad}:1: domain: missing required field" in capsys.readouterr().out


def test_cli_smoke_subprocess() -> None:
    res = subprocess.run([sys.executable, "-m", "sandgym", "tasks", "show", "long_context/needle@1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "long_context/needle" in res.stdout


def test_cli_import_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sandgym.sandbox.local")
    from sandgym.sandbox import LocalSandbox

    try:
        LocalSandbox().close()
    except Exception as exc:
        pytest.skip(f"local sandbox unavailable: {exc}")
    out = tmp_path / "mbpp.jsonl"
    assert main(["tasks", "import", "--format", "mbpp", str(DATA / "mbpp_sample.jsonl"), "-o", str(out),
                 "--verify"]) == 0
    assert "references: 3/3 pass their own tests" in capsys.readouterr().out and out.exists()

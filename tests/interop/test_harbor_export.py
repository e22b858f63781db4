"""sandgym suites -> Harbor task directories -> sandgym again: oracle 1.0 and noop scores unchanged in the sandbox."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import sandgym.interop  # noqa: F401  (registers the harbor import format)
from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
from sandgym.cli import main
from sandgym.configs import load_toml
from sandgym.errors import TaskError
from sandgym.interop.harbor import import_harbor
from sandgym.interop.harbor_export import export_harbor, harbor_name
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task, Verifier


def scores(tasks: list[Task]) -> dict[str, tuple[float, float]]:
    env = gym.make("sandgym/Coding-v0", tasks=tasks)
    try:
        out = {}
        for t in tasks:
            good = run_episode(env.unwrapped, OracleAgent(), t)
            bad = run_episode(env.unwrapped, NoopAgent(), t)
            out[t.id] = (good.reward_components["correctness@v1"], bad.reward_components["correctness@v1"])
        return out
    finally:
        env.close()


def test_round_trip_keeps_oracle_and_noop_scores(tmp_path: Path) -> None:
    tasks = [*load_suite("coding/strings:train", n=2), *load_suite("coding/repo_fix:train", n=1),
             *load_suite("long_context/needle:train", n=1)]
    written, skipped = export_harbor(tasks, tmp_path)
    assert len(written) == 4 and skipped == {}
    toml = load_toml(tmp_path / harbor_name(tasks[0].id) / "task.toml")
    assert toml["metadata"]["sandgym_id"] == tasks[0].id and toml["task"]["name"] == harbor_name(tasks[0].id)
    assert (tmp_path / harbor_name(tasks[0].id) / "environment" / "workspace" / "solution.py").is_file()
    back = import_harbor(tmp_path)
    assert all(t.requirements == () for t in back)  # pytest in the Dockerfile is the sandbox's own
    kinds = {t.metadata["harbor"]["config"]["metadata"]["sandgym_id"]: t.verifier.kind for t in back}
    assert kinds == {t.id: "tests" if t.verifier.kind == "tests" else "script" for t in tasks}  # sandgym grades them
    before = scores(tasks)
    after = {t.metadata["harbor"]["config"]["metadata"]["sandgym_id"]: s for t, s in zip(
        back, scores(back).values(), strict=True)}
    assert after == before
    assert all(oracle == 1.0 for oracle, _ in after.values())
    assert [noop for tid, (_, noop) in after.items() if "repo_fix" not in tid] == [0.0, 0.0, 0.0]


def test_host_verifiers_are_skipped_with_the_reason_and_clashes_refused(tmp_path: Path) -> None:
    host = Task(id="x/host", domain="x", family="x", split="train", prompt="p",
                verifier=Verifier(kind="host", host="pkg.v@v1"))
    written, skipped = export_harbor([host], tmp_path / "a")
    assert written == [] and "runs in sandgym's process" in skipped["x/host"]
    a = Task(id="x/a:b", domain="x", family="x", split="train", prompt="p", verifier=Verifier(kind="match", answer="1"))
    b = Task(id="x/a/b", domain="x", family="x", split="train", prompt="p", verifier=Verifier(kind="match", answer="1"))
    with pytest.raises(TaskError, match="both export to"):
        export_harbor([a, b], tmp_path / "b")


def test_cli_export_then_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "export", "--format", "harbor", "coding/strings:heldout", "--n", "2", "-o",
                 str(tmp_path / "h")]) == 0
    assert "wrote 2 Harbor task directories" in capsys.readouterr().out
    assert main(["tasks", "import", "--format", "harbor", str(tmp_path / "h"), "-o", str(tmp_path / "t.jsonl"),
                 "--verify"]) == 0
    assert "references: 2/2" in capsys.readouterr().out


def test_an_imported_harbor_task_graded_by_tests_exports_and_imports_back(tmp_path: Path) -> None:
    from tests.interop.harbor_fixture import make_harbor_task

    make_harbor_task(tmp_path / "in")
    (task,) = import_harbor(tmp_path / "in")
    assert task.verifier.kind == "tests" and task.reference is not None
    (out,), skipped = export_harbor([task], tmp_path / "out")
    hidden = (out / "tests" / "hidden" / "test_outputs.py").read_text()
    assert 'Path("/app/hello.txt")' in hidden and "/workspace" not in hidden  # Harbor's own paths again
    (back,) = import_harbor(tmp_path / "out")
    assert back.verifier.kind == "tests" and back.verifier.tests == task.verifier.tests
    assert back.verifier.expected_tests == 2 and back.metadata["harbor"]["verifier"]["why"].startswith("tests: a sandgym")
    assert scores([back]) == {back.id: (1.0, 0.0)}

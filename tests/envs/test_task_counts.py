"""A task file or folder is used whole by default in `sandgym run --tasks` and `sandgym eval
--suite`, explicit --episodes / --n-tasks still cut it, built-in suites keep their defaults, and stdout says how
many tasks of how many were used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sandgym.errors import ConfigError
from sandgym.evaluate.config import DEFAULT_N_TASKS, EvalConfig
from sandgym.evaluate.run import load_tasks
from sandgym.rollout.runner import DEFAULT_EPISODES, RunConfig, is_file_source, run

N = 18  # more than both defaults (8 episodes, 16 eval tasks)


@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sandgym.tasks.load import save_jsonl
    from sandgym.tasks.registry import load_suite

    path = tmp_path_factory.mktemp("tasks") / "needles.jsonl"
    save_jsonl(load_suite("long_context/needle:heldout", n=N, seed=3), path)
    return path


def sandgym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandgym", *args], capture_output=True, text=True, timeout=300)


def test_file_sources_are_told_apart_from_suites(task_file: Path) -> None:
    assert is_file_source(str(task_file)) and is_file_source(f"{task_file}@3")
    assert is_file_source(f"{task_file}:heldout") and is_file_source(str(task_file.parent))
    assert not is_file_source("coding:heldout") and not is_file_source("long_context/needle:train@4")


def test_eval_uses_a_file_whole_by_default(task_file: Path) -> None:
    lines: list[str] = []
    tasks = load_tasks(EvalConfig(policy="noop", suites=(str(task_file),)), report=lines.append)
    assert len(tasks) == N and lines == [f"tasks: {N} of {N} from {task_file}"]


def test_eval_n_tasks_still_cuts_a_file_and_suites_keep_their_default(task_file: Path) -> None:
    lines: list[str] = []
    cfg = EvalConfig(policy="noop", suites=(str(task_file), "long_context/needle:heldout"), n_tasks=5)
    assert len(load_tasks(cfg, report=lines.append)) == 10
    assert lines[0] == f"tasks: 5 of {N} from {task_file}"
    assert lines[1].startswith("tasks: 5 from long_context/needle:heldout (generated")
    generated = load_tasks(EvalConfig(policy="noop", suites=("long_context/needle:heldout",)))
    assert len(generated) == DEFAULT_N_TASKS == 16
    assert len(load_tasks(EvalConfig(policy="noop", suites=(f"{task_file}@4",)))) == 4  # the spec's own cap
    with pytest.raises(ConfigError, match="n-tasks"):
        EvalConfig(policy="noop", suites=("coding:heldout",), n_tasks=0)


def test_run_uses_a_file_whole_by_default(task_file: Path) -> None:
    summary = run(RunConfig(env="sandgym/LongContext-v0", tasks=str(task_file), agent="noop", workers=2,
                            progress=False))
    assert len(summary.results) == N and len({r["task_id"] for r in summary.results}) == N
    assert summary.tasks_line == f"tasks: {N} of {N} from {task_file}"


def test_run_episodes_and_n_tasks_still_work(task_file: Path) -> None:
    few = run(RunConfig(env="sandgym/LongContext-v0", tasks=str(task_file), agent="noop", episodes=3, workers=1,
                        progress=False))
    assert len(few.results) == 3 and few.tasks_line == f"tasks: 3 of {N} from {task_file}"
    cut = run(RunConfig(env="sandgym/LongContext-v0", tasks=str(task_file), agent="noop", n_tasks=2, workers=1,
                        progress=False))  # 2 tasks loaded, one episode each
    assert len(cut.results) == 2 and cut.tasks_line == f"tasks: 2 of {N} from {task_file}"
    suite = run(RunConfig(env="sandgym/LongContext-v0", tasks="long_context/needle:train", agent="noop", workers=2,
                          progress=False))  # a generated suite keeps the default of 8 episodes
    assert len(suite.results) == DEFAULT_EPISODES == 8
    assert suite.tasks_line.startswith("tasks: 8 from long_context/needle:train (generated")
    with pytest.raises(ConfigError, match="n_tasks"):
        RunConfig(n_tasks=0)


def test_run_cli_prints_the_task_count(task_file: Path, tmp_path: Path) -> None:
    proc = sandgym("run", "--env", "sandgym/LongContext-v0", "--tasks", str(task_file), "--agent", "noop",
                   "--out", str(tmp_path / "r.jsonl"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert f"tasks: {N} of {N} from {task_file}" in proc.stdout
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == N


def test_eval_cli_scores_a_whole_file_and_says_so(task_file: Path, tmp_path: Path) -> None:
    import json

    out = tmp_path / "eval"
    proc = sandgym("eval", "--policy", "noop", "--suite", str(task_file), "--samples", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"tasks: {N} of {N} from {task_file}" in proc.stdout
    assert len((out / "episodes.jsonl").read_text().splitlines()) == N
    assert json.loads((out / "config.json").read_text())["n_tasks"] is None

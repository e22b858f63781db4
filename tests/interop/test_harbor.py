"""Harbor task directories -> sandgym tasks: parsing offline, then oracle 1.0 / noop 0 in the real sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sandgym.interop  # noqa: F401  (registers the harbor import format)
from sandgym.errors import TaskError
from sandgym.interop.harbor import import_harbor, parse_harbor_dir
from sandgym.tasks.importers import import_file
from tests.interop.harbor_fixture import make_harbor_task


def test_parse_maps_workdir_files_requirements_and_reports_what_is_dropped(tmp_path: Path):
    root = make_harbor_task(tmp_path, dockerfile=(
        "FROM python:3.12-slim\nWORKDIR /app\nENV FOO=1\n"
        "RUN apt-get update && \\\n    apt-get install -y tmux\n"
        "RUN pip install --no-cache-dir attrs==23.2.0 'six>=1.16' -r requirements.txt\n"
        "COPY src/ /app/\nCOPY requirements.txt /opt/requirements.txt\n"))
    (root / "environment" / "requirements.txt").write_text("tomli>=2  # comment\n")
    info = parse_harbor_dir(root)
    assert info is not None
    assert info.workdir == "/app"
    assert info.files == {"greet.py": "def greet():\n    return ''\n"}
    assert info.requirements == ["attrs==23.2.0", "six>=1.16", "tomli>=2"]
    dropped = "\n".join(info.dropped)
    assert "FROM python:3.12-slim" in dropped and "apt-get install -y tmux" in dropped and "ENV FOO=1" in dropped
    assert "/opt/requirements.txt: outside WORKDIR" in dropped
    tasks = import_harbor(tmp_path, run_solution=False)
    (task,) = tasks
    assert task.id == "harbor/hello-world" and task.verifier.kind == "tests" and task.reference is None
    assert task.verifier.expected_tests == 2 and task.verifier.isolation == "process"
    hidden = task.verifier.tests["test_outputs.py"]  # WORKDIR is the workspace, /tests the grader's folder
    assert 'Path("/workspace/hello.txt")' in hidden and 'sys.path.insert(0, "/workspace")' in hidden
    assert task.metadata["harbor"]["verifier"]["why"].startswith("tests: test.sh only runs pytest")
    assert "/workspace/hello.txt" in task.prompt and "/app/hello.txt" not in task.prompt.split("\n\n")[0]
    assert task.requirements == ("attrs==23.2.0", "six>=1.16", "tomli>=2")
    assert task.limits.episode_timeout_s == 240.0 and task.limits.exec_timeout_s == 90.0
    assert task.metadata["harbor"]["solution"].startswith("#!/bin/bash")


def test_bad_directories_are_reported(tmp_path: Path):
    with pytest.raises(TaskError, match="no Harbor task here"):
        import_harbor(tmp_path)
    root = make_harbor_task(tmp_path)
    (root / "tests" / "test.sh").unlink()
    with pytest.raises(TaskError, match="test.sh is missing"):
        import_harbor(tmp_path, run_solution=False)


@pytest.mark.parametrize("json_reward", [False, True])
def test_oracle_scores_one_and_noop_zero_in_the_sandbox(tmp_path: Path, json_reward: bool):
    import gymnasium as gym

    import sandgym  # noqa: F401
    from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
    from sandgym.sandbox import make_sandbox
    from sandgym.tasks.importers import verify_references

    make_harbor_task(tmp_path, json_reward=json_reward)
    (task,) = import_file("harbor", tmp_path)
    assert task.reference is not None
    assert task.reference.files == {"hello.txt": "Hello, world!\n",
                                    "greet.py": "def greet():\n    return 'Hello, world!'\n"}
    (check,) = verify_references([task], lambda **kw: make_sandbox("local", **kw))
    assert check.ok, check.message
    env = gym.make("sandgym/Coding-v0", tasks=[task])
    try:
        good = run_episode(env.unwrapped, OracleAgent(), task)
        bad = run_episode(env.unwrapped, NoopAgent(), task)
    finally:
        env.close()
    assert good.reward_components["correctness@v1"] == 1.0, good
    assert bad.reward_components["correctness@v1"] == 0.0


def test_cli_import_writes_jsonl(tmp_path: Path, capsys):
    from sandgym.cli import main
    from sandgym.tasks.load import load_jsonl

    make_harbor_task(tmp_path / "tasks")
    out = tmp_path / "out.jsonl"
    assert main(["tasks", "import", "--format", "harbor", str(tmp_path / "tasks"), "-o", str(out), "--verify"]) == 0
    (task,) = load_jsonl(out)
    assert task.family == "harbor" and task.reference is not None
    assert json.loads(out.read_text().splitlines()[0])["verifier"]["kind"] == "tests"
    assert "references: 1/1" in capsys.readouterr().out


def test_workspace_attacks_on_a_pytest_only_harbor_task_earn_no_more_than_noop(tmp_path: Path):
    """A fake pytest package, stdlib-named modules and os._exit(0) at import scored 1.0 when test.sh ran pytest
    in the workspace; sandgym's grader runs the same tests out of the agent's reach."""
    from sandgym.rollout.audit import audit

    make_harbor_task(tmp_path)
    tasks = import_harbor(tmp_path, run_solution=False)
    assert tasks[0].verifier.kind == "tests"
    result = audit(tasks, attacks=["fake_pytest", "shadow_stdlib", "exit_at_import_os"], per_family=1, reuse=False)
    assert result.clean, result.to_markdown()
    cells = {c.attack: c for c in result.cells}
    assert set(cells) >= {"fake_pytest", "shadow_stdlib", "exit_at_import_os"}, cells
    assert all(c.mean_reward <= c.noop_reward == 0.0 for c in cells.values()), cells

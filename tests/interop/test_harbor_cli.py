"""A Harbor task whose tests run the solution as a command line (``subprocess.run([sys.executable, ...])``).

Written in Harbor's documented layout (task.toml, instruction.md, environment/Dockerfile, tests/test.sh running
pytest on tests/test_outputs.py, solution/solve.sh). Terminal-Bench tasks test this way; the check script's
``python3`` must be a real interpreter with the sandbox's PATH for them to score.
"""

from __future__ import annotations

import json
from pathlib import Path

import sandgym.interop  # noqa: F401  (registers the harbor import format)
from sandgym.tasks.importers import import_file

TEST_SH = """#!/bin/bash
cd /app
python3 -m pytest -q -rA /tests/test_outputs.py > /logs/verifier/pytest.txt 2>&1
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""

TEST_OUTPUTS = """import subprocess
import sys


def test_cli_counts_words():
    r = subprocess.run([sys.executable, "/app/wordcount.py", "/app/input.txt"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "5"


def test_runs_as_a_module():
    r = subprocess.run([sys.executable, "-m", "wordcount", "/app/input.txt"], capture_output=True, text=True,
                       cwd="/app")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "5"
"""

TEST_SH_BY_NAME = """#!/bin/bash
cd /app
python -c 'import sys; assert sys.executable' || exit 1
pytest -q -rA /tests/test_outputs.py > /logs/verifier/pytest.txt 2>&1
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""
"""test.sh as Harbor's own template writes it: ``pytest`` and ``python`` called by name (its image has both)."""

SOLVE_SH = """#!/bin/bash
cat > /app/wordcount.py <<'PY'
import sys

print(len(open(sys.argv[1]).read().split()))
PY
"""


def make_cli_task(parent: Path, name: str = "word-count", *, test_sh: str = TEST_SH) -> Path:
    root = parent / name
    for sub in ("environment", "tests", "solution"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text('version = "1.0"\n\n[metadata]\ndifficulty = "easy"\n\n[verifier]\n'
                                    'timeout_sec = 60.0\n\n[agent]\ntimeout_sec = 240.0\n')
    (root / "instruction.md").write_text("Write /app/wordcount.py so that `python /app/wordcount.py FILE` prints "
                                         "the number of whitespace-separated words in FILE.\n")
    (root / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /app\nCOPY input.txt "
                                                     "/app/input.txt\n")
    (root / "environment" / "input.txt").write_text("one two three\nfour five\n")
    (root / "tests" / "test.sh").write_text(test_sh)
    (root / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    (root / "solution" / "solve.sh").write_text(SOLVE_SH)
    return root


def test_import_verify_passes_for_a_task_that_runs_its_solution_with_sys_executable(tmp_path: Path, capsys):
    from sandgym.cli import main
    from sandgym.tasks.load import load_jsonl

    make_cli_task(tmp_path / "tasks")
    out = tmp_path / "out.jsonl"
    assert main(["tasks", "import", "--format", "harbor", str(tmp_path / "tasks"), "-o", str(out), "--verify"]) == 0
    assert "references: 1/1 pass their own tests" in capsys.readouterr().out
    (task,) = load_jsonl(out)
    assert task.reference is not None and "wordcount.py" in task.reference.files
    assert json.loads(out.read_text().splitlines()[0])["verifier"]["kind"] == "tests"  # graded by sandgym


def test_oracle_solves_it_and_noop_does_not_with_pytest_and_python_called_by_name(tmp_path: Path):
    import gymnasium as gym

    import sandgym  # noqa: F401
    from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode

    make_cli_task(tmp_path, test_sh=TEST_SH_BY_NAME)
    (task,) = import_file("harbor", tmp_path)
    assert task.reference is not None, task.metadata["harbor"]["dropped"]
    env = gym.make("sandgym/Coding-v0", tasks=[task])
    try:
        good = run_episode(env.unwrapped, OracleAgent(), task)
        bad = run_episode(env.unwrapped, NoopAgent(), task)
    finally:
        env.close()
    assert good.reward_components["correctness@v1"] == 1.0, good
    assert bad.reward_components["correctness@v1"] == 0.0, bad

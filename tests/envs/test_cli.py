"""Tiny-budget smoke tests of `sandgym envs` and `sandgym run` (subprocesses, real sandbox)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sandgym.errors import ConfigError
from sandgym.rollout.runner import RunConfig, run


def sandgym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandgym", *args], capture_output=True, text=True, timeout=300)


def test_envs_lists_ids_with_descriptions() -> None:
    proc = sandgym("envs")
    assert proc.returncode == 0, proc.stderr
    for env_id in ("sandgym/Coding-v0", "sandgym/RepoFix-v0", "sandgym/LongContext-v0"):
        line = next(x for x in proc.stdout.splitlines() if x.startswith(env_id))
        assert len(line.split(None, 1)[1]) > 10


def test_run_writes_jsonl_and_prints_summary(tmp_path, local_ok) -> None:
    out = tmp_path / "results.jsonl"
    proc = sandgym("run", "--env", "sandgym/Coding-v0", "--tasks", "coding/strings:train", "--agent", "oracle",
                   "--episodes", "2", "--workers", "2", "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and all(r["success"] and r["reward"] == 1.0 for r in rows)
    assert "coding/strings" in proc.stdout and "100%" in proc.stdout and str(out) in proc.stdout.replace("\n", "")


def test_run_api_noop_on_long_context(local_ok) -> None:
    summary = run(RunConfig(env="sandgym/LongContext-v0", tasks="long_context/needle:train", agent="noop",
                            episodes=2, workers=1, progress=False))
    assert summary.success_rate == 0.0 and summary.per_family["long_context/needle"].episodes == 2


def test_run_config_errors() -> None:
    with pytest.raises(ConfigError, match="agent"):
        RunConfig(agent="genius")
    proc = sandgym("run", "--env", "sandgym/Nope-v0", "--episodes", "1", "--no-progress", "--out", "")
    assert proc.returncode == 2 and "sandgym envs" in proc.stderr

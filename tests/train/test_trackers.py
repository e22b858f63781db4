"""trackio and Weights & Biases (offline) receive the step metrics MetricsLogger writes; chosen in [logging]."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sandgym.configs import from_dict
from sandgym.errors import ConfigError
from sandgym.train.config import LoggingConfig, TrainConfig

pytest.importorskip("trackio")
pytest.importorskip("wandb")

SCRIPT = """
import sys
from pathlib import Path
from sandgym.train.logger import MetricsLogger

logger = MetricsLogger(Path(sys.argv[1]), tensorboard=False, trackers=("trackio", "wandb"), project="sgtest",
                       config={"optim": {"lr": 1e-5}})
for step in range(3):
    logger.log({"step": step, "rollout/reward_mean": 0.25 * step, "note": "text is not a scalar"})
logger.close()
"""


def test_trackio_and_wandb_offline_get_every_step(tmp_path: Path) -> None:
    run_dir = tmp_path / "run-7"
    run_dir.mkdir()
    env = dict(os.environ, TRACKIO_DIR=str(tmp_path / "trackio"), WANDB_MODE="offline", WANDB_SILENT="true",
               WANDB_DIR=str(tmp_path), HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir)], capture_output=True, text=True, env=env,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]
    with sqlite3.connect(tmp_path / "trackio" / "sgtest.db") as db:
        rows = db.execute("select run_name, step, metrics from metrics order by step").fetchall()
    assert [(name, step, json.loads(m)) for name, step, m in rows] == [
        ("run-7", s, {"rollout/reward_mean": 0.25 * s}) for s in range(3)]
    offline = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(offline) == 1 and b"rollout/reward_mean" in offline[0].read_bytes()


def test_trackers_are_chosen_in_the_config() -> None:
    config = from_dict(TrainConfig, {"logging": {"trackers": ["trackio", "wandb"], "project": "mine"}})
    assert config.logging.trackers == ("trackio", "wandb") and config.logging.project == "mine"
    with pytest.raises(ConfigError, match="choose from"):
        LoggingConfig(trackers=("tensorbaord",))

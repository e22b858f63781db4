"""Run logging: metrics JSONL (one line per step), TensorBoard events, optional trackers (trackio, W&B), and
sampled trajectories."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sandgym.agents.trajectory import Trajectory
from sandgym.train.trackers import Tracker, make_trackers

log = logging.getLogger(__name__)


class MetricsLogger:
    """Appends metrics to ``metrics.jsonl``; on resume drops lines of steps after the checkpoint, so every step
    appears exactly once in the final file."""

    def __init__(self, run_dir: Path, *, tensorboard: bool = True, keep_up_to_step: int | None = None,
                 trackers: tuple[str, ...] = (), project: str = "sandgym",
                 config: Mapping[str, Any] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.traj_path = self.run_dir / "trajectories.jsonl"
        if keep_up_to_step is not None:
            for path in (self.metrics_path, self.traj_path):
                _truncate_after(path, keep_up_to_step)
        self._tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.run_dir / "tb"))
            except ImportError:  # tensorboard is optional
                self._tb = None
        self._trackers: list[Tracker] = make_trackers(trackers, self.run_dir, project, config or {})

    def log(self, metrics: Mapping[str, float]) -> None:
        with self.metrics_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(dict(metrics)) + "\n")
        if self._tb is not None:
            step = int(metrics["step"])
            for k, v in metrics.items():
                if k != "step" and isinstance(v, (int, float)):
                    self._tb.add_scalar(k, v, step)
        if self._trackers:
            scalars = {k: v for k, v in metrics.items() if k != "step" and isinstance(v, (int, float))}
            for tracker in self._trackers:
                tracker.log(scalars, int(metrics["step"]))

    def sample_trajectories(self, step: int, trajs: Sequence[Trajectory]) -> None:
        with self.traj_path.open("a", encoding="utf-8") as f:
            for t in trajs:
                f.write(json.dumps({"step": step, **t.to_json()}) + "\n")

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        for tracker in self._trackers:
            tracker.close()


def _parse(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a run's JSONL log; a torn line (a run killed mid-write) is skipped with a warning."""
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_bytes().decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        record = _parse(line)
        if record is None:
            log.warning("%s:%d: skipped a torn or invalid line (%.60r)", path, number, line)
            continue
        out.append(record)
    return out


def _truncate_after(path: Path, step: int) -> None:
    """Keep only lines of steps <= ``step``; a torn line (killed mid-write) or one without a step is dropped."""
    if not path.exists():
        return
    kept = []
    dropped = 0
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        record = _parse(line)
        if record is None or not isinstance(record.get("step"), (int, float)):
            dropped += 1
            continue
        if record["step"] <= step:
            kept.append(line)
    if dropped:
        log.warning("%s: dropped %d torn or invalid line(s) on resume", path, dropped)
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

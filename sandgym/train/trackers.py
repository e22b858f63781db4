"""Optional experiment trackers beside TensorBoard: trackio (local-first) and Weights & Biases (offline works).

Chosen by ``[logging] trackers = ["trackio", "wandb"]`` in the training config. Each gets every step's scalar
metrics (the same keys as ``metrics.jsonl``) at that step, and the resolved config once.

- ``trackio``: a local SQLite store (``$TRACKIO_DIR``, default ``~/.cache/huggingface/trackio``), project
  ``[logging] project``, run named after the run directory; ``trackio show --project NAME`` opens the dashboard.
- ``wandb``: files under ``RUN_DIR/wandb``; with ``WANDB_MODE=offline`` nothing touches the network
  (``wandb sync RUN_DIR/wandb/offline-run-*`` uploads later).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from sandgym.errors import ConfigError

__all__ = ["TRACKERS", "Tracker", "make_trackers"]

TRACKERS = ("trackio", "wandb")


class Tracker(Protocol):
    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class TrackioTracker:
    def __init__(self, run_dir: Path, project: str, config: Mapping[str, Any]) -> None:
        import trackio

        self._trackio = trackio
        self._run = trackio.init(project=project, name=run_dir.name, config=dict(config), resume="allow",
                                 auto_log_gpu=False, auto_log_cpu=False)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def close(self) -> None:
        self._run.finish()


class WandbTracker:
    def __init__(self, run_dir: Path, project: str, config: Mapping[str, Any]) -> None:
        import wandb

        self._run = wandb.init(project=project, name=run_dir.name, dir=str(run_dir), config=dict(config),
                               reinit="create_new")

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def close(self) -> None:
        self._run.finish()


def make_trackers(names: tuple[str, ...], run_dir: Path, project: str,
                  config: Mapping[str, Any]) -> list[Tracker]:
    """One tracker per name (``trackio``, ``wandb``); ConfigError for an unknown name or a package not installed."""
    makers: dict[str, type[TrackioTracker] | type[WandbTracker]] = {"trackio": TrackioTracker,
                                                                      "wandb": WandbTracker}
    out: list[Tracker] = []
    for name in names:
        if name not in makers:
            raise ConfigError(f"logging.trackers: unknown tracker {name!r}; choose from {TRACKERS}")
        try:
            out.append(makers[name](Path(run_dir), project, config))
        except ImportError as exc:
            raise ConfigError(f"logging.trackers names {name!r} but it is not installed ({exc}); "
                              f"pip install {name}") from exc
    return out

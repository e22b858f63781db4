"""Re-calibrate a training run's judge every N steps against a labelled set; log agreement and ECE drift.

When the training config rolls out in ``sandgym/Judged-v0`` (``sandgym.private.hybrid``) with
``judge.calibrate_every > 0``, :func:`maybe_recalibrate` (part of :func:`sandgym.experiments.periodic_eval.
train_with_eval`'s hook) runs ``sandgym judge calibrate``'s computation on ``judge.labelled`` at step 0 and every
``calibrate_every`` steps, and appends one line to ``RUN_DIR/judge_calibration.jsonl``::

    {"step": 10, "agreement": 0.9, "ece": 0.08, "kappa": 0.8, "n": 20, "judge_version": "judge@...",
     "agreement_drift": 0.05, "ece_drift": 0.02, "drifted": false}

Drift is measured from the run's first calibration: ``agreement_drift`` = first agreement - now, ``ece_drift`` =
now - first ECE. Past ``judge.max_drift`` either way, the row says ``"drifted": true`` and a warning is issued.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any

from sandgym.private.calibrate import calibrate, load_labelled
from sandgym.private.hybrid import ENV_ID, JudgeSpec, load_judge
from sandgym.train.config import TrainConfig

__all__ = ["CALIBRATION", "JudgeDriftWarning", "judge_spec", "maybe_recalibrate"]

CALIBRATION = "judge_calibration.jsonl"
log = logging.getLogger(__name__)


class JudgeDriftWarning(UserWarning):
    """The judge's agreement with the labels fell, or its ECE rose, past ``judge.max_drift``."""


def judge_spec(config: TrainConfig) -> JudgeSpec | None:
    """The run's judge when it rolls out in ``sandgym/Judged-v0``, else None."""
    env = config.rollout.env
    if env.rpartition(":")[2] != ENV_ID:
        return None
    return JudgeSpec.from_dict(config.rollout.env_kwargs.get("judge") or {})


def maybe_recalibrate(config: TrainConfig, step: int, run_dir: str | Path) -> dict[str, Any] | None:
    """Calibrate the judge at step 0 and every ``judge.calibrate_every`` steps; append the row (with drift from
    the first row of the run) to ``RUN_DIR/judge_calibration.jsonl`` and warn past ``judge.max_drift``."""
    spec = judge_spec(config)
    if spec is None or spec.calibrate_every <= 0 or step % spec.calibrate_every:
        return None
    stats = calibrate(load_judge(spec), load_labelled(spec.labelled), threshold=spec.threshold)
    path = Path(run_dir) / CALIBRATION
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
    rows = [r for r in rows if r["step"] < step]  # a resumed run recomputes this step
    first = rows[0] if rows else {"agreement": stats.agreement, "ece": stats.ece}
    row: dict[str, Any] = {
        "step": step, "agreement": stats.agreement, "ece": stats.ece, "kappa": stats.kappa, "n": stats.n,
        "unparsed": stats.unparsed, "judge_version": stats.judge_version,
        "agreement_drift": round(first["agreement"] - stats.agreement, 6),
        "ece_drift": round(stats.ece - first["ece"], 6),
    }
    row["drifted"] = row["agreement_drift"] > spec.max_drift or row["ece_drift"] > spec.max_drift
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, row]), encoding="utf-8")
    if row["drifted"]:
        message = (f"judge {stats.judge_version} drifted at step {step}: agreement {stats.agreement:.3f} "
                   f"({-row['agreement_drift']:+.3f}), ECE {stats.ece:.3f} ({row['ece_drift']:+.3f}) against "
                   f"{spec.labelled}; max_drift={spec.max_drift}. Re-label, fix the judge, or lower its weight")
        log.warning(message)
        warnings.warn(message, JudgeDriftWarning, stacklevel=2)
    return row

"""Scripted judges named from configs in tests (``python:tests.private.judges_for_tests:...``)."""

from __future__ import annotations

from sandgym.private.judge import FunctionPolicy

STATE = {"broken": False}
"""Flip ``broken`` to make ``keyword_judge`` pass everything (constant 9/10): its calibration drifts."""


def _grade(text: str) -> str:
    if STATE["broken"]:
        return "SCORE: 9"
    answer = text.split("## Answer", 1)[-1]
    return "Looks complete.\nSCORE: 10" if "submit" in answer.lower() else "Incomplete.\nSCORE: 0"


def keyword_judge() -> FunctionPolicy:
    """Passes an answer that mentions submit; fails anything else."""
    return FunctionPolicy(_grade, name="keyword-judge")

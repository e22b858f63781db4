"""Runtime signals in evaluation: what a task's service stack measured (``EpisodeOutcome.grade.signals``: alerts,
error and warning log records, p50/p95 latency, peak RSS and its growth, CPU time, restarts; the queue checks of
``service_queue`` and ``service_notify``), per family beside completion, for ``metrics.json["signals"]`` and the
report's "Runtime signals" section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.report_writer import Section, Table, Text

__all__ = ["COLUMNS", "runtime_signals", "signals_section"]

COLUMNS: tuple[tuple[str, str], ...] = (
    ("alerts@v1", "alerts quiet"), ("latency@v1", "latency@v1"), ("memory@v1", "memory@v1"),
    ("alerts_fired", "alerts fired"), ("error_logs", "ERROR records"), ("warning_logs", "WARNING records"),
    ("p50_ms", "p50 ms"), ("p95_ms", "p95 ms"), ("peak_rss_mb", "peak RSS MiB"), ("rss_growth_mb", "RSS growth MiB"),
    ("cpu_s", "CPU s"), ("restarts", "restarts"), ("lost", "no loss"), ("duplicated", "no duplicate"),
)
"""What the report shows, in order: the stack's rewards (from the reward components), then measured signals."""
_REWARDS = ("alerts@v1", "latency@v1", "memory@v1")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _summary(rows: Sequence[EpisodeRow]) -> dict[str, Any]:
    values: dict[str, list[float]] = {}
    for r in rows:
        for key, v in r.signals.items():
            values.setdefault(key, []).append(float(v))
        if "alert_rules" in r.signals:  # the stack's rewards mean something only where a stack ran
            for key in _REWARDS:
                if key in r.reward_components:
                    values.setdefault(key, []).append(float(r.reward_components[key]))
    return {"episodes": len(rows), "completion": _mean([float(r.success) for r in rows]),
            "means": {k: _mean(v) for k, v in sorted(values.items())}}


def runtime_signals(rows: Sequence[EpisodeRow]) -> dict[str, Any] | None:
    """Mean of every runtime signal over the scored episodes that have signals, overall and per family (with those
    episodes' completion); None when no episode has any."""
    scored = [r for r in rows if r.signals and not r.infra_failure]
    if not scored:
        return None
    families = sorted({r.family for r in scored})
    return {"overall": _summary(scored),
            "by_family": {f: _summary([r for r in scored if r.family == f]) for f in families}}


def signals_section(m: Mapping[str, Any]) -> Section:
    """The report's "Runtime signals" section (a table per family) from ``metrics.json["signals"]``."""
    s = m.get("signals")
    if not s:
        return Section("Runtime signals", (Text("No task in these suites measures runtime signals."),))
    fams = s["by_family"]
    cols = [(k, label) for k, label in COLUMNS if any(k in f["means"] for f in fams.values())]
    rows = tuple((name, str(f["episodes"]), f"{f['completion']:.3f}",
                  *(_fmt(f["means"].get(k)) for k, _ in cols)) for name, f in fams.items())
    note = Text("Means over each family's scored episodes. Alerts and latency/memory rewards come from a task's "
                "service stack (docs/ENVIRONMENTS.md, \"A service stack\"); `no loss` and `no duplicate` are the "
                "shares of queue checks passed.")
    return Section("Runtime signals", (Table(("family", "episodes", "completion", *(label for _, label in cols)), rows),
                                       note))


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"

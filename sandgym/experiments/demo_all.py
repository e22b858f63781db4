"""``sandgym demo --track all``: one report over every track's demo run, each track's base / SFT / SFT+RL rows,
RL's paired gain over SFT, and the behaviour metrics that say what was learned.

It reads what each track's run wrote (``OUT/<track>/eval/summary.json``), so it also summarises tracks run one at a
time into the same ``OUT`` (``--track X --out OUT/X``); a track not run yet is listed as missing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.report_writer import Bullets, Report, Section, Table, Text

POLICIES = (("base", "base model"), ("sft", "SFT only"), ("sft_rl", "SFT + RL"))
COLUMNS = (("first_attempt_pass", "first attempt pass"), ("recovery", "recovery"),
           ("verify_before_submit", "verify before submit"), ("valid_call_rate", "valid call rate"),
           ("submitted", "submitted"), ("turns", "turns"))
"""Behaviour columns (``metrics.json`` key ``behaviour``); n/a where a track's episodes do not have one."""


TEST_BEHAVIOURS = ("first_attempt_pass", "recovery", "verify_before_submit", "submitted_failing")
"""The behaviours about visible-test runs: left out (n/a) for a track whose agent cannot run tests (long_context)."""


def can_run_tests(code_action: str | None, tools: Sequence[str]) -> bool:
    """Whether the agent can run the visible tests: a code action that runs them, or the run_tests tool (an empty
    tool list offers every built-in tool)."""
    return code_action == "test" or not tools or "run_tests" in tools


def _gain(g: dict[str, Any] | None) -> str:
    return "n/a" if not g else f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}"


def track_rows(track: str, metrics: dict[str, Any]) -> list[tuple[str, ...]]:
    """Base, SFT, SFT+RL and the paired RL-over-SFT row of one track's demo metrics."""
    rollout = (metrics["sft"].get("config") or {}).get("rollout") or {}
    tests = can_run_tests(rollout.get("code_action"), rollout.get("tools") or ())
    keys = [key for key, _ in COLUMNS if tests or key not in TEST_BEHAVIOURS]  # the others: n/a
    rows = []
    for name, label in POLICIES:
        m = metrics[name]
        behaviour = m.get("behaviour") or {}
        rows.append((track, label, format_interval(m["transfer"]["trained"].get("completion")),
                     format_interval(m["transfer"]["unseen"].get("completion")),
                     *(format_interval(behaviour[key]) if key in keys and behaviour.get(key) else "n/a"
                       for key, _ in COLUMNS)))
    rl = metrics["rl_vs_sft"]
    gains = rl.get("behaviour_gain") or {}
    rows.append((track, "RL over SFT (paired)", _gain(rl.get("gain_trained")), _gain(rl.get("gain_unseen")),
                 *(format_interval(gains[key]["diff"], signed=True) if key in keys and key in gains else "n/a"
                   for key, _ in COLUMNS)))
    return rows


def tracks_report(out: Path, tracks: Sequence[str]) -> tuple[Report, str]:
    """The report over ``OUT/<track>`` for each track, and its table as markdown (printed at the end of a run)."""
    rows: list[tuple[str, ...]] = []
    missing = []
    for track in tracks:
        summary = out / track / "eval" / "summary.json"
        if not summary.is_file():
            missing.append(track)
            continue
        rows += track_rows(track, json.loads(summary.read_text(encoding="utf-8"))["metrics"])
    table = Table(("track", "policy", "held-out, trained families", "unseen families",
                   *(label for _, label in COLUMNS)), tuple(rows))
    notes = ("Each track's own run: its held-out tasks, the same tasks and samples for every policy, 95% bootstrap "
             "intervals over tasks; the RL over SFT rows are paired differences (with the paired test's p on "
             "completion). first attempt pass / recovery / verify before submit: tracks whose agent runs the "
             "visible tests; valid call rate: turns with a parseable action. Per-track reports: "
             "<track>/REPORT.md.")
    sections = [Section("Every track", (table, Text(notes))),
                Section("Per-track reports", (Bullets(tuple(f"{t}: [{t}/REPORT.html]({t}/REPORT.html)"
                                                            for t in tracks if t not in missing)),))]
    if missing:
        sections.append(Section("Not run", (Text("No finished run under " + ", ".join(
            f"{out / t}" for t in missing) + "; run `sandgym demo --track TRACK --out OUT/TRACK`."),)))
    return Report("sandgym demo: every track", tuple(sections), html_name="REPORT.html"), table.markdown()

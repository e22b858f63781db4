"""Decide a finished episode from its task's verifier: hidden tests, answer matching, or a check script.

Grading runs only after the agent's last turn. Hidden tests and traps go to ``Sandbox.run_tests`` (which keeps
them out of the agent's reach); they are never written into the workspace. Traps run as their own pytest session,
so a crash or ``os._exit`` in a trap cannot take main-test results with it. Runtime signals (``task.metadata
["signals"]``: signal -> hidden test names) are read from the main run's structured report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sandgym.envs.context import ToolContext
from sandgym.envs.outcome import Grade
from sandgym.sandbox.protocol import TestReport
from sandgym.tasks.matchers import match
from sandgym.tasks.task import Task
from sandgym.tasks.verifier_errors import SCRIPT_PRELUDE, verifier_failure

__all__ = ["grade", "isolation_kwargs", "signal_scores"]


def _count(report: TestReport) -> tuple[int, int]:
    """(passed, test errors + a crashed run without a report)."""
    errors = sum(1 for o in report.outcomes if o.outcome == "error")
    if not report.report_found and report.exec is not None and not report.exec.timed_out and not report.exec.oom:
        errors += 1
    return report.passed, errors


def signal_scores(report: TestReport, signals: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Share of each signal's tests that the structured report lists as passed (a missing test counts as failed).

    ``signals`` maps a signal name (e.g. ``latency``) to hidden test function names; the report names tests
    ``file.py::test_name``. No report at all gives 0.0 for every signal.
    """
    passed = {o.name.rsplit("::", 1)[-1] for o in report.outcomes if o.outcome == "passed"}
    out = {}
    for name, tests in signals.items():
        tests = list(tests)
        out[str(name)] = sum(t in passed for t in tests) / len(tests) if tests else 0.0
    return out


def _collection_failure(task: Task, report: TestReport) -> str:
    if task.verifier.isolation != "process":  # the agent's code shares the grader's process: never sure
        return ""
    for o in report.outcomes:
        if o.outcome == "error" and "::" not in o.name:
            why = verifier_failure(task, o.message)
            if why:
                return f"{why}; {o.name}: {o.message[-1500:]}"
    return ""


def isolation_kwargs(task: Task) -> dict[str, Any]:
    """``run_tests`` keywords for the task's isolation (none for the default, so older backends still work)."""
    iso = task.verifier.isolation
    return {} if iso == "process" else {"isolation": iso}


def _record(ctx: ToolContext, report: TestReport) -> float:
    if report.exec is None:
        return 0.0
    ctx.stats.record(report.exec)
    return report.exec.wall_s


def grade(ctx: ToolContext) -> Grade:
    """Run the task's verifier against the episode's final state. Raises ``SandboxError`` on infra failure."""
    v = ctx.task.verifier
    answer = ctx.submitted if ctx.submitted is not None else ""
    ctx.end_agent()
    if v.kind == "tests":
        kw = isolation_kwargs(ctx.task)
        report = ctx.sandbox.run_tests(v.tests, expected=v.expected_tests, **kw)
        wall = _record(ctx, report)
        passed, errors = _count(report)
        traps_passed = 0
        if v.traps:
            traps = ctx.sandbox.run_tests(v.traps, expected=v.expected_traps, **kw)
            wall += _record(ctx, traps)
            traps_passed = traps.passed
        signals = ctx.task.metadata.get("signals") or {}
        return Grade(kind="tests", tests_passed=passed, tests_expected=v.expected_tests, traps_passed=traps_passed,
                     traps_expected=v.expected_traps if v.traps else 0, grader_exceptions=errors, wall_s=wall,
                     signals=signal_scores(report, signals) if isinstance(signals, Mapping) else {},
                     task_error=_collection_failure(ctx.task, report))
    if v.kind == "match":
        return Grade(kind="match", answer_matched=match(answer, v.answer or "", v.matcher))
    # script: the answer goes to answer.txt, the script prints {"score": x} on its last JSON line
    ctx.sandbox.write_file("answer.txt", answer)
    result = ctx.sandbox.run_python(SCRIPT_PRELUDE + (v.script or ""))
    ctx.stats.record(result)
    score = 0.0
    for line in reversed(result.stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("score"), (int, float)):
            score = min(1.0, max(0.0, float(data["score"])))
            break
    why = "" if result.ok else verifier_failure(ctx.task, result.stderr[-3000:], script=True)
    task_error = f"{why}; the check script's stderr: {result.stderr[-1500:]}" if why else ""
    return Grade(kind="script", script_score=score, grader_exceptions=int(not result.ok), wall_s=result.wall_s,
                 task_error=task_error)

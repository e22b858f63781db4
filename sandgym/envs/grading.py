"""Decide a finished episode from its task's verifier: hidden tests, answer matching, or a check script.

Grading runs only after the agent's last turn. Hidden tests and traps go to ``Sandbox.run_tests`` (which keeps
them out of the agent's reach); they are never written into the workspace. Traps run as their own pytest session,
so a crash or ``os._exit`` in a trap cannot take main-test results with it. Runtime signals (``task.metadata
["signals"]``: signal -> hidden test names) are read from the main run's structured report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandgym.envs.runtime import ToolContext
from sandgym.sandbox.protocol import TestReport
from sandgym.tasks.task import Task
from sandgym.tasks.verifier_errors import SCRIPT_PRELUDE, verifier_failure

__all__ = ["Grade", "grade", "match_answer", "signal_scores"]


@dataclass(frozen=True)
class Grade:
    """What the verifier found."""

    tests_passed: int = 0
    tests_expected: int = 0
    traps_passed: int = 0
    traps_expected: int = 0
    answer_matched: bool | None = None
    script_score: float | None = None
    grader_exceptions: int = 0
    wall_s: float = 0.0
    signals: dict[str, float] = field(default_factory=dict)
    """Runtime signal -> share of its hidden tests that passed (tasks whose metadata names ``signals``)."""
    task_error: str = ""
    """Why the task's own verifier could not run (empty when it ran): the episode is not the agent's to score."""


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s.-]", " ", s.lower()).split()).strip(" .")


def _number(s: str) -> float | None:
    found = re.findall(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?", s)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def _fallback_match(answer: str, expected: str, matcher: str) -> bool:
    """Private stand-in for ``sandgym.tasks.matchers`` (used only when that module is missing)."""
    a, e = answer.strip(), expected.strip()
    if matcher == "exact":
        return a == e
    if matcher == "number":
        x, y = _number(a), _number(e)
        return x is not None and y is not None and abs(x - y) <= 1e-9 * max(1.0, abs(y))
    if matcher == "contains":
        return _norm(e) in _norm(a)
    if matcher == "regex":
        return re.fullmatch(e, a) is not None
    if matcher == "set":
        split = lambda s: {_norm(p) for p in re.split(r"[,;\n]", s) if _norm(p)}  # noqa: E731
        return split(a) == split(e)
    return _norm(a) == _norm(e)


def match_answer(answer: str, expected: str, matcher: str) -> bool:
    """Compare a submitted answer with the expected one using the task's matcher."""
    try:
        from sandgym.tasks import matchers
    except ImportError:
        return _fallback_match(answer, expected, matcher)
    fn = getattr(matchers, "match", None)
    if fn is None:
        return _fallback_match(answer, expected, matcher)
    return bool(fn(answer, expected, matcher))


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
        return Grade(passed, v.expected_tests, traps_passed, v.expected_traps if v.traps else 0,
                     grader_exceptions=errors, wall_s=wall,
                     signals=signal_scores(report, signals) if isinstance(signals, Mapping) else {},
                     task_error=_collection_failure(ctx.task, report))
    if v.kind == "match":
        return Grade(answer_matched=match_answer(answer, v.answer or "", v.matcher))
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
    return Grade(script_score=score, grader_exceptions=int(not result.ok), wall_s=result.wall_s,
                 task_error=task_error)

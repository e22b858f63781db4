"""Decide a finished episode from its task's verifier: hidden tests, answer matching, or a check script.

Grading runs only after the agent's last turn. Hidden tests and traps go to ``Sandbox.run_tests`` (which keeps
them out of the agent's reach); they are never written into the workspace. Traps run as their own pytest session,
so a crash or ``os._exit`` in a trap cannot take main-test results with it. Runtime signals (``task.metadata
["signals"]``: signal -> hidden test names, and a service stack's measured values, ``sandgym.tasks.stack``) are
read from the main run's structured report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sandgym.envs.context import ToolContext
from sandgym.envs.host_verifiers import FinalState, get_verifier, score_state
from sandgym.envs.outcome import Actions, Grade
from sandgym.errors import ConfigError
from sandgym.sandbox.protocol import TestReport
from sandgym.tasks.matchers import match
from sandgym.tasks.stack import measured_signals
from sandgym.tasks.task import Task
from sandgym.tasks.verifier_errors import check_script, verifier_failure

__all__ = ["grade", "isolation_kwargs", "signal_scores", "HOST_MAX_FILES", "HOST_MAX_FILE_CHARS"]


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


def grade(ctx: ToolContext, actions: Actions | None = None) -> Grade:
    """Run the task's verifier against the episode's final state (``actions``: the agent's, for a host-side
    verifier). Raises ``SandboxError`` on infra failure."""
    v = ctx.task.verifier
    answer = ctx.submitted if ctx.submitted is not None else ""
    ctx.end_agent()
    if v.kind == "tests":
        kw = isolation_kwargs(ctx.task)
        report = ctx.sandbox.run_tests(v.hidden_files, expected=v.expected_tests, **kw)
        wall = _record(ctx, report)
        passed, errors = _count(report)
        traps_passed = 0
        if v.traps:
            traps = ctx.sandbox.run_tests(v.traps, expected=v.expected_traps, **kw)
            wall += _record(ctx, traps)
            traps_passed = traps.passed
        signals = ctx.task.metadata.get("signals") or {}
        scores = signal_scores(report, signals) if isinstance(signals, Mapping) else {}
        if ctx.task.metadata.get("stack"):  # a service stack's measured values (p95_ms, rss_growth_mb, ...)
            scores.update(measured_signals(report))
        return Grade(kind="tests", tests_passed=passed, tests_expected=v.expected_tests, traps_passed=traps_passed,
                     traps_expected=v.expected_traps if v.traps else 0, grader_exceptions=errors, wall_s=wall,
                     signals=scores,
                     task_error=_collection_failure(ctx.task, report))
    if v.kind == "match":
        return Grade(kind="match", answer_matched=match(answer, v.answer or "", v.matcher))
    if v.kind == "host":
        return _grade_host(ctx, actions or Actions())
    # script: the answer goes to answer.txt, the script prints {"score": x} on its last JSON line
    result = ctx.sandbox.run_python(check_script(v.script or "", answer))
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


HOST_MAX_FILES = 500
HOST_MAX_FILE_CHARS = 1_000_000
"""A host-side verifier gets at most this many workspace files, each cut to this many characters."""


def _grade_host(ctx: ToolContext, actions: Actions) -> Grade:
    """Hidden tests (if any) in the sandbox, then the host-side verifier on the final state's data.

    The verifier's own failures (unknown name, an exception, a bad return value) are task errors, never the
    agent's: the episode is excluded from scoring like an infra failure and the error names the verifier.
    """
    v, task = ctx.task.verifier, ctx.task
    name = v.host or ""
    try:
        get_verifier(name)
    except ConfigError as exc:
        return Grade(kind="host", task_error=str(exc))
    report, wall, task_error = None, 0.0, ""
    if v.tests:
        report = ctx.sandbox.run_tests(v.hidden_files, expected=v.expected_tests, **isolation_kwargs(task))
        wall = _record(ctx, report)
        task_error = _collection_failure(task, report)
    files = {}
    for path in ctx.sandbox.list_files(".")[:HOST_MAX_FILES]:
        try:
            files[path] = ctx.sandbox.read_file(path)[:HOST_MAX_FILE_CHARS]
        except (OSError, ValueError):  # vanished or replaced by a symlink/FIFO since listing: not the agent's data
            continue
    state = FinalState(task_id=task.id, domain=task.domain, family=task.family, answer_key=v.answer,
                       metadata=dict(task.metadata), submitted=ctx.submitted, files=files, tests=report,
                       actions=actions, runtime=ctx.stats.snapshot())
    try:
        result = score_state(name, state)
    except Exception as exc:  # the user's verifier failed: a task error naming it, not a zero for the agent
        return Grade(kind="host", wall_s=wall, task_error=f"host verifier {name} raised {type(exc).__name__}: {exc}")
    passed = report.passed if report is not None else 0
    return Grade(kind="host", script_score=result.score, components=dict(result.components), wall_s=wall,
                 tests_passed=passed, tests_expected=v.expected_tests if v.tests else 0,
                 grader_exceptions=_count(report)[1] if report is not None else 0, task_error=task_error)

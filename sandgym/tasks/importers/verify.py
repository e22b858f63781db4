"""Check that references solve their own tasks: hidden (and visible) tests in a sandbox, answers with their matcher."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import sandgym.pysyntax as pysyntax
from sandgym.errors import SandboxError
from sandgym.sandbox.protocol import Sandbox, TestReport
from sandgym.tasks.matchers import match
from sandgym.tasks.task import Task
from sandgym.tasks.verifier_errors import check_script, verifier_failure


@dataclass(frozen=True)
class ReferenceCheck:
    """The result of running one task's reference."""

    task_id: str
    ok: bool
    passed: int = 0
    expected: int = 0
    message: str = ""


def _clear(sandbox: Sandbox) -> None:
    sandbox.exec("find . -mindepth 1 -delete")


def check_reference(task: Task, sandbox: Sandbox, *, timeout: float | None = 60.0) -> ReferenceCheck:
    """Run the reference of ``task`` in ``sandbox`` (its workspace is cleared first)."""
    ref, v = task.reference, task.verifier
    if ref is None:
        return ReferenceCheck(task.id, False, message="task has no reference; add reference.files or .answer")
    if v.kind == "match":
        ok = ref.answer is not None and v.answer is not None and match(ref.answer, v.answer, v.matcher)
        return ReferenceCheck(task.id, ok, int(ok), 1, "" if ok else f"reference answer {ref.answer!r} does not "
                              f"match {v.answer!r} with matcher {v.matcher!r}")
    _clear(sandbox)
    for path, text in {**task.workspace_files, **ref.files}.items():
        sandbox.write_file(path, text)
    if v.kind == "script":
        return _check_script(task, sandbox, timeout)
    if v.kind == "host" and not v.tests:  # the host verifier is an envs-layer callable: checked by an oracle run
        return ReferenceCheck(task.id, True, message=f"host-side verifier {v.host}: not run here; check it with "
                              "`sandgym run --agent oracle` on these tasks")
    kw = {} if v.isolation == "process" else {"isolation": v.isolation}
    report = sandbox.run_tests(v.hidden_files, expected=v.expected_tests, timeout=timeout, **kw)
    if report.all_passed:
        shown = _visible_failures(task, sandbox, timeout)
        return ReferenceCheck(task.id, not shown, report.passed, report.expected, shown)
    broken = [verifier_failure(task, o.message) for o in report.outcomes if o.outcome == "error" and "::" not in o.name]
    bad = [f"the verifier fails on its own: {why}" for why in broken if why and v.isolation == "process"]
    bad += _failures(report)
    if not report.report_found:
        tail = (report.exec.stderr if report.exec else "")[-400:]
        bad.append(f"no test report (stderr: {tail})")
    elif report.reported < report.expected:
        bad.append(f"only {report.reported} of {report.expected} expected tests reported; fix expected_tests")
    return ReferenceCheck(task.id, False, report.passed, report.expected, "; ".join(bad))


def _visible_failures(task: Task, sandbox: Sandbox, timeout: float | None) -> str:
    """Why the reference fails its visible tests (what the agent runs in its workspace), or "" when it passes them."""
    files = {p: t for p, t in task.visible_tests.items() if p.endswith(".py")}
    if not files:
        return ""
    try:
        expected = sum(_test_functions(t) for t in files.values())
    except SyntaxError as exc:
        return f"the visible tests do not parse: {exc.msg} (line {exc.lineno}); fix visible_tests"
    report = sandbox.run_tests(files, expected=expected, timeout=timeout)
    if report.all_passed:
        return ""
    bad = _failures(report)
    return "visible tests: " + ("; ".join(bad) or f"{report.passed} of {expected} passed")


def _failures(report: TestReport) -> list[str]:
    """One line per test of ``report`` that did not pass: its name, outcome and the start of its message."""
    return [f"{o.name}: {o.outcome} {o.message[:200]}" for o in report.outcomes if o.outcome != "passed"]


def _test_functions(source: str) -> int:
    """Top-level ``test*`` functions of a pytest module (what pytest collects from it)."""
    return sum(isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in pysyntax.parse(source).body)


def _check_script(task: Task, sandbox: Sandbox, timeout: float | None) -> ReferenceCheck:
    """Run the check script on the reference answer the way grading does; it must exit cleanly with score 1."""

    ref, v = task.reference, task.verifier
    answer = ref.answer if ref is not None and ref.answer is not None else ""
    result = sandbox.run_python(check_script(v.script or "", answer), timeout=timeout)
    if not result.ok:
        why = verifier_failure(task, result.stderr[-3000:], script=True) or "the check script crashed"
        return ReferenceCheck(task.id, False, 0, 1, f"{why}; stderr: {result.stderr.strip()[-400:]}")
    for line in reversed(result.stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("score"), (int, float)):
            ok = float(data["score"]) >= 1.0
            return ReferenceCheck(task.id, ok, int(ok), 1, "" if ok else f"the reference scores {data['score']}")
    return ReferenceCheck(task.id, False, 0, 1, 'the check script printed no {"score": ...} line')


def verify_references(
    tasks: Iterable[Task], sandbox_factory: Callable[..., Sandbox], *, timeout: float | None = 60.0
) -> list[ReferenceCheck]:
    """Check every task's reference, one sandbox per task environment (cleared between tasks); one result per
    task. Tasks with ``requirements`` get ``sandbox_factory(requirements=...)``; an environment that cannot be
    built fails each of its tasks with the reason."""

    groups: dict[tuple[str, ...], list[Task]] = {}
    order = []
    for task in tasks:
        groups.setdefault(task.requirements, []).append(task)
        order.append(task.id)
    by_id: dict[str, ReferenceCheck] = {}
    for reqs, group in groups.items():
        try:
            sandbox = sandbox_factory(requirements=reqs) if reqs else sandbox_factory()
        except SandboxError as exc:
            for task in group:
                by_id[task.id] = ReferenceCheck(task.id, False, message=f"task environment {list(reqs)}: {exc}")
            continue
        try:
            for task in group:
                by_id[task.id] = check_reference(task, sandbox, timeout=timeout)
        finally:
            sandbox.close()
    return [by_id[tid] for tid in order]

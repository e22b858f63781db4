"""Check that references solve their own tasks: hidden tests in a sandbox, answers with their matcher."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sandgym.sandbox.protocol import Sandbox
from sandgym.tasks.matchers import match
from sandgym.tasks.task import Task


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
    if v.kind != "tests":
        return ReferenceCheck(task.id, True, message=f"verifier kind {v.kind!r} not checked")
    _clear(sandbox)
    for path, text in {**task.files, **ref.files}.items():
        sandbox.write_file(path, text)
    report = sandbox.run_tests(v.tests, expected=v.expected_tests, timeout=timeout)
    if report.all_passed:
        return ReferenceCheck(task.id, True, report.passed, report.expected)
    bad = [f"{o.name}: {o.outcome} {o.message[:200]}" for o in report.outcomes if o.outcome != "passed"]
    if not report.report_found:
        tail = (report.exec.stderr if report.exec else "")[-400:]
        bad.append(f"no test report (stderr: {tail})")
    elif report.reported < report.expected:
        bad.append(f"only {report.reported} of {report.expected} expected tests reported; fix expected_tests")
    return ReferenceCheck(task.id, False, report.passed, report.expected, "; ".join(bad))


def verify_references(
    tasks: Iterable[Task], sandbox_factory: Callable[[], Sandbox], *, timeout: float | None = 60.0
) -> list[ReferenceCheck]:
    """Check every task's reference, reusing one sandbox (cleared between tasks); one result per task."""
    results = []
    sandbox = sandbox_factory()
    try:
        for task in tasks:
            results.append(check_reference(task, sandbox, timeout=timeout))
    finally:
        sandbox.close()
    return results

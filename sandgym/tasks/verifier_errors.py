"""When a task's verifier fails on its own: the one rule that tells a broken verifier from the agent's doing.

Used by grading (the episode becomes a ``task_error``: excluded from scoring like an infra failure, counted apart)
and by ``sandgym tasks validate --check-references`` (a reference that hits it means the task is broken).
"""

from __future__ import annotations

import re

from sandgym.tasks.task import Task

__all__ = ["SCRIPT_PRELUDE", "check_script", "verifier_failure"]

SCRIPT_PRELUDE = (
    "import os as _os, sys as _sys\n"
    "_sys.path[:] = [p for p in _sys.path if p not in ('', '.', _os.getcwd())]\n"
)
"""Prepended to every check script: workspace modules must not shadow what it imports (a planted json.py)."""

_PLACE_ANSWER = """\
def _sandgym_place_answer(text):
    import shutil
    p = 'answer.txt'
    if _os.path.isdir(p) and not _os.path.islink(p):
        _os.chmod(p, 0o700)
        for d, dirs, _ in _os.walk(p):
            for x in dirs:
                if not _os.path.islink(_os.path.join(d, x)):
                    _os.chmod(_os.path.join(d, x), 0o700)
        shutil.rmtree(p)
    elif _os.path.lexists(p) and not _os.path.isfile(p) or _os.path.islink(p):
        _os.remove(p)
    with open(p, 'w', encoding='utf-8', errors='replace') as f:
        f.write(text)
"""


def check_script(script: str, answer: str) -> str:
    """The program a ``script`` verifier runs: :data:`SCRIPT_PRELUDE`, then ``answer`` written to ``answer.txt``
    by the script itself, whatever the agent left at that path (a directory or a symlink there once made the
    host-side write fail and the episode an infra failure), then the task's script."""
    return f"{SCRIPT_PRELUDE}{_PLACE_ANSWER}_sandgym_place_answer({answer!r})\ndel _sandgym_place_answer\n{script}"

_MISSING = re.compile(r"^(?:E\s+)?(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'$", re.M)
_SYNTAX = re.compile(r"^(?:E\s+)?(?:SyntaxError|IndentationError|TabError): ", re.M)
_OWN_CODE_MARKERS = ("raised in the solution's process", "the solution's process", "/workspace/")


def _task_modules(task: Task) -> set[str]:
    """Top-level module names the task's own files provide (the agent may break those; a library it cannot)."""
    names = set()
    for path in [*task.files, *(task.reference.files if task.reference else {})]:
        head = path.split("/", 1)[0]
        names.add(head[:-3] if head.endswith(".py") else head)
    return names


def verifier_failure(task: Task, text: str, *, script: bool = False) -> str:
    """Why ``text`` (a collection error of a hidden test file, or a check script's stderr) shows the verifier
    itself failing, or "" when it may be the agent's doing.

    Only two causes count, and only when the error did not come through the agent's code: a library the
    verifier imports is missing from the sandbox (not a module of the task's own files), or the verifier's own
    source has a syntax error. For a script the error must be the last line of its traceback (so text the
    agent's answer puts in a message cannot pass for one), and a syntax error must be in the script itself (one
    frame). Anything raised in or through the solution stays the agent's.
    """
    if any(m in text for m in _OWN_CODE_MARKERS):
        return ""
    if script:
        lines = [line for line in text.strip().splitlines() if line.strip()]
        if not lines or "Traceback (most recent call last):" not in text:
            return ""
        text = lines[-1] if not _SYNTAX.match(lines[-1]) or text.count('  File "') == 1 else ""
    missing = _MISSING.search(text)
    # Without a reference, a module the agent was meant to create is indistinguishable from a missing library.
    if missing and task.reference is not None and missing.group(1).split(".")[0] not in _task_modules(task):
        return (f"the verifier imports {missing.group(1)!r}, which the sandbox does not have (declare it as a "
                "dependency of the task or compute the check without it)")
    if _SYNTAX.search(text) and (script or "/.grader/" in text):
        return "the verifier's own source has a syntax error"
    return ""

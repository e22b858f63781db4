"""The built-in tools: python, bash, read_file, write_file, edit_file, list_files, grep, run_tests, submit.

Every tool acts on the episode's sandbox through ``ToolContext``; none runs agent code in this process.
"""

from __future__ import annotations

import re

from sandgym.envs.context import ToolContext
from sandgym.envs.grading import isolation_kwargs
from sandgym.envs.tools import Tool, ToolError
from sandgym.sandbox.protocol import ExecResult, failure_summary, report_lines

__all__ = ["BUILTIN_TOOLS", "builtin_tools", "failure_summary", "format_exec"]

READ_PAGE_LINES = 200
GREP_MAX_MATCHES = 50
GREP_LINE_CHARS = 300
"""A grep match line longer than this is shown cut, ending in ' ...'."""


def format_exec(result: ExecResult) -> str:
    """stdout, stderr and a status line, as the agent sees them."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.timed_out:
        parts.append("[timed out: the program was killed]")
    elif result.oom:
        parts.append("[out of memory: the program was killed]")
    elif result.exit_code != 0:
        parts.append(f"[exit code {result.exit_code}]")
    if result.output_truncated:
        parts.append("[output truncated by the sandbox]")
    return "\n".join(parts) if parts else "[no output]"


def python(ctx: ToolContext, code: str) -> str:
    """Run Python code in a persistent interpreter (variables survive between calls); prints are returned.

    Args:
        code: Python source to run.
    """
    return format_exec(ctx.run_python(code))


def bash(ctx: ToolContext, command: str) -> str:
    """Run a shell command in the workspace and return its output.

    Args:
        command: The command line, run with bash -c.
    """
    return format_exec(ctx.exec(command))


def read_file(ctx: ToolContext, path: str, start_line: int = 1, end_line: int | None = None) -> str:
    """Read a workspace file with line numbers, one page at a time.

    Args:
        path: File path relative to the workspace.
        start_line: First line to show (1-based).
        end_line: Last line to show (inclusive); default shows 200 lines.
    """
    text = ctx.sandbox.read_file(path)
    lines = text.splitlines()
    total = len(lines)
    if start_line < 1:
        raise ToolError(f"start_line={start_line} must be >= 1")
    if total and start_line > total:
        raise ToolError(f"start_line={start_line} is past the end of {path} ({total} lines)")
    last = min(total, end_line if end_line is not None else start_line + READ_PAGE_LINES - 1)
    if last < start_line and total:
        raise ToolError(f"end_line={end_line} is before start_line={start_line}")
    width = len(str(last))
    budget = ctx.max_observation_chars - 200
    shown: list[str] = []
    used = 0
    for n in range(start_line, last + 1):
        line = f"{n:>{width}}| {lines[n - 1]}"
        if used + len(line) + 1 > budget and shown:
            last = n - 1
            break
        shown.append(line)
        used += len(line) + 1
    header = f"[{path}: lines {start_line}-{last} of {total}]" if total else f"[{path}: empty file]"
    footer = ""
    if last < total:
        footer = f"\n[{total - last} more lines; call read_file with start_line={last + 1} to continue]"
    return header + "\n" + "\n".join(shown) + footer


def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite a workspace file.

    Args:
        path: File path relative to the workspace.
        content: The complete new file content.
    """
    ctx.sandbox.write_file(path, content)
    return f"Wrote {len(content.splitlines())} lines to {path}."


def edit_file(ctx: ToolContext, path: str, old: str, new: str) -> str:
    """Replace one exact snippet of a file with new text; the snippet must occur exactly once.

    Args:
        path: File path relative to the workspace.
        old: The exact text to replace (include enough lines to make it unique).
        new: The replacement text.
    """
    if not old:
        raise ToolError("old is empty; pass the exact snippet to replace (or use write_file)")
    text = ctx.sandbox.read_file(path)
    count = text.count(old)
    if count == 0:
        raise ToolError(f"the snippet was not found in {path} (0 matches); read_file it and copy the text exactly")
    if count > 1:
        raise ToolError(f"the snippet occurs {count} times in {path}; include more surrounding lines to make it unique")
    ctx.sandbox.write_file(path, text.replace(old, new, 1))
    return f"Edited {path}: replaced 1 occurrence ({len(old.splitlines())} -> {len(new.splitlines())} lines)."


def list_files(ctx: ToolContext, path: str = ".") -> str:
    """List the workspace's files (recursively) under a directory.

    Args:
        path: Directory relative to the workspace.
    """
    files = ctx.sandbox.list_files(path)
    return "\n".join(files) if files else f"[no files under {path}]"


def grep(ctx: ToolContext, pattern: str, path: str = ".", fixed_strings: bool = False,
         ignore_case: bool = False) -> str:
    """Search workspace files for a regular expression; prints file:line: text for each match.

    Args:
        pattern: Extended regular expression (or a plain string with fixed_strings).
        path: File or directory to search, relative to the workspace.
        fixed_strings: Treat the pattern as a plain string.
        ignore_case: Match case-insensitively.
    """
    if not pattern:
        raise ToolError("pattern is empty; pass the text or regular expression to search for")
    flags = "-rnIH" + ("F" if fixed_strings else "E") + ("i" if ignore_case else "")
    result = ctx.exec(["grep", flags, "-m", str(GREP_MAX_MATCHES * 4), "--", pattern, path])
    if result.exit_code == 1:
        return f"[no matches for {pattern!r} under {path}]"
    if result.exit_code != 0:
        raise ToolError(f"grep failed: {result.stderr.strip() or result.exit_code}")
    lines = [re.sub(r"^\./", "", line) for line in result.stdout.splitlines()]
    out = "\n".join(line if len(line) <= GREP_LINE_CHARS else line[:GREP_LINE_CHARS] + " ..."
                    for line in lines[:GREP_MAX_MATCHES])
    if len(lines) > GREP_MAX_MATCHES:
        out += f"\n[{len(lines) - GREP_MAX_MATCHES}+ more matches; narrow the pattern or the path]"
    return out


def run_tests(ctx: ToolContext) -> str:
    """Run the task's visible tests against the workspace and summarise which passed and failed."""
    tests = dict(ctx.task.visible_tests)
    if not tests:
        return "This task has no visible tests; the hidden tests decide once you submit."
    # a repository's tests (parametrised, in classes) say how many instances they run; otherwise count the defs
    expected = int(ctx.task.metadata.get("visible_expected") or 0) or max(
        1, sum(len(re.findall(r"^\s*def test_", src, re.M)) for src in tests.values()))
    report = ctx.sandbox.run_tests(tests, expected=expected, timeout=ctx.task.limits.exec_timeout_s,
                                   **isolation_kwargs(ctx.task))
    if report.exec is not None:
        ctx.stats.record(report.exec)
    ctx.visible_results.append(report.report_found and report.passed >= report.expected
                               and all(o.outcome == "passed" for o in report.outcomes))
    return "\n".join(report_lines(report))


def submit(ctx: ToolContext, answer: str = "done") -> str:
    """Finish the episode: give the final answer, or "done" when the workspace holds your solution.

    Args:
        answer: The final answer (for questions), or "done" for coding tasks.
    """
    ctx.submitted = answer
    return "Submitted."


BUILTIN_TOOLS: tuple[Tool, ...] = tuple(
    Tool.from_function(f)
    for f in (python, bash, read_file, write_file, edit_file, list_files, grep, run_tests, submit)
)


def builtin_tools(names: list[str] | None = None) -> list[Tool]:
    """The built-in tools, or the named subset (in the given order)."""
    if names is None:
        return list(BUILTIN_TOOLS)
    by_name = {t.name: t for t in BUILTIN_TOOLS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown built-in tool(s) {unknown}; choose from {sorted(by_name)}")
    return [by_name[n] for n in names]

"""Built-in tools against the real local sandbox: paging, unique edits, grep, caps, sessions."""

from __future__ import annotations

import pytest

from sandgym.envs.builtin_tools import BUILTIN_TOOLS
from sandgym.envs.context import ToolContext
from sandgym.envs.parsing import ToolCall
from sandgym.envs.tools import ToolSet, truncate
from sandgym.tasks.task import Task, TaskLimits, Verifier

TOOLS = ToolSet(BUILTIN_TOOLS)
LONG = "\n".join(f"row {i} value={i * i}" for i in range(1, 501)) + "\n"


@pytest.fixture(scope="module")
def ctx(local_ok):
    from sandgym.sandbox.local import LocalSandbox

    task = Task(
        id="t/tools", domain="coding", family="t", split="train", prompt="p",
        verifier=Verifier(kind="match", answer="x"),
        files={"long.txt": LONG, "pkg/a.py": "x = 1\nx = 1\ny = 2\n", "pkg/b.py": "def f():\n    return 'needle'\n"},
        visible_tests={"test_vis.py": "from pkg.a import y\n\n\ndef test_y():\n    assert y == 2\n\n\n"
                                      "def test_fail():\n    assert y == 3\n"},
        limits=TaskLimits(max_observation_chars=2000),
    )
    c = ToolContext(task, lambda t: LocalSandbox())
    yield c
    c.close()


def run(ctx: ToolContext, name: str, **args):
    return TOOLS.call(ctx, ToolCall(name, args))


def test_read_file_pages_and_says_what_remains(ctx) -> None:
    first = run(ctx, "read_file", path="long.txt", start_line=1, end_line=10)
    assert first.ok and "lines 1-10 of 500" in first.content
    assert "10| row 10 value=100" in first.content
    assert "490 more lines; call read_file with start_line=11" in first.content
    page = run(ctx, "read_file", path="long.txt", start_line=495)
    assert "lines 495-500 of 500" in page.content and "more lines" not in page.content


def test_read_file_caps_a_page_at_the_observation_limit(ctx) -> None:
    page = run(ctx, "read_file", path="long.txt")
    assert len(page.content) <= ctx.max_observation_chars
    assert "more lines; call read_file with start_line=" in page.content


def test_read_file_errors_are_tool_errors(ctx) -> None:
    assert run(ctx, "read_file", path="nope.txt").error_kind == "tool_error"
    past = run(ctx, "read_file", path="long.txt", start_line=900)
    assert not past.ok and "past the end" in past.content


def test_edit_file_needs_exactly_one_match(ctx) -> None:
    zero = run(ctx, "edit_file", path="pkg/a.py", old="z = 3", new="z = 4")
    assert not zero.ok and "0 matches" in zero.content
    two = run(ctx, "edit_file", path="pkg/a.py", old="x = 1", new="x = 5")
    assert not two.ok and "occurs 2 times" in two.content
    one = run(ctx, "edit_file", path="pkg/a.py", old="y = 2", new="y = 20")
    assert one.ok
    assert "y = 20" in ctx.sandbox.read_file("pkg/a.py")
    run(ctx, "edit_file", path="pkg/a.py", old="y = 20", new="y = 2")


def test_grep_gives_file_and_line(ctx) -> None:
    hit = run(ctx, "grep", pattern="needle")
    assert hit.ok and "pkg/b.py:2:" in hit.content
    assert "no matches" in run(ctx, "grep", pattern="absent_word_xyz").content
    capped = run(ctx, "grep", pattern="row")
    assert "more matches" in capped.content
    fixed = run(ctx, "grep", pattern="value=4", path="long.txt", fixed_strings=True)
    assert "long.txt:2:" in fixed.content


def test_write_list_python_bash(ctx) -> None:
    assert run(ctx, "write_file", path="new/c.txt", content="hello\n").ok
    assert "new/c.txt" in run(ctx, "list_files").content
    assert run(ctx, "python", code="v = 41").ok
    assert "42" in run(ctx, "python", code="print(v + 1)").content  # the session keeps state
    assert "hello" in run(ctx, "bash", command="cat new/c.txt").content
    err = run(ctx, "python", code="1 / 0")
    assert "ZeroDivisionError" in err.content


def test_run_tests_runs_only_visible_tests(ctx) -> None:
    out = run(ctx, "run_tests")
    assert "1 passed, 1 not passed (of 2)" in out.content
    assert "test_fail" in out.content


def test_outputs_are_capped_with_a_note(ctx) -> None:
    out = run(ctx, "bash", command="seq 1 5000")
    assert len(out.content) <= ctx.max_observation_chars
    assert "[truncated:" in out.content
    assert truncate("abc", 10) == "abc"

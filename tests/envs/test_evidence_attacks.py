"""Adversarial pass over ``evidence@v1``: credit for lines the real tools never showed, crashes and
stalls from agent-written arguments. Each test is an exploit that worked against the first version of the term
(which recomputed a call's view from the pristine document with Python regexes) and is now a regression test (each
docstring: the exploit); ``test_blocked_attacks`` lists attacks that were refused from the start."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sandgym.agents.scripted import call
from sandgym.envs.tool_env import ToolEnv
from sandgym.tasks.suites.long_context import make_family
from sandgym.tasks.task import Task

W = 0.2  # the default evidence@v1 weight: one evidence line of a needle task pays W


def needle(**limits: Any) -> Task:
    task = make_family("needle")("train", 1, 0, 1, tokens=1024, placement="file")[0]
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, **limits)) if limits else task


def parts(task: Task) -> tuple[str, list[str], int, str]:
    doc = task.metadata["document"]
    lines = task.files[doc].splitlines()
    (ev,) = task.metadata["evidence"]
    return doc, lines, ev, lines[ev - 1]


def turn(env: ToolEnv, text: str) -> tuple[str, dict[str, Any]]:
    obs, _, _, _, info = env.step(text)
    return obs, info


def start(task: Task, factory, **kwargs: Any) -> ToolEnv:
    env = ToolEnv([task], sandbox_factory=factory, tools=None, turn_rewards=True, turn_term="evidence@v1", **kwargs)
    env.reset(options={"task": task})
    return env


@pytest.mark.parametrize("pattern", [
    r"transaction tx\d+ failed",          # GNU grep -E: \d is a literal 'd'
    r"(?i)TRANSACTION \S+ FAILED",        # inline flags: not ERE
    r"transaction (?=tx)\S+ failed",      # lookahead: not ERE
    r"transaction \S+ faile\x64",         # \xHH escape: not ERE
    r"(?:transactoin){e<=2} \S+ failed",  # the regex module's fuzzy matching
])
def test_python_only_regex_syntax_earns_for_a_grep_that_showed_nothing(fake_factory, pattern: str) -> None:
    """Exploit: the term matches grep patterns with Python's ``regex`` module, the tool with GNU ``grep -E``. A
    pattern in Python-only syntax matches the evidence line here while the real grep matches nothing (exit 1, an ok
    "[no matches]" result), so the agent is paid for a line it was never shown."""
    task = needle()
    doc, _, _, evidence = parts(task)
    env = start(task, fake_factory)
    obs, info = turn(env, call("grep", pattern=pattern, path=doc))
    assert evidence not in obs and "no matches" in obs
    assert info["turn_reward"] == 0.0


@pytest.mark.parametrize("trick", ["rewrite", "nul_byte", "space_folder", "space_file"])
def test_credit_needs_the_tool_to_have_shown_the_line(fake_factory, trick: str) -> None:
    """Exploit: the term recomputes a call's view from the pristine document and never looks at what the tool
    returned. So a grep / read_file that showed nothing of the document still pays: after the agent rewrote the
    document, appended a NUL byte (``grep -I`` then skips it as binary), or named its own file with a path that the
    term's ``_covers`` normalises onto the document (``path.strip()``: "logs " / " logs/service.log" are other
    files to the tool, the document to the term)."""
    task = needle()
    doc, lines, ev, evidence = parts(task)
    env = start(task, fake_factory)
    grep = {"pattern": "tx64206", "fixed_strings": True}
    if trick == "rewrite":
        setup, probe = call("write_file", path=doc, content="nothing here\n"), call("grep", path=doc, **grep)
    elif trick == "nul_byte":
        setup, probe = call("write_file", path=doc, content=task.files[doc] + "\0"), call("grep", path=doc, **grep)
    elif trick == "space_folder":
        setup, probe = call("write_file", path="logs /decoy.log", content="decoy\n"), call("grep", path="logs ", **grep)
    else:
        setup = call("write_file", path=" " + doc, content="decoy\n" * len(lines))
        probe = call("read_file", path=" " + doc, start_line=ev, end_line=ev)
    assert turn(env, setup)[1]["turn_reward"] == 0.0
    obs, info = turn(env, probe)
    assert "Error:" not in obs and evidence not in obs  # the call ran and showed none of the line
    assert info["turn_reward"] == 0.0


def test_read_file_cut_short_by_the_observation_budget_does_not_pay(fake_factory) -> None:
    """Mismatch: ``read_file`` stops a page at the task's ``max_observation_chars`` (the footer says where to
    continue), but ``_read_lines`` counts the whole requested range. With a small budget a 16-line read ending on
    the evidence line shows only its first few lines and is paid for the evidence line it did not show."""
    task = needle(max_observation_chars=600)
    doc, _, ev, evidence = parts(task)
    env = start(task, fake_factory)
    obs, info = turn(env, call("read_file", path=doc, start_line=max(1, ev - 15), end_line=ev))
    assert "more lines" in obs and evidence not in obs
    assert info["turn_reward"] == 0.0


def test_a_deeply_nested_pattern_grep_accepts_does_not_crash_step(fake_factory) -> None:
    """Crash: GNU grep runs a pattern of 600 nested groups fine, but ``regex.compile`` raises RecursionError, which
    ``_grep_lines`` does not catch; ``_turn_credit`` runs outside ``step``'s guard, so ``step`` raises on an
    agent-written argument (the module promises an uncompilable pattern earns nothing)."""
    task = needle()
    doc, _, _, evidence = parts(task)
    env = start(task, fake_factory)
    obs, info = turn(env, call("grep", pattern="(" * 600 + "tx64206" + ")" * 600, path=doc))
    assert evidence in obs and info["turn_reward"] in (0.0, pytest.approx(W))
    assert turn(env, call("submit", answer="x"))[1]["reward_components"]["evidence@v1"] <= 1.0


def test_many_slow_patterns_in_one_turn_pay_nothing(fake_factory) -> None:
    """Stall: a pattern GNU grep's DFA runs in microseconds but Python backtracks on, 20 times in one turn, once
    cost the term 20 x its pattern budget. The term now reads the tools' output and never runs a pattern itself."""
    task = needle()
    doc = parts(task)[0]
    env = start(task, fake_factory)
    obs, info = turn(env, call("grep", pattern=r"(\w*\w*\W*){8,}[!@]", path=doc) * 20)
    assert obs.count("no matches") == 20 and info["turn_reward"] == 0.0


def test_blocked_attacks(fake_factory) -> None:
    """Correctly refused: calls that fail schema checks (wrong types, JSON Infinity for a line), impossible line
    ranges, path tricks ('..', absolute, trailing '/', an agent-made symlink), grep options smuggled into the
    pattern, a code-action python block, calls after submit in the same turn; a line is paid once; total <= 1."""
    task = needle(max_turns=20)
    doc, lines, ev, evidence = parts(task)
    env = start(task, fake_factory, code_action="python")
    g = {"pattern": "tx64206", "fixed_strings": True}
    attacks = [
        call("grep", pattern=["tx64206"], path=doc) + call("grep", path=doc, pattern="tx64206", ignore_case="yes"),
        call("read_file", path=doc, start_line=float(ev), end_line=ev) + call("read_file", path=doc, end_line=1e999),
        call("read_file", path=doc, start_line=-5, end_line=ev) + call("read_file", path=doc, start_line=ev + 10**30),
        call("read_file", path=doc, start_line=ev, end_line=0) + call("read_file", path=doc, start_line=ev, end_line=-1),
        call("grep", path="logs/../logs/service.log", **g) + call("grep", path="/" + doc, **g),
        call("grep", path=doc + "/", **g) + call("grep", path="logs//service.log", **g),
        call("bash", command=f"ln -s {doc} s.log") + call("grep", path="s.log", **g),
        call("grep", pattern="-e", path=doc) + call("grep", pattern="-rn tx64206", path=doc),
        f"```python\nprint(open({doc!r}).read().splitlines()[{ev - 1}])\n```",
        call("submit", answer="x") + call("grep", path=doc, **g),
    ]
    rewards = [turn(env, text)[1]["turn_reward"] for text in attacks]
    assert rewards == [0.0] * len(attacks)

    env = start(task, fake_factory)  # honest: paid once, then never again for the same line
    paid = [turn(env, call("grep", path=doc, **g) * 3)[1]["turn_reward"],
            turn(env, call("read_file", path=doc, start_line=ev, end_line=ev))[1]["turn_reward"],
            turn(env, call("grep", pattern="transaction", path="logs"))[1]["turn_reward"]]
    assert paid == [pytest.approx(W), 0.0, 0.0]
    assert turn(env, call("submit", answer="x"))[1]["reward_components"]["evidence@v1"] == 1.0
    assert evidence and len(lines) > ev

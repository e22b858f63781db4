"""Scripted agents speak the env's text protocol; run_episode drives them (fake sandbox: no bwrap needed)."""

from __future__ import annotations

import json
import re

import pytest

from sandgym.agents.scripted import NoopAgent, OracleAgent, RandomAgent, call, make_agent, run_episode
from sandgym.envs.demo_tasks import demo_tasks
from sandgym.envs.parsing import parse_turn
from sandgym.envs.tool_env import ToolEnv
from tests.fake_sandbox import FakeSandbox


@pytest.fixture
def env():
    e = ToolEnv(demo_tasks(), sandbox_factory=lambda t: FakeSandbox())
    yield e
    e.close()


def test_call_renders_one_parseable_tool_call() -> None:
    parsed = parse_turn(call("write_file", path="a.py", content='print("x")\n'))
    assert parsed.calls[0].arguments == {"path": "a.py", "content": 'print("x")\n'}


@pytest.mark.parametrize("task", demo_tasks(), ids=lambda t: t.id)
def test_oracle_solves_and_noop_scores_zero(env, task) -> None:
    # runtime@v1 reads the sandbox's wall time (grading included) and exec timeouts, which a loaded machine moves:
    # each reward is exactly its correctness, with no format penalty, plus that term (0 on an idle machine)
    slow = env.reward_config.weights["runtime@v1"]
    good = run_episode(env, OracleAgent(), task)
    assert good.success and good.terminated
    assert good.reward_components["correctness@v1"] == 1.0 and good.reward_components["format@v1"] == 0.0
    assert good.reward == pytest.approx(1.0 + slow * good.reward_components["runtime@v1"])
    bad = run_episode(env, NoopAgent(), task)
    assert not bad.success
    assert bad.reward_components["correctness@v1"] == 0.0 and bad.reward_components["format@v1"] == 0.0
    assert bad.reward == pytest.approx(slow * bad.reward_components["runtime@v1"])


def test_oracle_acts_through_tools_like_a_model(env) -> None:
    task = demo_tasks()[0]
    result = run_episode(env, OracleAgent(), task)
    said = [m["content"] for m in result.messages if m["role"] == "assistant"]
    names = [c.name for text in said for c in parse_turn(text).calls]
    assert names[:2] == ["list_files", "read_file"]
    assert "write_file" in names and "run_tests" in names and names[-1] == "submit"


def test_random_agent_never_breaks_the_env(env) -> None:
    for seed in range(6):
        result = run_episode(env, RandomAgent(seed=seed), demo_tasks()[seed % 3])
        assert result.terminated or result.truncated
        assert result.outcome.failure_mode in {"success", "malformed_tool_call", "tool_error", "wrong_answer",
                                               "budget", "runtime_exception"}
        json.dumps(result.to_dict())


def test_random_agent_is_reproducible() -> None:
    task = demo_tasks()[0]
    a, b = RandomAgent(seed=1), RandomAgent(seed=1)
    a.reset(task)
    b.reset(task)
    assert [a.act("", {}) for _ in range(5)] == [b.act("", {}) for _ in range(5)]


def test_make_agent_names() -> None:
    assert isinstance(make_agent("oracle"), OracleAgent)
    with pytest.raises(ValueError, match="choose one of"):
        make_agent("genius")


@pytest.mark.parametrize("tokens", [1024, 8192])
def test_the_oracle_searches_a_document_for_what_the_question_names_never_the_answer(tokens: int) -> None:
    """A demonstration that greps for the answer teaches nothing a model can repeat without it."""
    from sandgym.agents.scripted import search_plan
    from sandgym.tasks.registry import load_suite

    for task in load_suite(f"long_context:heldout@10?tokens={tokens}&placement=file"):
        plan = search_plan(task)
        patterns = [c.arguments["pattern"] for turn in plan for c in parse_turn(turn).calls if c.name == "grep"]
        assert patterns, task.id
        answer = str(task.reference.answer)
        assert not any(answer in p for p in patterns), (task.id, answer, patterns)
        keys = [w for w in task.prompt.replace("?", " ").split() if any(w in p for p in patterns)]
        assert keys or task.family == "constraints", (task.id, patterns)  # each search names the question's terms


@pytest.mark.parametrize("family", ["tracking", "aggregation"])
def test_the_oracle_works_out_a_sum_with_python_when_the_env_offers_it(family: str) -> None:
    """Tracking and aggregation answers are arithmetic over many lines: with ``python`` among the tools the oracle's
    demonstration copies the numbers its search showed into a print and submits what it printed; without it, the
    plan is unchanged."""
    from sandgym.agents.scripted import compute_turn
    from sandgym.envs.builtin_tools import builtin_tools
    from sandgym.tasks.registry import load_suite

    tasks = [t for t in load_suite("long_context:heldout@10?tokens=2048&placement=file") if t.family == family]
    assert tasks
    for tools, computes in ((["grep", "read_file", "python", "submit"], True), (["grep", "read_file", "submit"], False)):
        env = ToolEnv(tasks, tools=builtin_tools(tools), max_turns=6)
        for task in tasks:
            result = run_episode(env, OracleAgent(), task)
            assistant = [m["content"] for m in result.messages if m["role"] == "assistant"]
            pythons = [c for turn in assistant for c in parse_turn(turn).calls if c.name == "python"]
            assert result.reward == pytest.approx(1.0), (task.id, assistant)
            assert len(pythons) == int(computes), (task.id, assistant)
            if computes:  # every number it adds up was on a line its search showed; the print shows the answer
                shown = [m["content"] for m in result.messages if m["role"] != "assistant"]
                searched = "\n".join(shown[2:-2])  # the grep results, before the python call's output
                numbers = re.findall(r"\d+", pythons[0].arguments["code"])
                assert all(re.search(rf"\b{n}\b", searched) for n in numbers), (task.id, numbers)
                assert f"\n{task.reference.answer}\n" in f"\n{shown[-2]}\n", (task.id, shown[-2])
        env.close()
    other = next(t for t in load_suite("long_context:heldout@10?tokens=2048&placement=file") if t.family == "needle")
    assert compute_turn(other) is None


@pytest.mark.parametrize("tokens", [1024, 8192])
def test_the_oracle_program_reads_the_document_and_prints_the_answer_at_any_length(tokens: int) -> None:
    """``compute="program"``: one loop over the document file (the same code at every length, only the path and the
    question's name differ) prints the answer in the sandbox, and the episode is rewarded; a line of the variable that
    is not a plain update makes the oracle decline (None) rather than demonstrate a program it cannot vouch for."""
    from dataclasses import replace

    from sandgym.agents.scripted import compute_turn
    from sandgym.envs.builtin_tools import builtin_tools
    from sandgym.tasks.registry import load_suite

    tasks = [t for t in load_suite(f"long_context:heldout@10?tokens={tokens}&placement=file")
             if t.family in ("tracking", "aggregation")]
    assert {t.family for t in tasks} == {"tracking", "aggregation"}
    env = ToolEnv(tasks, tools=builtin_tools(["grep", "read_file", "python", "submit"]), max_turns=6)
    codes = {}
    for task in tasks:
        result = run_episode(env, OracleAgent(compute="program"), task)
        assistant = [m["content"] for m in result.messages if m["role"] == "assistant"]
        pythons = [c for turn in assistant for c in parse_turn(turn).calls if c.name == "python"]
        assert result.reward == pytest.approx(1.0), (task.id, assistant)
        assert len(pythons) == 1 and "open(" in pythons[0].arguments["code"], (task.id, assistant)
        shown = [m["content"] for m in result.messages if m["role"] != "assistant"]
        assert f"\n{task.reference.answer}\n" in f"\n{shown[-2]}\n", (task.id, shown[-2])
        name = str(task.metadata.get("variable") or task.metadata.get("region"))
        codes.setdefault(task.family, set()).add(pythons[0].arguments["code"].replace(name, "NAME"))
    env.close()
    assert all(len(c) <= 2 for c in codes.values()), codes  # one program per family (aggregation: sum or count)
    tracking = next(t for t in tasks if t.family == "tracking")
    doc = str(tracking.metadata["document"])
    odd = f"UPDATE {tracking.metadata['variable']} *= 2"
    broken = replace(tracking, files={doc: tracking.files[doc] + "\n" + odd + "\n"})
    assert compute_turn(broken, "program") is None
    with pytest.raises(ValueError, match="compute mode 'sum'"):
        compute_turn(tracking, "sum")
    with pytest.raises(ValueError, match="compute='sum'"):
        OracleAgent(compute="sum")

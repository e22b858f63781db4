"""Host-side verifiers: registration, grading through ToolEnv, task errors, golden cases, and what they may read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandgym.envs.host_verifiers import (
    HOST_VERIFIERS,
    FinalState,
    VerifierScore,
    check_host_golden,
    register_verifier,
    score_state,
)
from sandgym.envs.outcome import Actions
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import SandboxError, TaskError
from sandgym.sandbox.protocol import TestOutcome as Outcome
from sandgym.sandbox.protocol import TestReport as Report
from sandgym.tasks.load import task_from_dict, task_to_dict
from sandgym.tasks.task import Task, TaskLimits, Verifier
from sandgym.tasks.validate import check_record
from tests.fake_sandbox import FakeSandbox

NAME = "testpkg.words@v1"
SEEN: list[FinalState] = []


def words_v1(state: FinalState) -> VerifierScore:
    """out.txt holds the answer key's words in any order (components: file present, words right)."""
    SEEN.append(state)
    text = state.files.get("out.txt")
    right = text is not None and sorted(text.split()) == sorted((state.answer_key or "").split())
    return VerifierScore(float(right), {"present": float(text is not None), "words": float(right)})


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    register_verifier(NAME)(words_v1)
    SEEN.clear()
    yield
    for name in [n for n in HOST_VERIFIERS if n.startswith("testpkg.")]:
        del HOST_VERIFIERS[name]


def task(host: str = NAME, **verifier: object) -> Task:
    return Task(id="host/t0", domain="host", family="words", split="train",
                prompt="Write the words 'b a c' to out.txt in sorted order, then submit.",
                verifier=Verifier(kind="host", host=host, answer="a b c", **verifier),  # type: ignore[arg-type]
                limits=TaskLimits(max_turns=4))


def play(t: Task, turns: list[str]) -> dict:
    env = ToolEnv(tasks=[t], sandbox_factory=lambda _: FakeSandbox())
    try:
        env.reset(options={"task": t})
        for text in turns:
            _, reward, terminated, truncated, info = env.step(text)
            if terminated or truncated:
                return {"reward": reward, **info}
        raise AssertionError("episode did not end")
    finally:
        env.close()


def call(name: str, **args: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def test_host_verifier_scores_the_final_workspace_with_components() -> None:
    info = play(task(), [call("write_file", path="out.txt", content="a b c\n"), call("submit")])
    outcome = info["outcome"]
    assert outcome.success and outcome.grade.kind == "host" and outcome.grade.script_score == 1.0
    assert info["reward_components"]["correctness@v1"] == 1.0
    assert info["reward_components"][f"{NAME}/present"] == 1.0 and info["reward_components"][f"{NAME}/words"] == 1.0
    state = SEEN[-1]
    assert state.files == {"out.txt": "a b c\n"} and state.submitted == "done" and state.answer_key == "a b c"
    assert state.actions.tool_calls == 2 and state.actions.submitted and state.tests is None


def test_wrong_answer_scores_zero_and_is_the_agents_failure() -> None:
    info = play(task(), [call("write_file", path="out.txt", content="a b\n"), call("submit")])
    assert info["failure_mode"] == "wrong_answer" and info["reward_components"]["correctness@v1"] == 0.0
    assert info["reward_components"][f"{NAME}/present"] == 1.0


@pytest.mark.parametrize(("host", "fn", "why"), [
    ("testpkg.missing@v1", None, "unknown host-side verifier 'testpkg.missing@v1'"),
    ("testpkg.raises@v1", lambda s: 1 / 0, "host verifier testpkg.raises@v1 raised ZeroDivisionError"),
    ("testpkg.bad@v1", lambda s: "yes", "returned str"),
    ("testpkg.range@v1", lambda s: 1.5, "must be a finite number in [0, 1]"),
])
def test_a_broken_verifier_is_a_task_error_not_the_agents(host, fn, why) -> None:
    if fn is not None:
        register_verifier(host)(fn)
    info = play(task(host), [call("submit")])
    assert info["failure_mode"] == "task_error" and info["infra_failure"] and info["reward"] == 0.0
    assert why in info["outcome"].grade.task_error


def test_hidden_tests_run_in_the_sandbox_first_and_their_report_reaches_the_verifier() -> None:
    tests = {"test_out.py": "from pathlib import Path\n\ndef test_out():\n    assert Path('out.txt').exists()\n"}
    info = play(task(tests=tests, expected_tests=1), [call("write_file", path="out.txt", content="c b a"),
                                                       call("submit")])
    report = SEEN[-1].tests
    assert report is not None and report.passed == 1 and report.expected == 1
    assert info["outcome"].grade.tests_passed == 1 and info["outcome"].success


def test_task_validation_names_the_fix() -> None:
    with pytest.raises(TaskError, match="needs verifier.host"):
        Verifier(kind="host")
    with pytest.raises(TaskError, match="only read when verifier.kind='host'"):
        Verifier(kind="match", answer="1", host=NAME)
    record = task_to_dict(task())
    assert task_from_dict(record) == task()
    bad = {**record, "verifier": {**record["verifier"], "host": "no-version"}}
    problems = check_record(bad, file="t.jsonl", line=1)
    assert any(p.field == "verifier.host" and "name@vN" in p.message for p in problems)


def test_final_state_round_trips_through_json() -> None:
    state = FinalState(task_id="t", metadata={"k": [1, 2]}, submitted=None, files={"a.txt": "x"},
                       tests=Report(2, (Outcome("t.py::a", "passed"), Outcome("t.py::b", "failed", "no")),
                                        report_found=True),
                       actions=Actions(turns=3, tool_calls=2))
    assert FinalState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    with pytest.raises(ValueError, match="no field"):
        FinalState.from_dict({"bogus": 1})


def test_registration_is_versioned() -> None:
    with pytest.raises(ValueError, match="name@vN"):
        register_verifier("testpkg.words")
    with pytest.raises(ValueError, match="new version"):
        register_verifier(NAME)(lambda s: 0.0)
    assert score_state(NAME, FinalState(answer_key="a", files={"out.txt": "a"})).components == {"present": 1.0,
                                                                                                 "words": 1.0}


def test_golden_cases_catch_a_changed_verifier(tmp_path: Path) -> None:
    state = FinalState(answer_key="a b", files={"out.txt": "b a"})
    case = {"verifier": "testpkg.golden@v1", "state": state.to_dict(),
            "expected": {"score": 1.0, "components": {"present": 1.0, "words": 1.0}}}
    (tmp_path / "solved.json").write_text(json.dumps(case))
    register_verifier("testpkg.golden@v1", golden=tmp_path)(words_v1)
    only = {k: v for k, v in HOST_VERIFIERS.items() if k == "testpkg.golden@v1"}
    assert check_host_golden(only) == ([], 1)
    HOST_VERIFIERS["testpkg.golden@v1"] = HOST_VERIFIERS["testpkg.golden@v1"].__class__(
        "testpkg.golden@v1", lambda s: VerifierScore(0.5, {"present": 1.0, "words": 0.0}), tmp_path)
    problems, n = check_host_golden(only | {"testpkg.golden@v1": HOST_VERIFIERS["testpkg.golden@v1"]})
    assert n == 1 and len(problems) == 1 and "testpkg.golden@v1 changed on golden case solved" in problems[0]
    problems, _ = check_host_golden({NAME: HOST_VERIFIERS[NAME]})
    assert problems == [f"{NAME} has no golden cases; pass golden=DIR to register_verifier"]


def test_the_verifier_never_follows_a_symlink_out_of_the_real_sandbox() -> None:
    """The agent can plant a symlink to a host file; the verifier gets workspace data only."""
    from sandgym.sandbox.local import LocalSandbox

    try:
        LocalSandbox().close()
    except SandboxError as exc:
        pytest.skip(f"local sandbox unavailable: {exc}")
    t = task()
    env = ToolEnv(tasks=[t])
    try:
        env.reset(options={"task": t})
        env.step(call("bash", command="ln -s /etc/passwd out.txt; ln -s /etc secrets; echo a b c > real.txt"))
        _, _, terminated, _, info = env.step(call("submit"))
    finally:
        env.close()
    assert terminated and info["failure_mode"] == "wrong_answer"
    assert SEEN[-1].files == {"real.txt": "a b c\n"}

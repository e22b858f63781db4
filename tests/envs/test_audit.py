"""``sandgym rewards audit``: the attack battery, the audit's numbers and verdicts, and the CLI.

These tests assert what stays true whatever the grading path does: every attack is played and reported per family,
noop is the baseline, the hack list and exit code follow the numbers, and a deliberately vulnerable *scoring* path
(a check script that trusts a workspace file, a ``contains`` matcher) is caught. They never assert that a
particular built-in attack succeeds on the built-in suites (the grader is meant to stop them all).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sandgym.envs.builtin_tools import BUILTIN_TOOLS
from sandgym.envs.parsing import parse_turn
from sandgym.errors import ConfigError
from sandgym.rollout.audit import AuditResult, EpisodeRecord, _cells, audit, sample_tasks, write_report
from sandgym.rollout.audit_attacks import (
    ATTACKS,
    BASELINE,
    attack_names,
    entry_file,
    public_names,
    shown_cases,
)
from sandgym.tasks.load import task_to_dict
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Reference, Task, Verifier

STUB = "def f(x: int) -> int:\n    raise NotImplementedError\n"
VISIBLE = "from solution import f\n\n\ndef test_f():\n    assert f(1) == 2\n"
TRUSTING_SCRIPT = (  # trusts the workspace's visible test file, which the agent can rewrite
    "import json\n"
    "ns = {}\n"
    "try:\n"
    "    exec(compile(open('test_visible.py').read(), 'test_visible.py', 'exec'), ns)\n"
    "except Exception:\n"
    "    pass\n"
    "tests = [v for k, v in ns.items() if k.startswith('test_') and callable(v)]\n"
    "ok = 0\n"
    "for t in tests:\n"
    "    try:\n"
    "        t()\n"
    "        ok += 1\n"
    "    except Exception:\n"
    "        pass\n"
    "print(json.dumps({'score': ok / max(1, len(tests))}))\n"
)


def _weak_tests_task() -> Task:
    return Task(id="user/weak/0", domain="user", family="weak", split="train",
                prompt="Write `solution.py` defining `f(x: int) -> int` that returns x + 1.",
                verifier=Verifier(kind="tests", tests={"test_f.py": VISIBLE}, expected_tests=1),
                files={"solution.py": STUB}, metadata={"entry_file": "solution.py"})


def _trusting_script_task() -> Task:
    return Task(id="user/trusting/0", domain="user", family="trusting", split="train",
                prompt="Write `solution.py` defining `f(x: int) -> int` that returns x + 1.",
                verifier=Verifier(kind="script", script=TRUSTING_SCRIPT),
                files={"solution.py": STUB}, visible_tests={"test_visible.py": VISIBLE},
                metadata={"entry_file": "solution.py"})


def _contains_task() -> Task:
    return Task(id="user/choice/0", domain="user", family="choice", split="train",
                prompt="Which colour is the sky on a clear day: green, blue or red? Submit only the colour.",
                verifier=Verifier(kind="match", answer="blue", matcher="contains"))


def _rec(attack: str, family: str, reward: float, completed: bool = False, infra: bool = False) -> EpisodeRecord:
    return EpisodeRecord(attack, family, f"{family}/0", reward, completed, infra, "x", None, 0.1)


# ---------------------------------------------------------------------------------------------- no sandbox
def test_battery_covers_the_known_attacks_and_has_a_baseline() -> None:
    names = attack_names()
    assert names[0] == BASELINE
    for needed in ("planted_conftest", "planted_pytest_ini", "planted_sitecustomize", "fake_pytest",
                   "exit_at_import_os", "exit_at_import_sys", "always_equal", "always_true", "patched_builtins",
                   "pytest_runtest_noop", "pytest_report_patch", "pytest_reporter_gc", "forged_report_fds",
                   "edit_visible_tests", "output_flood", "sleep_past_limit", "background_process",
                   "read_hidden_files", "ptrace_all", "cross_episode"):
        assert needed in ATTACKS, needed
    assert all(ATTACKS[n].summary for n in names)
    assert "sleep_past_limit" not in attack_names(include_slow=False)
    assert [n for n in names if ATTACKS[n].cross_episode] == ["cross_episode"]


@pytest.mark.parametrize("spec", ["coding:train", "long_context:train"])
def test_every_plan_is_valid_tool_calls_and_never_uses_the_answer(spec: str) -> None:
    tools = {t.name for t in BUILTIN_TOOLS}
    for task in sample_tasks(spec, per_family=1):
        secrets = [src for src in task.verifier.tests.values()] + [src for src in task.verifier.traps.values()]
        if task.reference is not None:
            secrets += [s for s in task.reference.files.values() if s not in task.files.values()]
            if task.reference.answer and task.reference.answer not in task.prompt:
                secrets.append(task.reference.answer)
        for name in attack_names():
            turns = ATTACKS[name].plan(task)
            assert turns, name
            for turn in turns:
                parsed = parse_turn(turn)
                assert not parsed.errors and parsed.calls, (name, task.id, parsed.errors)
                assert {c.name for c in parsed.calls} <= tools
                for secret in secrets:
                    assert secret.strip() not in turn, f"{name} uses the hidden answer of {task.id}"
            assert parse_turn(turns[-1]).calls[-1].name == "submit", name


def test_attacks_find_the_entry_file_and_names_from_what_the_agent_sees() -> None:
    task = _weak_tests_task()
    assert entry_file(task) == "solution.py"
    assert public_names(task) == ["f"]
    repo = next(t for t in sample_tasks("coding/repo_fix:train", per_family=1))
    assert entry_file(repo).endswith(".py") and repo.metadata["function"] in public_names(repo)


def test_cells_hacks_and_drops_follow_the_numbers() -> None:
    recs = [_rec("noop", "a/x", 0.0), _rec("noop", "a/x", 0.0), _rec("noop", "a/y", 0.8),
            _rec("always_equal", "a/x", 1.0, True), _rec("always_equal", "a/x", 0.0),  # mean 0.5: hack
            _rec("always_equal", "a/y", 0.85),  # +0.05 <= margin: no hack
            _rec("ptrace_all", "a/x", 0.05), _rec("ptrace_all", "a/x", 0.0),  # within margin
            _rec("ptrace_all", "a/y", 0.7, completed=True),  # completes more than noop: hack
            _rec("ptrace_infra", "a/x", 0.0, infra=True), _rec("ptrace_infra", "a/x", 0.0),
            _rec("ptrace_infra", "a/y", 0.8)]
    attacks = [ATTACKS[n] for n in ("noop", "always_equal", "ptrace_all", "ptrace_infra")]
    cells = _cells(recs, attacks, ["a/x", "a/y"], margin=0.1)
    result = AuditResult("s", None, 2, 0, True, 0.1, [a.name for a in attacks], ["a/x", "a/y"], cells, recs)
    assert result.hacks == [("always_equal", "a/x"), ("ptrace_all", "a/y")]
    assert result.drops == [("ptrace_infra", "a/x")]
    assert not result.clean
    c = result.cell("always_equal", "a/x")
    assert (c.episodes, c.mean_reward, c.completion_rate, c.noop_reward) == (2, 0.5, 0.5, 0.0)
    assert result.cell("noop", "a/y").hacked is False
    rows = {r[0]: r[1:] for r in result.table_rows()}
    assert rows["always_equal"] == ["0.50 HACK", "0.85"] and rows["ptrace_infra"][0] == "0.00 DROP"
    clean = AuditResult("s", None, 2, 0, True, 0.1, ["noop"], ["a/x"], _cells(recs[:2], attacks[:1], ["a/x"], 0.1))
    assert clean.clean and "No attack scores above noop" in clean.to_markdown()


def test_report_files(tmp_path: Path) -> None:
    recs = [_rec("noop", "a/x", 0.0), _rec("always_equal", "a/x", 1.0, True)]
    attacks = [ATTACKS["noop"], ATTACKS["always_equal"]]
    result = AuditResult("s", None, 1, 0, True, 0.1, ["noop", "always_equal"], ["a/x"],
                         _cells(recs, attacks, ["a/x"], 0.1), recs)
    js, md = write_report(result, tmp_path / "out")
    data = json.loads(js.read_text())
    assert data["hacks"] == [["always_equal", "a/x"]] and len(data["episodes"]) == 2
    assert "| always_equal | 1.00 HACK |" in md.read_text() and "## Findings" in md.read_text()
    with pytest.raises(ConfigError, match="is a file"):
        write_report(result, js)


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown attack"):
        audit([_weak_tests_task()], attacks=["no_such_attack"])
    with pytest.raises(ConfigError, match="per_family"):
        audit([_weak_tests_task()], per_family=0)


def test_cli_exit_code_follows_the_hack_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import sandgym.rollout.cli as audit_mod  # the command calls the audit it imported
    from sandgym.cli import main

    attacks = [ATTACKS["noop"], ATTACKS["always_equal"]]

    def fake(reward: float):
        def run(suite, **kwargs):
            kwargs["progress"]("attack 1/2 noop: done")
            recs = [_rec("noop", "a/x", 0.0), _rec("always_equal", "a/x", reward)]
            return AuditResult(suite, None, 1, 0, True, 0.1, ["noop", "always_equal"], ["a/x"],
                               _cells(recs, attacks, ["a/x"], 0.1), recs)
        return run

    monkeypatch.setattr(audit_mod, "audit", fake(1.0))
    assert main(["rewards", "audit", "coding:train", "--out", str(tmp_path / "a")]) == 1
    out, err = capsys.readouterr()
    assert "always_equal on a/x" in out and "attack 1/2" in err and str(tmp_path / "a" / "audit.md") in out
    monkeypatch.setattr(audit_mod, "audit", fake(0.0))
    assert main(["rewards", "audit", "coding:train", "--out", str(tmp_path / "b")]) == 0
    assert "no attack scores above noop" in capsys.readouterr().out
    assert (tmp_path / "b" / "audit.json").exists()
    assert main(["rewards", "audit", "coding:train", "--attacks", "nope"]) == 2
    assert main(["rewards", "audit", "--list"]) == 0
    assert "ptrace_all" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- real sandbox
def test_battery_end_to_end_on_two_families(local_ok) -> None:
    """Every quick attack is played on a coding and a long-context family and reported per family; noop is 0."""
    lines: list[str] = []
    tasks = sample_tasks("coding/strings:train", 1) + sample_tasks("long_context/needle:train", 1)
    result = audit(tasks, per_family=1, attacks=attack_names(include_slow=False), progress=lines.append)
    names = attack_names(include_slow=False)
    assert result.attacks == names and result.families == ["coding/strings", "long_context/needle"]
    assert len(result.cells) == len(names) * 2 and len(result.episodes) == len(names) * 2
    assert len(lines) == len(names) and lines[-1].startswith(f"attack {len(names)}/{len(names)}")
    for fam in result.families:
        base = result.cell(BASELINE, fam)
        assert base.mean_reward == 0.0 and base.completion_rate == 0.0 and base.infra_rate == 0.0
        for name in names:
            c = result.cell(name, fam)
            assert c.episodes == 1 and c.noop_reward == 0.0
            assert c.hacked == (c.mean_reward > result.margin or c.completion_rate > 0), c
            assert c.dropped == (c.infra_rate > 0), c
    assert not any(e.failure_mode == "harness_error" for e in result.episodes), \
        [e for e in result.episodes if e.error]
    assert set(result.hacks) == {(c.attack, c.family) for c in result.cells if c.hacked}


def test_a_vulnerable_scoring_path_is_flagged(local_ok, tmp_path: Path) -> None:
    """A user's JSONL suite: a check script that trusts a workspace file and a ``contains`` matcher are hacked; the
    weak ``assert f(1) == 2`` test task is reported with the same rule (flagged exactly when it beats noop)."""
    path = tmp_path / "weak.jsonl"
    path.write_text("".join(json.dumps(task_to_dict(t)) + "\n"
                            for t in (_trusting_script_task(), _contains_task(), _weak_tests_task())))
    result = audit(str(path), per_family=1, reuse=False,
                   attacks=["edit_visible_tests", "answer_spray", "always_equal", "exit_at_import_os"])
    assert result.families == ["user/trusting", "user/choice", "user/weak"]
    assert ("edit_visible_tests", "user/trusting") in result.hacks
    assert ("answer_spray", "user/choice") in result.hacks
    assert result.cell("edit_visible_tests", "user/trusting").mean_reward > 0.9
    assert result.cell(BASELINE, "user/trusting").mean_reward == 0.0
    weak = result.cell("always_equal", "user/weak")
    assert weak.hacked == (weak.mean_reward - weak.noop_reward > result.margin or weak.completion_rate > 0)
    assert ("exit_at_import_os", "user/weak") not in result.hacks  # os._exit(0) gives no report: 0


ANSWER_SCRIPT = "import json\nprint(json.dumps({'score': float(open('answer.txt').read().strip() == '42')}))\n"


def test_forgeries_that_excluded_failures_neither_hack_nor_drop(local_ok, tmp_path: Path) -> None:
    """The two forgeries that turned failures into excluded episodes (a blanked traceback passing an
    import error off as the verifier's; a directory at answer.txt breaking the script verifier's input) are in the
    battery, and on a tests task and a script task they neither beat noop nor cause an infra failure."""
    script = Task(id="user/answer/0", domain="user", family="answer", split="train", prompt="What is 6 * 7?",
                  verifier=Verifier(kind="script", script=ANSWER_SCRIPT))
    path = tmp_path / "mixed.jsonl"
    tests = replace(_weak_tests_task(), reference=Reference(files={"solution.py": "def f(x):\n    return x + 1\n"}))
    path.write_text("".join(json.dumps(task_to_dict(t)) + "\n" for t in (tests, script)))
    result = audit(str(path), per_family=1, reuse=False, attacks=["forged_task_error", "blocked_answer_path"])
    assert result.families == ["user/weak", "user/answer"]
    for cell in result.cells:
        assert not cell.dropped and cell.infra_rate == 0.0, cell
    assert result.hacks == []


def test_cross_episode_attack_runs_two_episodes_in_a_reused_sandbox(local_ok) -> None:
    result = audit(sample_tasks("coding/numbers:train", 1), per_family=1, attacks=["cross_episode"])
    rec = next(e for e in result.episodes if e.attack == "cross_episode")
    assert rec.first_reward is not None and not rec.error
    assert result.hacks == []  # what episode N planted (anywhere it could write) does not help episode N+1
    assert audit(sample_tasks("coding/numbers:train", 1), per_family=1, attacks=["cross_episode"],
                 reuse=False).attacks == [BASELINE]


def test_hard_coding_what_the_agent_is_shown_beats_noop_nowhere(local_ok) -> None:
    """An exploit regression: answering the shown inputs (visible tests, the prompt's example, a bug report) from a
    lookup table earned 2 of 6 hidden tests on the function families before the fix; now nothing is graded that
    the agent was shown."""
    if not local_ok:
        pytest.skip("the local sandbox cannot run here")
    families = ("strings", "parsing", "bugfix", "by_example", "repo_fix")
    tasks = [t for f in families for t in load_suite(f"coding/{f}:heldout", n=2, seed=5, difficulty=1)]
    assert all(shown_cases(t) for t in tasks)
    result = audit(tasks, per_family=2, attacks=["noop", "hard_code_shown"])
    assert not result.hacks and not result.drops, result.to_markdown()
    assert all(result.cell("hard_code_shown", f).completion_rate == 0.0 for f in result.families)


@pytest.mark.slow
def test_audit_sample_of_every_builtin_suite(local_ok) -> None:
    """CI-sized sample (1 task per family, quick attacks) of every built-in suite; prints the table.

    ``shadow_stdlib`` is left out here only for time: its planted ``subprocess.py`` makes the service_queue tests
    wait out their 40 s limit."""
    quick = [n for n in attack_names(include_slow=False) if n != "shadow_stdlib"]
    for spec in ("coding:train", "long_context:train"):
        result = audit(spec, per_family=1, attacks=quick)
        print(result.to_markdown())
        for fam in result.families:
            assert result.cell(BASELINE, fam).completion_rate == 0.0
        assert len(result.cells) == len(result.attacks) * len(result.families)
        # the grading fix holds on every built-in suite: no attack beats noop, none gets an episode dropped
        assert not result.hacks and not result.drops, result.to_markdown()

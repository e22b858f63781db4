"""The evaluation report's trap breakdown: the oracle fails no trap, a plausible-but-wrong agent (right on the main
tests, wrong on edge cases) fails some, and tasks without traps stay out of the trap rate."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.scripted import OracleAgent
from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.policies import PolicyInfo
from sandgym.evaluate.report import markdown
from sandgym.evaluate.run import evaluate_policy
from sandgym.tasks.registry import load_suite
from sandgym.tasks.suites.base import function_task
from sandgym.tasks.task import Reference, Task
from tests.tasks.test_traps import WRONG, _tpl


def _tasks() -> tuple[list[Task], dict[str, str]]:
    tasks, wrong = [], {}
    for i, (table, key, body) in enumerate(WRONG):
        problem = _tpl(table, key).instantiate(random.Random(f"traps-demo/{key}"))
        task = function_task(problem, family="trapdemo", split="heldout", seed=0, difficulty=1, index=i)
        tasks.append(task)
        wrong[task.id] = f"{problem.signature}\n{body}"
    tasks += load_suite("coding/numbers:heldout", n=2, seed=0) + load_suite("long_context/needle:heldout", n=1, seed=0)
    return tasks, wrong


TASKS, WRONG_SOURCE = _tasks()


class TrapBlindAgent(OracleAgent):
    """Writes a plausible-but-wrong solution where one is known (else the reference), like the oracle."""

    def reset(self, task: Task) -> None:
        if task.id in WRONG_SOURCE:
            task = replace(task, reference=Reference(files={"solution.py": WRONG_SOURCE[task.id]}))
        super().reset(task)


def _eval(agent: type, tmp_path, name: str) -> dict:
    cfg = EvalConfig(policy="oracle", suites=("coding/numbers:heldout",), samples=1, seeds=(0,), out=str(tmp_path))
    rows = evaluate_policy(ScriptedPolicy(agent), PolicyInfo(name, "scripted", name), cfg, tmp_path / name,
                           tasks=TASKS)
    assert len(rows) == len(TASKS) and not any(r.infra_failure for r in rows)
    assert [r.traps_failed is None for r in rows] == [t.domain != "coding" for t in TASKS]
    return aggregate(rows, samples=1)


@pytest.fixture(scope="module")
def local_ok() -> None:
    try:
        from sandgym.sandbox.local import LocalSandbox

        LocalSandbox().close()
    except Exception as exc:  # no namespaces here: the sandbox's own tests cover that
        pytest.skip(f"local sandbox unavailable: {exc}")


@pytest.mark.usefixtures("local_ok")
def test_trap_failure_rate_oracle_zero_plausible_wrong_positive(tmp_path) -> None:
    oracle = _eval(OracleAgent, tmp_path, "oracle")
    assert oracle["traps"]["episodes"] == len(TASKS) - 1
    assert oracle["traps"]["trap_failure_rate"]["value"] == 0.0
    assert oracle["traps"]["main_failure_rate"]["value"] == 0.0

    blind = _eval(TrapBlindAgent, tmp_path, "blind")
    assert blind["overall"]["completion"]["value"] == 1.0, "main tests all pass: completion ignores traps"
    assert blind["traps"]["main_failure_rate"]["value"] == 0.0
    assert blind["traps"]["trap_failure_rate"]["value"] > 0.0

    assert "Trap-test failure rate" in markdown(blind)

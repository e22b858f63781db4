"""Per-turn credit for a search that shows the question's evidence (``evidence@v1``,
``ToolEnv(turn_rewards=True, turn_term="evidence@v1")``): what pays, and the forgeries that must not."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest

from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.rollout import RolloutConfig, rollout
from sandgym.agents.scripted import call
from sandgym.envs.builtin_tools import GREP_LINE_CHARS
from sandgym.envs.evidence import MAX_LINES, declared_evidence, shown_lines
from sandgym.envs.rewards import INTERMEDIATE_DEFAULT_WEIGHT
from sandgym.envs.tool_env import ToolEnv
from sandgym.envs.turn_terms import TURN_TERMS, TurnTermName
from sandgym.errors import ConfigError
from sandgym.tasks.suites.long_context import FAMILIES, make_family
from sandgym.tasks.task import Task
from sandgym.train.advantages import turn_rewards
from sandgym.train.config import load_config
from sandgym.train.domains import DomainMixer
from sandgym.train.metrics import step_metrics

W = INTERMEDIATE_DEFAULT_WEIGHT
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def multihop(tokens: int = 1024) -> Task:
    return make_family("multihop")("train", 1, 0, 1, tokens=tokens, placement="file")[0]


def env_for(task: Task, factory, **kwargs: Any) -> ToolEnv:
    kwargs.setdefault("tools", None)
    return ToolEnv([task], sandbox_factory=factory, turn_rewards=True, turn_term="evidence@v1", **kwargs)


def play(env: ToolEnv, task: Task, turns: list[str]) -> list[dict[str, Any]]:
    env.reset(options={"task": task})
    infos = []
    for text in turns:
        _, _, term, trunc, info = env.step(text)
        infos.append(info)
        if term or trunc:
            break
    return infos


def doc_lines(task: Task) -> list[str]:
    return task.files[task.metadata["document"]].splitlines()


def test_each_family_declares_the_lines_its_answer_rests_on() -> None:
    for spec in FAMILIES:
        for task in spec.make("heldout", 4, 0, 1, tokens=4096, placement="file"):
            lines, ev = doc_lines(task), task.metadata["evidence"]
            shown = [lines[n - 1] for n in ev]
            if spec.name == "needle":
                assert len(shown) == 1 and task.reference.answer in shown[0]
            elif spec.name == "multihop":
                chain = task.metadata["chain"]
                assert len(shown) == len(chain) and any(task.reference.answer in s for s in shown)
            elif spec.name == "tracking":
                assert ev == [c["line"] for c in task.metadata["checkpoints"]]
            elif spec.name == "aggregation":
                assert all(f"region={task.metadata['region']} " in s and s.endswith("paid") for s in shown)
            else:
                assert shown[0].startswith("POLICY") and len(shown) == 6


def test_narrow_searches_earn_on_the_turn_they_find_evidence(fake_factory) -> None:
    task = multihop()
    lines, ev, chain = doc_lines(task), task.metadata["evidence"], task.metadata["chain"]
    doc = task.metadata["document"]
    env = env_for(task, fake_factory)
    infos = play(env, task, [
        call("grep", pattern=f"service {chain[0]} forwards", path=doc, fixed_strings=True),
        call("grep", pattern=f"service {chain[0]} forwards", path=doc, fixed_strings=True),  # repeat: nothing
        call("grep", pattern="^NOTE: service", path="logs"),
        call("submit", answer=task.reference.answer),
    ])
    n = len(ev)
    assert [i["turn_reward"] for i in infos] == pytest.approx([W / n, 0.0, W * (n - 1) / n, 0.0])
    final = infos[-1]
    assert final["outcome"].grade.answer_matched and final["reward_components"]["evidence@v1"] == 1.0
    assert final["outcome"].intermediate_expected == n
    assert all(lines[k - 1].startswith("NOTE") for k in ev)
    assert "after update" not in env.messages[0]["content"]  # the term has no prompt hint


def test_the_step_reward_never_includes_the_term(fake_factory) -> None:
    task = multihop()
    turns = [call("grep", pattern="NOTE", path="."), call("submit", answer="wrong")]
    on = play(env_for(task, fake_factory), task, turns)
    off = play(ToolEnv([task], sandbox_factory=fake_factory), task, turns)
    assert on[0]["turn_reward"] > 0 and on[-1]["reward_components"]["correctness@v1"] == 0.0
    assert on[-1]["outcome"].failure_mode == off[-1]["outcome"].failure_mode == "wrong_answer"


def test_forged_or_broad_views_of_the_evidence_earn_nothing(fake_factory) -> None:
    """Exploits tried: rewrite the document with the evidence lines and read them back, print them from code,
    read the whole document, grep a pattern matching every line, search another file holding them, page through
    the whole document with many narrow reads in one turn."""
    task = multihop()
    doc, lines = task.metadata["document"], doc_lines(task)
    evidence = "\n".join(lines[n - 1] for n in task.metadata["evidence"])
    env = env_for(task, fake_factory, code_action="python")
    infos = play(env, task, [
        call("write_file", path=doc, content=evidence + "\n"),
        call("read_file", path=doc, start_line=1, end_line=MAX_LINES),
        call("write_file", path="copy.log", content=evidence + "\n") + call("grep", pattern="NOTE", path="copy.log"),
        f"```python\nprint({evidence!r})\n```",
        call("read_file", path=doc, start_line=1, end_line=len(lines)),
        call("grep", pattern=".", path=doc),
        "".join(call("read_file", path=doc, start_line=k, end_line=k + 9) for k in range(1, len(lines), 10)),
        call("submit", answer="wrong"),
    ])
    assert "NOTE" in env.messages[5]["content"]  # the forged read showed the lines...
    assert [i["turn_reward"] for i in infos] == [0.0] * 8  # ...and earned nothing
    assert infos[-1]["reward_components"]["evidence@v1"] == 0.0


def test_shown_lines_reads_the_tools_output_and_checks_it_against_the_pristine_document() -> None:
    pristine = ["alpha", "Beta one", "beta two", "gamma"]
    grep = "d.log:2:Beta one\nd.log:3:beta two\nother.log:1:gamma"
    assert shown_lines("grep", {"pattern": "beta", "ignore_case": True}, grep, "d.log", pristine) == (2, {2, 3})
    assert shown_lines("grep", {}, "d.log:3:beta TWO", "d.log", pristine) == (1, set())  # not the pristine text
    assert shown_lines("grep", {}, "d.log:9:beta two", "d.log", pristine) == (1, set())  # no such line
    assert shown_lines("grep", {}, "[no matches for 'x' under d.log]", "d.log", pristine) == (0, set())
    page = "[d.log: lines 3-4 of 4]\n3| beta two\n4| gamma"
    assert shown_lines("read_file", {"path": "d.log"}, page, "d.log", pristine) == (2, {3, 4})
    assert shown_lines("read_file", {"path": "copy.log"}, page, "d.log", pristine) == (0, set())
    assert shown_lines("read_file", {"path": 7}, page, "d.log", pristine) == (0, set())
    assert shown_lines("python", {"code": "print(1)"}, grep, "d.log", pristine) == (0, set())
    long = "x" * 400
    cut = "d.log:1:" + long[: GREP_LINE_CHARS - len("d.log:1:")] + " ..."  # the grep tool shortens long lines
    assert shown_lines("grep", {}, cut, "d.log", [long]) == (1, {1})
    assert shown_lines("grep", {}, "d.log:1:xx ...", "d.log", [long]) == (1, set())  # only the tool's own cut


def test_an_unknown_turn_term_names_the_registered_ones() -> None:
    assert set(get_args(TurnTermName)) == set(TURN_TERMS)
    with pytest.raises(ConfigError, match=r"turn_term='evidence@v9'.*evidence@v1.*intermediate@v1"):
        ToolEnv([multihop()], turn_term="evidence@v9")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"turn_term.*evidence@v9"):  # a training config fails when it loads
        load_config(str(EXAMPLES / "long_context_lengths.toml"),
                    ['rollout.env_kwargs={turn_rewards=true, turn_term="evidence@v9"}'])


class _OneTurnAgent:
    """Greps the chain's first link and submits the right answer in the same turn."""

    def reset(self, task: Task) -> None:
        self.task = task

    def act(self, observation: str, info: dict[str, Any]) -> str:
        first = self.task.metadata["chain"][0]
        return (call("grep", pattern=f"service {first} forwards", path=self.task.metadata["document"])
                + call("submit", answer=self.task.reference.answer))


def test_credit_paid_on_the_last_turn_reaches_the_trajectory(fake_factory) -> None:
    """A term paid only on the episode's last turn is kept (per-step advantages would otherwise drop it)."""
    task = multihop()
    cfg = RolloutConfig(max_new_tokens=256, max_total_tokens=100_000, max_turns=4, seed=0)
    (traj,) = rollout(ScriptedPolicy(_OneTurnAgent), lambda: env_for(task, fake_factory), [task], config=cfg)
    assert traj.success and traj.num_turns == 1
    assert traj.metadata["turn_rewards"] == pytest.approx([traj.reward + W / len(task.metadata["evidence"])])
    assert turn_rewards(traj) == traj.metadata["turn_rewards"]
    mixer = DomainMixer(tasks={"long_context": [task]}, weights={"long_context": 1.0})
    m = step_metrics(1, [traj], [traj], None, 1.0, 1.0, mixer)
    assert m["rollout/turn_reward_mean"] == pytest.approx(W / len(task.metadata["evidence"]))


def test_every_episode_counts_the_evidence_it_found_even_when_the_term_is_not_paid(fake_factory) -> None:
    """``Actions.evidence_found`` / ``evidence_declared``: the behaviour metric behind ``evidence_found``."""
    task = multihop()
    chain, doc, n = task.metadata["chain"], task.metadata["document"], len(task.metadata["evidence"])
    env = ToolEnv([task], sandbox_factory=fake_factory)  # no per-turn reward
    infos = play(env, task, [
        call("grep", pattern=f"service {chain[0]} forwards", path=doc, fixed_strings=True),
        call("grep", pattern="NOTE", path=doc, fixed_strings=True, ignore_case=False),
        call("submit", answer="wrong"),
    ])
    assert "turn_reward" not in infos[0]
    assert infos[0]["actions"].evidence_found == 1 and infos[0]["actions"].evidence_declared == n
    actions = infos[-1]["outcome"].actions
    assert (actions.evidence_found, actions.evidence_declared) == (n, n)
    plain = make_family("needle")("train", 1, 0, 1, tokens=1024, placement="inline")[0]
    assert declared_evidence(plain.metadata) == 0  # an inline document is not searched: nothing declared


def test_an_episode_with_no_turn_records_no_turn_rewards() -> None:
    """The last-turn rule (credit paid only on the last turn is kept) must not mark an episode that never took a
    turn (e.g. its env failed to reset) as paid: its metadata stays without ``turn_rewards``."""
    import torch

    from sandgym.agents._episode import Episode

    ep = Episode(0, multihop(), 0, 0, torch.Generator(), 0, RolloutConfig(), None)
    ep.fail_infra("env reset failed")
    traj = ep.trajectory()
    assert traj.num_turns == 0 and "turn_rewards" not in traj.metadata

"""DAgger-style relabelling: the oracle continues the policy's own episodes from the state they reached, and only
its continuation is trained on (``sft.source`` = the policy's episodes)."""

from __future__ import annotations

import json

import pytest

from sandgym.agents.scripted import ContinuationAgent, OracleAgent, call, run_episode, search_hits
from sandgym.envs.parsing import parse_turn
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError
from sandgym.tasks.registry import load_suite
from sandgym.train.config import load_config

SUITE = "long_context:train?tokens=4096&placement=file"


def multihop(n: int = 4) -> list:
    return [t for t in load_suite(SUITE, n=40, seed=0, difficulty=1) if t.family == "multihop"][:n]


@pytest.fixture
def env():
    e = ToolEnv(tasks=[], code_action=None, max_turns=6)
    yield e
    e.close()


def grep(task, pattern: str) -> str:
    return call("grep", pattern=pattern, path=task.metadata["document"], fixed_strings=True)


def said(result) -> list:
    return [c for m in result.messages if m["role"] == "assistant" for c in parse_turn(m["content"]).calls]


def test_search_hits_are_the_lines_the_grep_shows() -> None:
    task = multihop(1)[0]
    first = task.metadata["chain"][0]
    hits = search_hits(task, grep(task, f"service {first} forwards"))
    lines = task.files[task.metadata["document"]].splitlines()
    assert len(hits) == 1 and f"service {first} forwards" in lines[hits[0] - 1]
    assert search_hits(task, grep(task, "no such text anywhere")) == []
    assert search_hits(task, call("submit", answer="x")) is None
    assert search_hits(task, "prose, not a call") is None


def test_the_continuation_reads_on_from_the_policys_searches_and_submits_the_answer(env) -> None:
    for task in multihop():
        chain = task.metadata["chain"]
        # the policy's own broader searches show the first two hops' notes (and more), then it would have guessed
        prefix = [grep(task, f"service {chain[0]}"), grep(task, f"service {chain[1]}")]
        result = run_episode(env, ContinuationAgent({task.id: prefix}), task)
        calls = said(result)
        assert result.success, (task.id, [(c.name, c.arguments) for c in calls])
        rest = calls[len(prefix):]
        patterns = [c.arguments["pattern"] for c in rest if c.name == "grep"]
        # no search repeats what the prefix showed: the next hop's note is the first one not yet in view
        assert f"service {chain[0]} forwards" not in patterns and f"service {chain[1]} forwards" not in patterns
        assert rest[-1].name == "submit" and rest[-1].arguments["answer"] == task.reference.answer
        oracle = run_episode(env, OracleAgent(), task)
        assert len(calls) <= len(said(oracle))  # never longer than the oracle's own plan from scratch


def test_a_prefix_that_already_shows_the_answer_line_is_continued_by_the_submit(env) -> None:
    task = multihop(1)[0]
    chain = task.metadata["chain"]
    prefix = [grep(task, f"service {c}") for c in chain]  # every note of the chain, the stores line included
    result = run_episode(env, ContinuationAgent({task.id: prefix}), task)
    calls = said(result)
    assert result.success and len(calls) == len(prefix) + 1 and calls[-1].name == "submit"


def test_the_end_of_the_chain_is_searched_for_not_known_from_the_oracle(env) -> None:
    """Skipping the last hop's empty search on the oracle's knowledge would teach stopping a chain at a guess."""
    task = multihop(1)[0]
    chain = task.metadata["chain"]
    prefix = [grep(task, f"service {c} forwards") for c in chain[:-1]]  # every hop but the end, narrowly
    calls = said(run_episode(env, ContinuationAgent({task.id: prefix}), task))
    patterns = [c.arguments.get("pattern", c.arguments.get("answer")) for c in calls]
    assert patterns[len(prefix):] == [f"service {chain[-1]} forwards", f"service {chain[-1]} stores",
                                      task.reference.answer]


def test_without_a_prefix_the_continuation_is_the_oracle(env) -> None:
    task = multihop(1)[0]
    result = run_episode(env, ContinuationAgent({}), task)
    assert result.success and said(result)[-1].arguments["answer"] == task.reference.answer


def continued(env, task, prefix) -> list:
    """The continuation's calls after ``prefix``."""
    return said(run_episode(env, ContinuationAgent({task.id: prefix}), task))[len(prefix):]


def test_equal_lines_are_distinct_evidence_a_copy_shown_does_not_show_the_others() -> None:
    """A tracked variable's updates repeat (two ``UPDATE x += 3``): reading one of them is not reading the other."""
    from sandgym.envs.builtin_tools import builtin_tools

    env = ToolEnv(tasks=[], code_action=None, max_turns=30, tools=builtin_tools(["grep", "read_file", "submit"]))
    tasks = [t for t in load_suite(SUITE, n=40, seed=0, difficulty=1) if t.family == "tracking"]
    tried = 0
    try:
        for task in tasks:
            doc, var = task.metadata["document"], task.metadata["variable"]
            lines = task.files[doc].splitlines()
            first: dict[str, int] = {}
            for n, line in enumerate(lines, 1):
                if line.startswith((f"SET {var} ", f"UPDATE {var} ")):
                    first.setdefault(line, n)
            evidence = sum(line.startswith((f"SET {var} ", f"UPDATE {var} ")) for line in lines)
            if len(first) == evidence or tried == 2:
                continue
            tried += 1  # every distinct text has been read once, but not every line: the search is still needed
            rest = continued(env, task, [call("read_file", path=doc, start_line=n, end_line=n) for n in first.values()])
            assert [c.name for c in rest] == ["grep", "submit"], (task.id, rest)
            every = [call("read_file", path=doc, start_line=n, end_line=n) for n, line in enumerate(lines, 1)
                     if line.startswith((f"SET {var} ", f"UPDATE {var} "))]
            assert [c.name for c in continued(env, task, every)] == ["submit"]  # every one of them read: submit
    finally:
        env.close()
    assert tried


def test_text_that_only_echoes_a_line_or_a_rejected_search_proves_nothing(env) -> None:
    task = multihop(1)[0]
    doc, chain = task.metadata["document"], task.metadata["chain"]
    hop = f"service {chain[0]} forwards"
    note = f"NOTE: {hop} all of its requests to service {chain[1]}."
    echoed = [call("grep", pattern=note + " (verified)", path=doc, fixed_strings=True)]  # "[no matches for '...']"
    assert [c.arguments.get("pattern") for c in continued(env, task, echoed)][0] == hop
    rejected = [call("grep", pattern=f"service {chain[-1]}", path=doc, fixed_strings=True, max_count=5)]
    patterns = [c.arguments.get("pattern") for c in continued(env, task, rejected)]
    assert f"service {chain[-1]} forwards" in patterns  # a bad-arguments error is no complete search


def test_a_page_read_shows_its_lines(env) -> None:
    task = multihop(1)[0]
    doc, chain = task.metadata["document"], task.metadata["chain"]
    n = next(i for i, line in enumerate(task.files[doc].splitlines(), 1) if f"service {chain[0]} forwards" in line)
    rest = continued(env, task, [call("read_file", path=doc, start_line=max(1, n - 3), end_line=n + 3)])
    assert rest[0].arguments["pattern"] == f"service {chain[1]} forwards"


def test_a_prefix_too_long_for_the_tasks_turn_cap_falls_back_to_the_plain_oracle(tiny_tokenizer) -> None:
    """The task's own cap (8 turns at d1) cuts the wide run short of telling the excess: the last try keeps none."""
    from sandgym.train.relabel import continuations

    task = multihop(1)[0]
    cfg = load_config(None, ["sft.source=\"e.jsonl\"", "rollout.max_turns=8", "rollout.code_action=\"none\"",
                             "rollout.tools=[\"grep\", \"read_file\", \"submit\"]", "rollout.max_total_tokens=16384",
                             "domains.mix=[{suite=\"" + SUITE + "\", n_tasks=40, difficulty=1}]"])
    prefix = (call("read_file", path=task.metadata["document"], end_line=5),) * 7  # ran out of its 8 turns
    relabelled, counts = continuations(cfg, tiny_tokenizer, [(task.id, prefix)])
    assert [r.kept for r in relabelled] == [0] and counts["gave_up"] == 0


def test_a_bad_episodes_line_is_named(tmp_path) -> None:
    from sandgym.train.relabel import policy_prefixes

    (tmp_path / "e.jsonl").write_text(json.dumps(eval_row("t", ["a", "b"])) + "\n{not json\n")
    with pytest.raises(ConfigError, match=r"e.jsonl:2: not JSON"):
        policy_prefixes(tmp_path / "e.jsonl")


def test_a_test_and_fix_continuation_fixes_a_failing_block_and_submits_a_passing_one() -> None:
    from sandgym.agents.scripted import fenced
    from sandgym.envs.factory import tool_env_factory

    env = tool_env_factory(code_action="test", tools=["submit"], max_turns=4)()
    try:
        task = next(t for t in load_suite("coding/strings:train", n=8, seed=0, difficulty=1) if t.visible_tests)
        reference = fenced(task.reference.files[task.metadata.get("entry_file", "solution.py")])
        broken = fenced("def nothing():\n    return None\n")
        fixed = run_episode(env, ContinuationAgent({task.id: [broken]}, "fix"), task)
        turns = [m["content"] for m in fixed.messages if m["role"] == "assistant"]
        assert fixed.success and turns == [broken, reference, "SUBMIT"]  # never the planted bug of a fix demo
        passed = run_episode(env, ContinuationAgent({task.id: [reference]}, "fix"), task)
        assert passed.success and [m["content"] for m in passed.messages if m["role"] == "assistant"] == [
            reference, "SUBMIT"]  # what passed its visible tests is submitted, not rewritten
    finally:
        env.close()


def episodes_file(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def eval_row(task_id: str, texts: list[str]) -> dict:
    return {"task_id": task_id, "success": False,
            "trajectory": {"task_id": task_id, "turns": [{"text": t, "observation": ""} for t in texts]}}


def test_relabelled_samples_train_only_the_continuation(tmp_path, tiny_model_dir) -> None:
    from transformers import AutoTokenizer

    from sandgym.train.relabel import continuations, policy_prefixes, trained_mask

    tasks = multihop(3)
    a, b, c = tasks
    rows = [
        eval_row(a.id, [grep(a, f"service {a.metadata['chain'][0]}"), call("submit", answer="further")]),
        eval_row(b.id, [call("read_file", path=b.metadata["document"], end_line=5)] * 6),  # ran out of turns
        eval_row(c.id, [call("submit", answer="guess")]),
        eval_row("long_context/multihop/heldout/d1/s1-0-t4096-file", [call("submit", answer="x")]),  # not trained on
    ]
    src = episodes_file(tmp_path / "episodes.jsonl", rows)
    cfg = load_config(None, [f"model.name={json.dumps(str(tiny_model_dir))}", f"sft.source={json.dumps(src)}",
                             "sft.relabel=\"last_state\"", "rollout.max_turns=6", "rollout.code_action=\"none\"",
                             "rollout.tools=[\"grep\", \"read_file\", \"submit\"]", "rollout.max_total_tokens=16384",
                             "domains.mix=[{suite=\"" + SUITE + "\", n_tasks=40, difficulty=1}]"])
    prefixes = policy_prefixes(tmp_path / "episodes.jsonl")
    assert [len(p) for _, p in prefixes] == [1, 5, 0, 0]  # every turn but the one that ended the episode
    relabelled, counts = continuations(cfg, AutoTokenizer.from_pretrained(tiny_model_dir), prefixes)
    assert counts["skipped_unknown_task"] == 1
    kept = {r.trajectory.task_id: r.kept for r in relabelled}
    assert kept[a.id] == 1 and kept[c.id] == 0
    assert 0 <= kept[b.id] < 5  # five useless reads leave no room for the chain's hops in six turns: fewer kept
    for r in relabelled:
        t = r.trajectory
        assert t.success and t.num_turns <= 6
        mask = trained_mask(r)
        assert r.trained == tuple(range(r.kept, t.num_turns))
        assert len(mask) == len(t.token_ids) and sum(mask) > 0
        policy_tokens = sum(len(x.completion_token_ids) for x in t.turns[: r.kept])
        assert sum(mask) == sum(t.action_mask) - policy_tokens  # the policy's turns stay context only


def test_every_state_the_policy_visited_gets_the_oracles_turn(tmp_path, tiny_model_dir) -> None:
    """DAgger proper: the policy's turns that are the oracle's are trained; each one that is not gets a sample of
    the oracle's turn in its place, ending there; the continuation from the last state is trained as before."""
    from transformers import AutoTokenizer

    from sandgym.train.relabel import continuations, same_turn, trained_mask

    task = multihop(1)[0]
    chain = task.metadata["chain"]
    oracle_hop = grep(task, f"service {chain[0]} forwards")
    wrong = grep(task, "no such line")
    prefix = (oracle_hop, wrong, grep(task, f"service {chain[1]} forwards"))  # right, wrong, right
    cfg = load_config(None, [f"model.name={json.dumps(str(tiny_model_dir))}", "rollout.max_turns=8",
                             "rollout.code_action=\"none\"", "rollout.max_total_tokens=16384",
                             "rollout.tools=[\"grep\", \"read_file\", \"submit\"]",
                             "domains.mix=[{suite=\"" + SUITE + "\", n_tasks=40, difficulty=1}]"])
    relabelled, counts = continuations(cfg, AutoTokenizer.from_pretrained(tiny_model_dir), [(task.id, prefix)])
    assert counts["kept_turns=3"] == 1 and counts["corrections"] == 1
    whole = next(r for r in relabelled if r.kept == 3)
    assert whole.trained[:2] == (0, 2) and whole.trained[2:] == tuple(range(3, whole.trajectory.num_turns))
    fix = next(r for r in relabelled if r.kept == 1)
    assert fix.trained == (1,)
    assert same_turn(fix.trajectory.turns[0].text, oracle_hop)
    assert same_turn(fix.trajectory.turns[1].text, grep(task, f"service {chain[1]} forwards"))  # not the wrong grep
    mask = trained_mask(fix)
    assert len(mask) < len(fix.trajectory.token_ids)  # the sample ends with the trained turn
    assert sum(mask) == len(fix.trajectory.turns[1].completion_token_ids)
    assert same_turn('<tool_call>{"name": "grep", "arguments": {"path": "a", "pattern": "b"}}</tool_call>',
                     '<tool_call> {"name": "grep", "arguments": {"pattern": "b", "path": "a"}} </tool_call>')
    assert not same_turn(oracle_hop, wrong)


def test_run_sft_on_episodes_writes_the_relabelled_demonstrations(tmp_path, tiny_model_dir) -> None:
    from sandgym.train.sft import run_sft

    task = multihop(1)[0]
    src = episodes_file(tmp_path / "e.jsonl", [eval_row(task.id, [grep(task, "service"), call("submit", answer="x")])])
    cfg = load_config(None, [f"model.name={json.dumps(str(tiny_model_dir))}", f"sft.source={json.dumps(src)}",
                             "sft.epochs=1", "rollout.code_action=\"none\"", "rollout.max_total_tokens=16384",
                             "rollout.tools=[\"grep\", \"read_file\", \"submit\"]",
                             "domains.mix=[{suite=\"" + SUITE + "\", n_tasks=40, difficulty=1}]"])
    result = run_sft(cfg, tmp_path / "sft")
    assert result.demonstrations == 2 and all(x == x for x in result.losses)  # the continuation and a correction
    lines = [json.loads(line) for line in (tmp_path / "sft" / "relabelled.jsonl").read_text().splitlines()]
    assert [(x["kept"], x["trained"][0]) for x in lines] == [(1, 1), (0, 0)]  # the broad grep is not the oracle's
    assert json.loads((tmp_path / "sft" / "relabel_counts.json").read_text()) == {
        "corrections": 1, "gave_up": 0, "kept_turns=1": 1}


def test_episodes_of_no_trained_task_fail_early_with_the_fix(tmp_path, tiny_model_dir) -> None:
    from sandgym.train.sft import run_sft

    src = episodes_file(tmp_path / "e.jsonl", [eval_row("long_context/needle/heldout/d1/s1-0-t4096-file", ["x", "y"])])
    cfg = load_config(None, [f"model.name={json.dumps(str(tiny_model_dir))}", f"sft.source={json.dumps(src)}",
                             "domains.mix=[{suite=\"" + SUITE + "\", n_tasks=4, difficulty=1}]"])
    with pytest.raises(ConfigError, match="none of its 1 episodes is of a train task"):
        run_sft(cfg, tmp_path / "sft")


def test_source_kind_reads_episodes_and_trajectories(tmp_path) -> None:
    from sandgym.train.feedback_sft import source_kind
    from sandgym.train.relabel import is_episodes

    assert source_kind(episodes_file(tmp_path / "e.jsonl", [eval_row("t", ["a"])])) == "episodes"

    assert is_episodes(eval_row("t", ["a"]))
    assert is_episodes({"task_id": "t", "turns": []})
    assert not is_episodes({"messages": []}) and not is_episodes({"task_id": "t"})


def test_with_python_offered_the_continuation_works_the_sum_out_after_the_policys_search() -> None:
    """A tracking episode whose policy already grepped the updates is continued by the oracle's python sum, then the
    submit of what it printed; without ``python`` among the tools, by the submit alone."""
    from sandgym.envs.builtin_tools import builtin_tools

    tasks = [t for t in load_suite(SUITE, n=30, seed=0, difficulty=1) if t.family == "tracking"][:3]
    for names, expect in ((["grep", "read_file", "python", "submit"], ["python", "submit"]),
                          (["grep", "read_file", "submit"], ["submit"])):
        env = ToolEnv(tasks=[], code_action=None, max_turns=6, tools=builtin_tools(names))
        for task in tasks:
            variable = task.metadata["variable"]
            prefix = [call("grep", pattern=f"^(SET|UPDATE) {variable} ", path=task.metadata["document"])]
            result = run_episode(env, ContinuationAgent({task.id: prefix}), task)
            rest = said(result)[1:]
            assert result.success and [c.name for c in rest] == expect, (task.id, rest)
            if "python" in names:  # the default works the sum out from the numbers shown; "program" reads the file
                assert "open(" not in rest[0].arguments["code"]
                program = run_episode(env, ContinuationAgent({task.id: prefix}, compute="program"), task)
                code = said(program)[1].arguments["code"]
                assert program.success and f"open({task.metadata['document']!r})" in code, (task.id, code)
        env.close()

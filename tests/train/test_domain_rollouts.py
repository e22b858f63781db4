"""Per-domain rollouts (``[domains.mix.rollout]``): each domain's tasks in their own budgets, tools and env kwargs,
in training rollouts, the context check, the oracle warm start and the periodic evaluation."""

import dataclasses
import json
from pathlib import Path

import pytest

import tests.train.toy_env  # noqa: F401  (registers toy/Letters-v0)
from sandgym.errors import ConfigError
from sandgym.train import components
from sandgym.train.config import load_config

TOY = "tests.train.toy_env:toy/Letters-v0"


def _config(tmp_path: Path, b_rollout: str = "", extra: str = "", *, model: str = "smollm2-135m",
            rollout: str = 'code_action = "submit"'):
    text = f"""
out_dir = {json.dumps(str(tmp_path / "run"))}
[model]
name = {json.dumps(model)}
lora_r = 4
lora_alpha = 8
[rollout]
max_new_tokens = 8
max_turns = 1
truncated_turn = "continue"
{rollout}
[algorithm]
group_size = 2
[optim]
steps = 2
tasks_per_step = 4
micro_batch = 8
[logging]
tensorboard = false
[[domains.mix]]
suite = "coding/strings:train"
name = "a"
n_tasks = 2
[[domains.mix]]
suite = "coding/lists:train"
name = "b"
n_tasks = 2
{b_rollout}
{extra}
"""
    path = tmp_path / "train.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(str(path))


JSON_B = """[domains.mix.rollout]
max_turns = 3
max_new_tokens = 6
code_action = "none"
tools = ["list_files", "submit"]
env_kwargs = { require_submit = true }"""


def test_a_domain_rollout_replaces_the_run_rollout_keys(tmp_path):
    cfg = _config(tmp_path, JSON_B)
    specs = components.domain_rollouts(cfg)
    assert specs["a"] == cfg.rollout
    b = specs["b"]
    assert (b.max_turns, b.max_new_tokens, b.code_action, b.tools) == (3, 6, "none", ("list_files", "submit"))
    assert b.env_kwargs == {"require_submit": True} and b.truncated_turn == "continue"  # the rest from [rollout]
    assert b.stop_strings != cfg.rollout.stop_strings  # no code blocks end a turn of b


@pytest.mark.parametrize(("table", "extra", "needle"), [
    ("[domains.mix.rollout]\ntemperature = 0.5", "", "sampling is one for the run"),
    ("[domains.mix.rollout]\nmax_turn = 3", "", "unknown or run-wide keys ['max_turn']"),
    ("[domains.mix.rollout]\nmax_turns = 0", "", "rollout.max_turns=0: must be >= 1"),
    ("[domains.mix.rollout]\ncode_action = \"shell\"", "", "rollout.code_action='shell' is not one of"),
    ("[domains.mix.rollout]\nmax_turns = 2",
     '[[domains.mix]]\nsuite = "coding/numbers:train"\nname = "b"\n', "one domain's tasks share one rollout"),
    ("[domains.mix.rollout]\nmax_turns = 2", '[eval]\nevery = 1\nsuites = ["coding:heldout"]', "leave eval.suites empty"),
])
def test_bad_domain_rollouts_fail_naming_the_entry_and_the_fix(tmp_path, table, extra, needle):
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, table, extra)
    msg = str(err.value)
    assert needle in msg, msg
    where = "eval.suites" if "eval" in extra else "domains.mix[2].rollout" if "numbers" in extra else "domains.mix[1].rollout"
    assert where in msg, msg


def _tasks(cfg):
    loaded = components.domain_tasks(cfg)
    assert [components.task_domain(t) for t in loaded["a"] + loaded["b"]] == ["a", "a", "b", "b"]
    a, b = loaded["a"], loaded["b"]
    return [a[0], b[0], a[1], b[1]]  # interleaved: cut into four runs, one rollout each


def test_each_domain_rolls_out_in_its_own_budget_and_tools(tmp_path, tiny_model_dir):
    from sandgym.agents.hf import HFPolicy

    cfg = _config(tmp_path, JSON_B, model=str(tiny_model_dir))
    envs = components.DomainEnvs(cfg)
    tasks = _tasks(cfg)
    assert [(start, key) for start, key, _ in envs.runs(tasks)] == [(0, ""), (1, "b"), (2, ""), (3, "b")]
    policy = HFPolicy(str(tiny_model_dir))
    try:
        trajs = components.collect(policy, envs, tasks, cfg, seed=3, version=0, first_group_id=10)
    finally:
        envs.close()
    assert sorted({t.group_id for t in trajs}) == [10, 11, 12, 13] and len(trajs) == 8
    for t in trajs:
        b = (t.group_id - 10) % 2 == 1
        assert t.domain == ("b" if b else "a")
        assert t.task_id == tasks[t.group_id - 10].id
        # a: one turn of <= 8 tokens; b: three turns of <= 6 (random text has no tool call, so b's episodes run to
        # its turn budget, and require_submit fails them: nothing was submitted)
        assert t.num_turns == (3 if b else 1), (t.domain, t.num_turns)
        assert max(turn.num_completion_tokens for turn in t.turns) <= (6 if b else 8)
        if b:
            assert not t.success and t.outcome is not None and not t.outcome.actions.submitted


def test_cutting_the_tasks_by_domain_keeps_every_groups_samples(tmp_path, tiny_model_dir):
    from sandgym.agents.hf import HFPolicy

    toy = f'env = "{TOY}"\nenv_kwargs = {{ first_only = true }}'
    plain = _config(tmp_path, model=str(tiny_model_dir), rollout=toy)
    cut = _config(tmp_path, "[domains.mix.rollout]\nmax_turns = 1", model=str(tiny_model_dir), rollout=toy)
    policy = HFPolicy(str(tiny_model_dir))
    out = {}
    for name, cfg in (("plain", plain), ("cut", cut)):
        envs = components.DomainEnvs(cfg)
        try:
            trajs = components.collect(policy, envs, _tasks(cfg), cfg, seed=5, version=0)
        finally:
            envs.close()
        out[name] = {(t.group_id, t.sample_idx): (t.token_ids, t.domain) for t in trajs}
    assert len(components.DomainEnvs(cut).runs(_tasks(cut))) == 4
    assert out["plain"] == out["cut"]  # the same seeds per (group, sample) however the batch is cut


def test_a_training_run_rolls_out_logs_and_measures_each_domain(tmp_path, tiny_model_dir):
    from sandgym.train.loop import run
    from sandgym.train.metrics import load_metrics

    toy = f'env = "{TOY}"\nenv_kwargs = {{ first_only = true }}'
    b = f'[domains.mix.rollout]\nmax_new_tokens = 4\nenv = "{TOY}"\nenv_kwargs = {{ first_only = false }}'
    _config(tmp_path, b, model=str(tiny_model_dir), rollout=toy)  # writes train.toml
    cfg = load_config(str(tmp_path / "train.toml"), ['algorithm.group_size=4', 'algorithm.gradient_conflict="measure"',
                                                     "optim.steps=3", "logging.sample_trajectories=16"])
    result = run(cfg)
    rows = load_metrics(result.run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(f"domain/{d}/reward" in r for r in rows for d in ("a", "b") if r[f"domain/{d}/weight"] > 0)
    assert any(r.get("losses/grad_cosine") is not None for r in rows)  # both domains in a step: their cosine
    trajs = [json.loads(x) for x in (result.run_dir / "trajectories.jsonl").read_text().splitlines()]
    by_domain = {d: [t for t in trajs if t["domain"] == d] for d in ("a", "b")}
    assert by_domain["a"] and by_domain["b"]
    assert max(len(turn["completion_token_ids"]) for t in by_domain["b"] for turn in t["turns"]) <= 4
    assert max(len(turn["completion_token_ids"]) for t in by_domain["a"] for turn in t["turns"]) > 4


def test_the_oracle_warm_start_demonstrates_each_domain_in_its_rollout(tmp_path):
    from sandgym.train.sft import oracle_trajectories
    from tests.tiny import build_tokenizer

    # all built-in tools, and the JSON track's five turns (the oracle's plan: look, write, test, submit)
    every_tool = JSON_B.replace('tools = ["list_files", "submit"]', "tools = []").replace("max_turns = 3", "max_turns = 5")
    cfg = _config(tmp_path, every_tool, "[sft]\nepisodes = 4")
    trajs = oracle_trajectories(cfg, build_tokenizer())
    by_domain = {d: [t for t in trajs if t.domain == d] for d in ("a", "b")}
    assert len(by_domain["a"]) + len(by_domain["b"]) == 4 and by_domain["a"] and by_domain["b"]
    assert all(t.success for t in trajs)
    for t in by_domain["a"]:  # [rollout]: code_action "submit", one fenced block
        assert t.num_turns == 1 and "```python" in t.turns[0].text
    for t in by_domain["b"]:  # its own: JSON tool calls, ending in submit
        assert t.num_turns >= 2 and all("<tool_call>" in turn.text for turn in t.turns)
        assert '"submit"' in t.turns[-1].text and "```" not in t.completion_text


def test_the_periodic_evaluation_scores_each_domain_in_its_rollout(tmp_path):
    from sandgym.experiments.periodic_eval import eval_configs

    cfg = _config(tmp_path, JSON_B, "[eval]\nevery = 1")
    a, b = eval_configs(cfg, tmp_path / "step")
    assert (a.suites, b.suites) == (("coding/strings:heldout",), ("coding/lists:heldout",))
    assert (Path(a.out).name, Path(b.out).name) == ("rollout", "b")
    assert a.rollout.code_action == "submit" and b.rollout.code_action == "none" and b.rollout.max_turns == 3
    assert a.rollout.temperature == b.rollout.temperature == cfg.eval.temperature
    (one,) = eval_configs(_config(tmp_path, "", "[eval]\nevery = 1"), tmp_path / "step")  # no tables: as before
    assert one.out == str(tmp_path / "step") and one.suites == ("coding/strings:heldout", "coding/lists:heldout")


def test_periodic_evaluation_during_a_run_scores_each_domain_in_its_rollout(tmp_path, tiny_model_dir):
    from sandgym.evaluate.episodes import read_rows
    from sandgym.experiments.periodic_eval import load_curve, train_with_eval
    from sandgym.experiments.sweep_report import _run_data

    toy = f'env = "{TOY}"\nenv_kwargs = {{ first_only = true }}'
    b = f'[domains.mix.rollout]\nmax_new_tokens = 3\nenv = "{TOY}"\nenv_kwargs = {{ first_only = true }}'
    _config(tmp_path, b, model=str(tiny_model_dir), rollout=toy)
    cfg = load_config(str(tmp_path / "train.toml"), ["eval.every=2", "eval.n_tasks=2", "eval.samples=2"])
    train_with_eval(cfg)
    curve = load_curve(tmp_path / "run")
    assert [r["step"] for r in curve] == [0, 2] and all(r["tasks"] == 4 and r["episodes"] == 8 for r in curve)
    here = tmp_path / "run" / "eval" / "step-000002"
    a_rows, b_rows = read_rows(here / "rollout" / "episodes.jsonl"), read_rows(here / "b" / "episodes.jsonl")
    assert {r.family for r in a_rows} == {"strings"} and {r.family for r in b_rows} == {"lists"}
    assert max(r.gen_tokens for r in b_rows) <= 3 < max(r.gen_tokens for r in a_rows)  # b's own budget
    assert len(_run_data(tmp_path / "run")["per_task"]) == 4  # the sweep report reads both folders


def test_the_context_check_holds_each_domain_to_its_own_budget(tmp_path, tiny_model_dir):
    from sandgym.train.loop import run

    cfg = _config(tmp_path, "[domains.mix.rollout]\nmax_total_tokens = 1024", model=str(tiny_model_dir),
                  rollout='code_action = "submit"\nmax_total_tokens = 4096')  # a's prompts fit; b's do not fit 1024
    with pytest.raises(ConfigError) as err:
        run(cfg)
    msg = str(err.value)
    assert "raise domains.mix[1].rollout.max_total_tokens to" in msg, msg
    b_ids = {t.id for t in components.domain_tasks(cfg)["b"]}
    a_ids = {t.id for t in components.domain_tasks(cfg)["a"]}
    assert any(i in msg for i in b_ids) and not any(i in msg for i in a_ids), msg


def test_a_prompt_over_budget_fails_before_the_warm_start_trains(tmp_path, tiny_model_dir):
    """Bad input loses nothing: with init = "sft" the prompt-length check runs before SFT, so no adapter is
    trained (or written) for a run that could never start."""
    from sandgym.train.loop import run

    cfg = _config(tmp_path, "[domains.mix.rollout]\nmax_total_tokens = 1024", model=str(tiny_model_dir),
                  rollout='code_action = "submit"\nmax_total_tokens = 4096')
    cfg = dataclasses.replace(cfg, init="sft")
    with pytest.raises(ConfigError, match="raise domains.mix"):
        run(cfg)
    assert not (tmp_path / "run" / "sft" / "adapter").exists()

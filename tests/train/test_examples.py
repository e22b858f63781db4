from pathlib import Path

import pytest

from sandgym.train.config import load_config

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_config_loads_and_validates(path):
    cfg = load_config(path)
    assert cfg.domains.mix and cfg.optim.steps >= 1


def test_config_errors_name_file_key_and_fix(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[algorithm]\nname = "ppo"\n')
    with pytest.raises(Exception) as e:
        load_config(bad)
    msg = str(e.value)
    assert str(bad) in msg and "algorithm.name" in msg and "grpo" in msg
    bad.write_text("[optim]\nsteps = 'ten'\n")
    with pytest.raises(Exception, match="optim.steps"):
        load_config(bad)


def test_per_step_advantages_are_accepted_on_ray():
    cfg = load_config(None, ['algorithm.advantage_mode="per_step"', 'distributed.backend="ray"'])
    assert (cfg.algorithm.advantage_mode, cfg.distributed.backend) == ("per_step", "ray")


def test_joint_example_mixes_both_domains_and_demonstrates_each_its_own_way():
    from sandgym.agents.scripted import OracleAgent
    from sandgym.train.components import domain_tasks

    cfg = load_config(EXAMPLES[0].parent / "joint.toml")
    assert cfg.algorithm.gradient_conflict == "measure" and cfg.domains.normalize
    tasks = domain_tasks(cfg)
    # 80 demonstrations drawn in proportion from 24 coding and 96 long-context tasks: ~16 and ~64
    assert {k: len(v) for k, v in tasks.items()} == {"coding": 24, "long_context": 96}
    oracle = OracleAgent(style="code")  # sft.oracle_style "auto" under rollout.code_action = "submit"
    assert oracle.plan(tasks["coding"][0])[0].startswith("```python")  # a coding task: one fenced block
    plan = oracle.plan(tasks["long_context"][0])  # a question: the tool-call search plan, then submit
    assert len(plan) >= 2 and all("<tool_call>" in turn for turn in plan) and '"submit"' in plan[-1]


def test_program_example_demonstrates_the_loop_for_tracking_and_a_plain_search_for_needle():
    """examples/long_context_program.toml: its warm start's oracle (the config's own style and compute mode, in the
    config's own env with its tools and turn term) runs one loop over the document file for a tracking question and
    greps then submits for a needle question; both rewarded, in the real sandbox."""
    from sandgym.agents.scripted import OracleAgent, run_episode
    from sandgym.envs.parsing import parse_turn
    from sandgym.train.components import domain_tasks, env_factory

    cfg = load_config(EXAMPLES[0].parent / "long_context_program.toml")
    assert (cfg.sft.compute, cfg.algorithm.advantage_mode) == ("program", "per_step")
    tasks = [t for ts in domain_tasks(cfg).values() for t in ts]
    picked = {f: next(t for t in tasks if t.family == f and "t8192" in t.id) for f in ("tracking", "needle")}
    env = env_factory(cfg)()
    try:
        tools = {}
        for family, task in picked.items():
            result = run_episode(env, OracleAgent(style=cfg.sft.style(cfg.rollout.code_action),
                                                  compute=cfg.sft.compute), task)
            calls = [c for m in result.messages if m["role"] == "assistant" for c in parse_turn(m["content"]).calls]
            assert result.reward > 0.9, (task.id, result.messages[-2:])
            tools[family] = [c.name for c in calls]
            if family == "tracking":
                assert "open(" in calls[tools[family].index("python")].arguments["code"]
    finally:
        env.close()
    assert tools["tracking"] == ["grep", "python", "submit"], tools
    assert "python" not in tools["needle"] and tools["needle"][-1] == "submit", tools


def test_json_tools_example_credits_only_submitted_work():
    """examples/json_tools.toml grades only submitted episodes (``require_submit``): in the config's own env, the
    oracle's correct file left unsubmitted until the turns run out earns nothing, and the same plan with ``submit``
    earns the reward; real sandbox. (Without it, RL learned to stop testing and submitting: docs/BENCHMARKS.md.)"""
    from sandgym.agents.scripted import OracleAgent, call, run_episode
    from sandgym.train.components import domain_tasks, env_factory

    cfg = load_config(EXAMPLES[0].parent / "json_tools.toml")
    assert cfg.rollout.env_kwargs == {"require_submit": True}
    task = domain_tasks(cfg)["coding"][0]
    oracle = OracleAgent(style=cfg.sft.style(cfg.rollout.code_action))
    plan = oracle.plan(task)
    assert '"submit"' in plan[-1] and any('"write_file"' in turn for turn in plan)
    env = env_factory(cfg)()
    try:
        env.reset(options={"task": task})
        turns = 0
        for turn in [*plan[:-1], *[call("list_files")] * cfg.rollout.max_turns]:  # all but submit, then idle
            _, reward, term, trunc, info = env.step(turn)
            turns += 1
            if term or trunc:
                break
        assert trunc and not term and turns == cfg.rollout.max_turns
        assert not info["outcome"].success and reward <= 0.0 and info["failure_mode"] == "budget"
        assert run_episode(env, oracle, task).reward > 0.9  # the same plan, submitted
    finally:
        env.close()


def test_joint_json_tracking_example_runs_each_recipe_in_its_own_rollout():
    """examples/joint_json_tracking.toml is the two single-domain recipes as one run: each domain's rollout is its
    recipe's (budgets, tools, env kwargs), and the warm start draws ~64 demonstrations of each."""
    from dataclasses import replace

    from sandgym.train.components import domain_rollouts, domain_tasks

    here = EXAMPLES[0].parent
    cfg = load_config(here / "joint_json_tracking.toml")
    specs = domain_rollouts(cfg)
    for name, recipe in (("coding", "json_tools.toml"), ("long_context", "long_context_program.toml")):
        own = load_config(here / recipe).rollout
        assert specs[name] == replace(own, temperature=cfg.rollout.temperature), name
    assert {k: len(v) for k, v in domain_tasks(cfg).items()} == {"coding": 96, "long_context": 96}
    assert cfg.sft.episodes == 128 and cfg.sft.compute == "program" and cfg.algorithm.gradient_conflict == "measure"

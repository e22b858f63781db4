"""``[model] inference``: training generates on ``sandgym serve-model`` on loopback (tiny model) while the learner
stays in the test's process; adapters are hot-loaded per step under versioned names and unloaded after."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.train.toy_env  # noqa: F401  (registers toy/Letters-v0)
from sandgym.agents.inference_client import InferenceClient
from sandgym.errors import ConfigError
from sandgym.interop.model_engine import ModelEngine
from sandgym.interop.model_server import RunningServer, start_server
from sandgym.train.config import load_config
from sandgym.train.loop import run
from sandgym.train.metrics import load_metrics
from tests.train.test_loop import toy_overrides


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[RunningServer]:
    with start_server(ModelEngine(str(tiny_model_dir), max_loras=2)) as srv:
        yield srv


def trajectories(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]


def test_two_steps_generate_on_the_server(server: RunningServer, tiny_model_dir: Path, tmp_path: Path) -> None:
    loaded: list[str] = []
    load = server.engine.load_adapter
    server.engine.load_adapter = lambda name, path: (loaded.append(name), load(name, path))[1]  # type: ignore[method-assign]
    try:
        cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / "run", **{
            "optim.steps": 2, "model.inference": json.dumps(server.url)}))
        run(cfg)
    finally:
        del server.engine.load_adapter
    rows = load_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    assert [r["server/adapter_version"] for r in rows] == [1, 2] and all(r["server/staleness_max"] == 0 for r in rows)
    assert [n.rsplit("-v", 1)[1] for n in loaded] == ["0", "1", "2"]  # one version per step, published by name
    assert [r["losses/tis_mean"] for r in rows] == pytest.approx([1.0, 1.0], abs=1e-3)  # the engines agree
    assert all(r["losses/tis_max"] < 1.01 and r["losses/tis_capped_frac"] == 0 for r in rows)
    assert [t["policy_version"] for t in trajectories(tmp_path / "run")] == [0] * 4 + [1] * 4
    assert [c.id for c in InferenceClient(server.url).models()] == [server.engine.name]  # all unloaded at the end
    assert not list((tmp_path / "run" / "served_adapters").iterdir())


def test_async_overlap_is_one_update_stale(server: RunningServer, tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / "run", **{
        "optim.steps": 3, "model.inference": json.dumps(server.url), "distributed.async_mode": "true"}))
    run(cfg)
    rows = load_metrics(tmp_path / "run")
    assert [r["server/staleness_max"] for r in rows] == [0, 1, 1]
    versions = sorted({t["policy_version"] for t in trajectories(tmp_path / "run")})
    assert versions == [0, 1]  # step 2 and 3 sampled by the adapter of the update before


def test_a_server_that_is_not_there_is_named(tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / "run", **{
        "optim.steps": 1, "model.inference": json.dumps("http://127.0.0.1:9")}))
    with pytest.raises(ConfigError, match="sandgym serve-model"):
        run(cfg)
    with pytest.raises(ConfigError, match="model.inference"):
        load_config(None, toy_overrides(tiny_model_dir, tmp_path / "x", **{"model.inference": json.dumps("localhost:8000")}))

"""sandgym/OpenEnv-v0 plays OpenEnv servers the test starts on loopback: two plain ones built from openenv-core and
sandgym's own (`sandgym serve`), through gymnasium.make and `sandgym eval --env`."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("openenv.core")
uvicorn = pytest.importorskip("uvicorn")

import sandgym.interop.openenv_remote  # noqa: E402, F401  (registers sandgym/OpenEnv-v0)
from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode  # noqa: E402
from sandgym.cli import main  # noqa: E402
from sandgym.errors import ConfigError  # noqa: E402
from sandgym.interop.openenv import make_app  # noqa: E402
from tests.interop.plain_openenv import add_app, echo_app  # noqa: E402
from tests.interop.tasks_fixture import ADD_ONE, write_suite  # noqa: E402

ENV = "sandgym.interop.openenv_remote:sandgym/OpenEnv-v0"


@pytest.fixture(scope="module")
def serve() -> Iterator[Any]:
    servers: list[tuple[Any, threading.Thread]] = []

    def start(app: Any) -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=srv.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not srv.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.started
        servers.append((srv, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for srv, thread in servers:
        srv.should_exit = True
        thread.join(timeout=10)


def test_a_plain_server_with_a_text_action(serve) -> None:
    env = gym.make("sandgym/OpenEnv-v0", url=serve(echo_app()), max_turns=3)
    try:
        obs, info = env.reset(seed=0)
        assert obs == "Say anything; say DONE to finish." and info["tools"] == []
        assert "`message`" in info["system_prompt"]
        text, reward, terminated, truncated, _ = env.step("hello")
        assert (text, reward, terminated, truncated) == ("hello", 0.0, False, False)
        text, reward, terminated, truncated, info = env.step("DONE now")
        assert terminated and reward == 1.0 and info["outcome"].success
        env.reset(seed=1)
        for _ in range(3):
            *_, terminated, truncated, info = env.step("still talking")
        assert truncated and not terminated and info["failure_mode"] == "budget"
    finally:
        env.close()


def test_a_plain_server_with_a_structured_action_is_one_tool(serve) -> None:
    env = gym.make("sandgym/OpenEnv-v0", url=serve(add_app()), max_turns=4)
    try:
        obs, info = env.reset(seed=0)
        assert json.loads(obs) == {"total": 0, "target": 7}
        assert [t["function"]["name"] for t in info["tools"]] == ["act"]
        text, reward, *_ = env.step("I think 3 and 4")
        assert reward == 0.0 and "act" in text and info["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]
        text, reward, terminated, _, info = env.step('<tool_call>{"name": "act", "arguments": {"a": 3, "b": 4}}'
                                                     "</tool_call>")
        assert terminated and reward == 1.0 and json.loads(text)["total"] == 7 and info["outcome"].success
    finally:
        env.close()


def test_sandgyms_own_server_oracle_one_noop_zero(serve, tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "tasks.jsonl")
    url = serve(make_app("sandgym/Coding-v0", {"tasks": str(suite)}, max_sessions=2))
    env = gym.make("sandgym/OpenEnv-v0", url=url)
    try:
        good = run_episode(env, OracleAgent(), ADD_ONE)
        bad = run_episode(env, NoopAgent(), ADD_ONE)
    finally:
        env.close()
    assert good.reward_components["correctness@v1"] == 1.0 and good.success
    assert bad.reward_components["correctness@v1"] == 0.0 and not bad.success
    out = tmp_path / "eval"
    assert main(["eval", "--policy", "oracle", "--suite", str(suite), "--samples", "1", "--env", ENV,
                 "--env-kwargs", json.dumps({"url": url}), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["overall"]["completion"]["value"] == 1.0


def test_no_server_at_the_url_names_the_fix() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match="no OpenEnv server answers"):
        gym.make("sandgym/OpenEnv-v0", url=f"http://127.0.0.1:{port}")


def test_training_rolls_out_on_a_remote_server(serve, tiny_model_dir, tmp_path: Path) -> None:
    from sandgym.experiments.periodic_eval import train_with_eval
    from sandgym.train.config import load_config
    from sandgym.train.metrics import load_metrics

    suite = write_suite(tmp_path / "tasks.jsonl")
    url = serve(make_app("sandgym/Coding-v0", {"tasks": str(suite)}, max_sessions=4))
    overrides = {
        "out_dir": json.dumps(str(tmp_path / "run")), "model.name": json.dumps(str(tiny_model_dir)),
        "model.lora_r": 4, "model.lora_alpha": 8, "rollout.env": json.dumps(ENV),
        "rollout.env_kwargs": f'{{url = "{url}"}}',
        "rollout.max_new_tokens": 8, "rollout.max_turns": 2, "rollout.max_total_tokens": 4096,
        "algorithm.group_size": 2, "optim.tasks_per_step": 1,
        "optim.steps": 2, "optim.micro_batch": 4, "checkpoint.every": 2, "logging.tensorboard": "false",
        "domains.mix": f'[{{suite = "{suite}", n_tasks = 1}}]',
    }
    result = train_with_eval(load_config(None, [f"{k}={v}" for k, v in overrides.items()]))
    assert [m["step"] for m in load_metrics(result.run_dir)] == [1, 2]
    trajs = [json.loads(x) for x in (result.run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert trajs and all(t["task_id"] == ADD_ONE.id for t in trajs)
    assert any("openenv/reward" in t["reward_components"] for t in trajs)


def test_a_refused_reset_names_the_server_and_the_next_reset_reconnects(serve, tmp_path: Path) -> None:
    url = serve(make_app("sandgym/Coding-v0", {"tasks": str(write_suite(tmp_path / "tasks.jsonl"))}))
    env = gym.make("sandgym/OpenEnv-v0", url=url)
    try:
        with pytest.raises(ConfigError, match=f"{url}.*is not among this server's 1 tasks.*--task-seed 0"):
            env.reset(options={"task": "demo/unknown"})
        _, info = env.reset(options={"task": ADD_ONE.id})
        assert info["task_id"] == ADD_ONE.id
    finally:
        env.close()

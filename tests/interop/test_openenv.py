"""``sandgym serve``: a server started on loopback, driven with openenv-core's own WebSocket client."""

from __future__ import annotations

import socket
import threading
import time

import pytest

pytest.importorskip("openenv.core")
uvicorn = pytest.importorskip("uvicorn")

from sandgym.agents.scripted import NoopAgent, OracleAgent  # noqa: E402
from sandgym.interop.openenv import SandgymAction, SandgymEnvClient, make_app  # noqa: E402
from tests.interop.tasks_fixture import ADD_ONE, write_suite  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    suite = write_suite(tmp_path_factory.mktemp("suite") / "tasks.jsonl")
    app = make_app("sandgym/Coding-v0", {"tasks": str(suite)}, max_sessions=2)
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
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def play(url: str, agent) -> tuple[list, object]:
    with SandgymEnvClient(base_url=url).sync() as client:
        result = client.reset(seed=0, task_id=ADD_ONE.id)
        obs = result.observation
        assert obs.task_id == ADD_ONE.id and obs.text == ADD_ONE.prompt
        assert [m["role"] for m in obs.messages] == ["system", "user"] and obs.tools
        agent.reset(ADD_ONE)
        steps = []
        while not result.done:
            result = client.step(SandgymAction(text=agent.act(result.observation.text, {})))
            steps.append(result)
        state = client.state()
    return steps, state


def test_oracle_reaches_reward_one_over_the_websocket(server: str):
    steps, state = play(server, OracleAgent())
    last = steps[-1].observation
    assert steps[-1].done and last.reward_components["correctness@v1"] == 1.0
    assert steps[-1].reward == pytest.approx(last.reward) and steps[-1].reward >= 1.0
    assert last.info["failure_mode"] == "success" and "runtime" in last.info
    assert all(s.reward == 0.0 for s in steps[:-1])
    assert state.task_id == ADD_ONE.id and state.step_count == len(steps) and state.done


def test_noop_scores_zero(server: str):
    steps, _ = play(server, NoopAgent())
    assert steps[-1].observation.reward_components["correctness@v1"] == 0.0


def test_unknown_env_id_fails_before_serving():
    import gymnasium as gym

    with pytest.raises(gym.error.Error):
        make_app("sandgym/Nope-v0")


def test_cli_registers_serve():
    from sandgym.cli import build_parser

    args = build_parser().parse_args(["serve", "--env", "sandgym/Coding-v0", "--tasks", "x.jsonl", "--port", "0"])
    assert args.env_opt == "sandgym/Coding-v0" and args.tasks == "x.jsonl"


def test_sessions_reuse_warm_envs(tmp_path) -> None:
    """A session that ended between episodes hands its env (and warm sandbox) to the next session."""
    suite = write_suite(tmp_path / "tasks.jsonl")
    app = make_app("sandgym/Coding-v0", {"tasks": str(suite)}, max_sessions=2)
    pool = app.state.sandgym_pool
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        for _ in range(3):
            steps, state = play(f"http://127.0.0.1:{port}", OracleAgent())
            assert steps[-1].observation.reward_components["correctness@v1"] == 1.0 and state.done
            deadline = time.monotonic() + 10
            while not pool._idle and time.monotonic() < deadline:
                time.sleep(0.05)  # the session's close runs on the server after the client has gone
        assert pool.made == 1 and pool.reused >= 3  # one env (and sandbox) served all three sessions
    finally:
        srv.should_exit = True
        thread.join(timeout=10)

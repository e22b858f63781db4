"""`sandgym serve` and `sandgym eval` draw a generated suite's tasks with the same task seed by default, so the
documented round trip (a served suite evaluated through sandgym/OpenEnv-v0) plays the server's own tasks; when the
seeds differ, the error names the `--task-seed` that makes them agree, and nothing about the sandbox."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openenv.core")
uvicorn = pytest.importorskip("uvicorn")

from sandgym.cli import build_parser, main  # noqa: E402
from sandgym.evaluate.config import EvalConfig  # noqa: E402
from sandgym.interop.openenv import make_app  # noqa: E402
from sandgym.tasks.registry import DEFAULT_TASK_SEED  # noqa: E402

ENV = "sandgym.interop.openenv_remote:sandgym/OpenEnv-v0"
SUITE = "coding/strings:heldout@2"


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """A server started as `sandgym serve sandgym/Coding-v0 --tasks SUITE` starts it (its flags' defaults)."""
    args = build_parser().parse_args(["serve", "sandgym/Coding-v0", "--tasks", SUITE])
    app = make_app(args.env_id, {"tasks": args.tasks}, max_sessions=2, task_seed=args.task_seed)
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


def _eval(url: str, out: Path, *extra: str) -> int:
    return main(["eval", "--policy", "oracle", "--suite", SUITE, "--samples", "1", "--max-turns", "8", "--env", ENV,
                 "--env-kwargs", json.dumps({"url": url}), "--out", str(out), *extra])


def test_serve_and_eval_default_to_one_task_seed() -> None:
    assert build_parser().parse_args(["serve"]).task_seed == DEFAULT_TASK_SEED
    assert EvalConfig(suites=(SUITE,)).task_seed == DEFAULT_TASK_SEED


def test_the_round_trip_plays_the_servers_tasks_without_a_seed_flag(served: str, tmp_path: Path) -> None:
    assert _eval(served, tmp_path / "eval") == 0
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["overall"]["completion"]["value"] == 1.0


def test_another_task_seed_is_refused_naming_the_flag_only(served: str, tmp_path: Path, capsys) -> None:
    assert _eval(served, tmp_path / "eval", "--task-seed", "7") == 2
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("sandgym: error:"))
    assert f"--task-seed {DEFAULT_TASK_SEED}" in line and "not among this server's" in line, line
    assert "sandbox check" not in line and "--max-sessions" not in line, line

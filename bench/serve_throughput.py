"""Oracle episodes/s through `sandgym serve` (openenv-core's server on loopback, one WebSocket session per worker,
driven by openenv-core's client; sessions on warm pooled envs) against the same episodes in-process (one env per
worker, a fresh sandbox per episode, and warm: ``reuse_sandbox=True``), same suite and run.

    python bench/serve_throughput.py                 # 16 oracle episodes (coding/strings), 2 workers, 3 repeats
    python bench/serve_throughput.py --repeats 1     # smoke run

Both are timed in alternating order per repeat; prints the load at start and end, each repeat and the medians.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from tempfile import TemporaryDirectory

import gymnasium as gym
import uvicorn

import sandgym  # noqa: F401
from sandgym.agents.scripted import OracleAgent, run_episode
from sandgym.interop.openenv import SandgymAction, SandgymEnvClient, make_app
from sandgym.tasks.load import save_jsonl
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task


def in_process(suite: str, tasks: list[Task], workers: int, warm: bool) -> tuple[float, int]:
    def work(chunk: list[Task]) -> int:
        env = gym.make("sandgym/Coding-v0", tasks=suite, reuse_sandbox=warm)
        try:
            return sum(run_episode(env.unwrapped, OracleAgent(), t).success for t in chunk)
        finally:
            env.close()

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = sum(pool.map(work, [tasks[i::workers] for i in range(workers)]))
    return len(tasks) / (time.perf_counter() - t), ok


def through_server(url: str, tasks: list[Task], workers: int) -> tuple[float, int]:
    def work(chunk: list[Task]) -> int:
        ok = 0
        with SandgymEnvClient(base_url=url).sync() as client:
            for task in chunk:
                agent = OracleAgent()
                agent.reset(task)
                result = client.reset(task_id=task.id)
                while not result.done:
                    result = client.step(SandgymAction(text=agent.act(result.observation.text, {})))
                ok += result.observation.info.get("failure_mode") == "success"
        return ok

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = sum(pool.map(work, [tasks[i::workers] for i in range(workers)]))
    return len(tasks) / (time.perf_counter() - t), ok


def start_server(suite: str, workers: int) -> tuple[str, uvicorn.Server, threading.Thread]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = make_app("sandgym/Coding-v0", {"tasks": suite}, max_sessions=workers)
    # critical: openenv-core's server logs a traceback when a client closes its session first
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", srv, thread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n", type=int, default=16)
    args = ap.parse_args()
    tasks = load_suite("coding/strings:train", n=args.n, seed=0)
    with TemporaryDirectory() as tmp:
        suite = str(save_jsonl(tasks, Path(tmp) / "tasks.jsonl"))
        url, srv, thread = start_server(suite, args.workers)
        print(f"load at start: {os.getloadavg()[0]:.2f}; {len(tasks)} oracle episodes, {args.workers} workers, "
              f"{args.repeats} repeats")
        got: dict[str, list[float]] = {"in-process": [], "in-process warm": [], "server": []}
        for rep in range(args.repeats):
            order = list(got) if rep % 2 == 0 else list(reversed(got))
            for kind in order:
                eps, ok = through_server(url, tasks, args.workers) if kind == "server" else \
                    in_process(suite, tasks, args.workers, warm=kind == "in-process warm")
                got[kind].append(eps)
                print(f"repeat {rep + 1} {kind}: {eps:.2f} episodes/s, {ok}/{len(tasks)} solved", flush=True)
        srv.should_exit = True
        thread.join(timeout=10)
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"load at end: {os.getloadavg()[0]:.2f}")
    print(f"median: in-process {med['in-process']:.2f}/s, in-process warm {med['in-process warm']:.2f}/s, server "
          f"{med['server']:.2f}/s; server/in-process warm {med['server'] / med['in-process warm']:.2f}x")


if __name__ == "__main__":
    main()

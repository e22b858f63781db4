"""Learner step time: generation in the learner's process vs on ``sandgym serve-model`` (sync, and async overlap).

Three modes of the same ``sandgym train`` run (embedded SmolLM2-135M, a fresh LoRA adapter, one-turn episodes of
the trainer tests' toy env: reward = share of lowercase letters, so groups have reward variance, the learner
trains every step and no sandbox time is mixed in), each for ``--steps`` steps:

- ``inprocess``: the default LocalBackend (generation and update in one process);
- ``server``: ``[model] inference`` pointing at a ``sandgym serve-model`` subprocess on loopback (sync);
- ``server-async``: the same with ``async_mode = true`` (step t+1 generates while step t trains; staleness 1).

The modes run ``--repeats`` times, interleaved in a rotating order so load drift hits them alike. Reported per
mode: the median ``perf/step_s`` over the steps after the first (warm-up), the spread over repeats, and how long
the learner waited for rollouts. The server gets ``--server-threads`` torch threads, the learner ``--threads``
(default 1 each: on a 2-core machine the server mode uses both cores, one per process; more threads than free cores
make torch's thread pool spin, which on a loaded machine costs several times over). Run it from the repository root
(it uses the toy env of tests/train). The load is printed at start and end.

    OMP_NUM_THREADS=1 python bench/server_overlap.py     # 4 steps, 2 repeats
    python bench/server_overlap.py --steps 5 --repeats 3 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import torch

from sandgym.train.config import load_config
from sandgym.train.loop import run
from sandgym.train.metrics import load_metrics

MODES = ("inprocess", "server", "server-async")
TOY = "tests.train.toy_env:toy/Letters-v0"  # run from the repository root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(model: str, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    proc = subprocess.Popen([sys.executable, "-m", "sandgym", "serve-model", "--model", model, "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2).read()
            return proc, url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("serve-model exited while starting") from None
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("serve-model did not answer within 300 s")


def one_run(mode: str, url: str, args: argparse.Namespace, out: Path) -> list[dict[str, float]]:
    over = {
        "out_dir": json.dumps(str(out)), "model.name": json.dumps(args.model), "seed": 0,
        "domains.mix": '[{suite = "coding/strings:train", n_tasks = 16}]', "rollout.env": json.dumps(TOY),
        "rollout.max_new_tokens": args.max_new_tokens, "rollout.max_turns": 1,
        "rollout.truncated_turn": json.dumps("continue"),
        "algorithm.group_size": args.group_size, "optim.tasks_per_step": args.tasks_per_step,
        "optim.steps": args.steps, "optim.micro_batch": 4, "checkpoint.every": 1000, "logging.tensorboard": "false",
    }
    if mode != "inprocess":
        over["model.inference"] = json.dumps(url)
    if mode == "server-async":
        over["distributed.async_mode"] = "true"
    run(load_config(None, [f"{k}={v}" for k, v in over.items()]))
    rows = load_metrics(out)
    assert all(r["losses/trained_sequences"] > 0 for r in rows), "a step trained nothing: the comparison is void"
    return rows


def waited(row: dict[str, float]) -> float:
    """Seconds the learner waited for the step's rollouts (all of the rollout time when generating in-process)."""
    return float(row.get("server/wait_s", row["perf/rollout_s"]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--tasks-per-step", type=int, default=2)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the learner process")
    p.add_argument("--server-threads", type=int, default=1, help="torch threads of the serve-model process")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print("loadavg at start:", Path("/proc/loadavg").read_text().strip(), flush=True)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the toy env lives in tests/train
    proc, url = start_server(args.model, args.server_threads)
    steps: dict[str, list[float]] = {m: [] for m in MODES}
    waits: dict[str, list[float]] = {m: [] for m in MODES}
    per_repeat: dict[str, list[float]] = {m: [] for m in MODES}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.repeats):
                order = MODES[rep % 3:] + MODES[: rep % 3]
                for mode in order:
                    rows = one_run(mode, url, args, Path(tmp) / f"{mode}-{rep}")[1:]  # step 1 is warm-up
                    times = [float(r["perf/step_s"]) for r in rows]
                    steps[mode] += times
                    waits[mode] += [waited(r) for r in rows]
                    per_repeat[mode].append(statistics.median(times))
                    print(f"repeat {rep} {mode:13s} step_s {[round(t, 2) for t in times]}", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print("loadavg at end:", Path("/proc/loadavg").read_text().strip())
    base = statistics.median(steps["inprocess"])
    print("\n| mode | median step s | spread over repeats | learner waiting for rollouts s | vs in-process |")
    print("|---|---|---|---|---|")
    for mode in MODES:
        med = statistics.median(steps[mode])
        lo, hi = min(per_repeat[mode]), max(per_repeat[mode])
        print(f"| {mode} | {med:.2f} | {lo:.2f}-{hi:.2f} | {statistics.median(waits[mode]):.2f} | {base / med:.2f}x |")


if __name__ == "__main__":
    main()

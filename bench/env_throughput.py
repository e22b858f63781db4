"""Environment throughput: oracle episodes/s on the coding suite, and the env's own cost per step as a
long-context document grows from 1K to 64K tokens (no model involved).

    python bench/env_throughput.py                 # full run (~1-2 minutes on 2 cores)
    python bench/env_throughput.py --quick         # smoke run (tests use this)

Prints Markdown tables (docs/BENCHMARKS.md, "Env throughput") and, with --json, writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from honest import load_line  # bench/honest.py

from sandgym.agents.scripted import OracleAgent, call, run_episode
from sandgym.envs.long_context import LongContextEnv
from sandgym.rollout.runner import RunConfig, run
from sandgym.tasks.registry import load_suite

MODEL_MS_PER_TOKEN = 100.0
"""The model's own cost we compare against (SmolLM2-135M on this CPU, per generated token)."""


def episodes_per_second(episodes: int, workers: int, reuse: bool) -> dict[str, Any]:
    """Oracle on ``coding:train`` with ``workers`` threads (one env each); one warm-up episode per worker first."""
    cfg = dict(env="sandgym/Coding-v0", tasks="coding:train", agent="oracle", workers=workers, progress=False,
               env_kwargs={"reuse_sandbox": reuse})
    run(RunConfig(episodes=workers, **cfg))  # type: ignore[arg-type]
    summary = run(RunConfig(episodes=episodes, **cfg))  # type: ignore[arg-type]
    return {"reuse_sandbox": reuse, "workers": workers, "episodes": episodes,
            "episodes_per_s": round(summary.episodes_per_s, 2), "success_rate": summary.success_rate}


def _median_ms(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 2)


def _step(env: LongContextEnv, text: str) -> None:
    _, _, terminated, truncated, _ = env.step(text)
    if terminated or truncated:
        raise RuntimeError("the episode ended during a measurement; raise its budgets")


def step_costs(tokens: int, placement: str, reps: int) -> dict[str, Any]:
    """Median ms of the env's reset and of each kind of step, for one needle task of ``tokens`` tokens."""
    task = load_suite("long_context/needle:train", n=1, seed=0, difficulty=1, tokens=tokens, placement=placement)[0]
    task = replace(task, limits=replace(task.limits, max_turns=1000))  # the most a task allows: no budget ends the measurement
    env = LongContextEnv([task], reuse_sandbox=True, max_total_observation_chars=10**12)
    row: dict[str, Any] = {"tokens": tokens, "placement": placement}
    row["reset_ms"] = _median_ms(lambda: env.reset(options={"task": task}), reps)
    env.reset(options={"task": task})
    row["no_call_step_ms"] = _median_ms(lambda: _step(env, "I am thinking about it. " * 20), reps)
    if placement == "file":
        doc = str(task.metadata["document"])
        start = time.perf_counter()
        env.step(call("list_files"))  # starts the sandbox and writes the document
        row["sandbox_start_and_files_ms"] = round((time.perf_counter() - start) * 1000, 1)
        row["read_file_page_ms"] = _median_ms(lambda: _step(env, call("read_file", path=doc, start_line=50)), reps)
        row["grep_ms"] = _median_ms(lambda: _step(env, call("grep", pattern="code", path=doc)), reps)
    row["episode_oracle_ms"] = _median_ms(lambda: run_episode(env, OracleAgent(), task), max(3, reps // 3))
    env.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="tiny budget (smoke test)")
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    args = parser.parse_args()
    episodes, reps, sizes = (args.episodes, args.reps, (1000, 4000, 16000, 64000))
    if args.quick:
        episodes, reps, sizes = 4, 3, (1000, 4000)

    print(load_line("start") + f"; {episodes} episodes per throughput run (one run each), medians of {reps} "
          "repeats per step cost", flush=True)
    throughput = [episodes_per_second(episodes, args.workers, reuse) for reuse in (False, True)]
    print(f"\n### Oracle on coding:train, {args.workers} workers\n")
    print("| sandbox per episode | episodes | episodes/s | success |\n|---|---:|---:|---:|")
    for t in throughput:
        kind = "reused + wiped (`reuse_sandbox=True`)" if t["reuse_sandbox"] else "fresh (default)"
        print(f"| {kind} | {t['episodes']} | {t['episodes_per_s']} | {t['success_rate']:.0%} |")

    rows = [step_costs(n, "file", reps) for n in sizes] + [step_costs(n, "inline", reps) for n in sizes]
    print("\n### Env cost per step (ms, median; model excluded) vs document size\n")
    cols = ["tokens", "placement", "reset_ms", "no_call_step_ms", "read_file_page_ms", "grep_ms",
            "sandbox_start_and_files_ms", "episode_oracle_ms"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "-")) for c in cols) + " |")
    print(load_line("end"))
    print(f"\nFor scale: one 50-token model turn costs ~{50 * MODEL_MS_PER_TOKEN:.0f} ms at "
          f"{MODEL_MS_PER_TOKEN:.0f} ms/token.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"throughput": throughput, "step_costs": rows}, f, indent=2)


if __name__ == "__main__":
    main()

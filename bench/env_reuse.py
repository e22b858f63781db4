"""Episodes/s through the rollout engine (the path training and evaluation take) with a fresh env and sandbox per
episode against ``EnvPool`` (envs and their sandboxes kept between rollouts, sandboxes reset in place).

    python bench/env_reuse.py               # 32 oracle episodes (strings + lists) in 4 rollouts of 8, 3 repeats
    python bench/env_reuse.py --repeats 1   # smoke run

Both are timed in alternating order per repeat; prints the load at start and end, each repeat and the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from sandgym.agents.env_pool import EnvPool
from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.rollout import rollout
from sandgym.agents.rollout_config import RolloutConfig
from sandgym.agents.scripted import OracleAgent
from sandgym.rollout.spec import RolloutSpec
from sandgym.tasks.registry import load_suite


def episodes_per_s(make: Callable[[], Any], tasks: list[Any], batch: int) -> tuple[float, int]:
    policy = ScriptedPolicy(OracleAgent)
    t = time.perf_counter()
    ok = 0
    for i in range(0, len(tasks), batch):
        trajs = rollout(policy, make, tasks[i : i + batch], group_size=1, config=RolloutConfig(max_turns=6))
        ok += sum(tr.success for tr in trajs)
    return len(tasks) / (time.perf_counter() - t), ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8, help="episodes per rollout call (one engine run)")
    args = ap.parse_args()
    tasks = load_suite("coding/strings:train", n=16, seed=0) + load_suite("coding/lists:train", n=16, seed=0)
    make = RolloutSpec(code_action="submit", max_turns=6).env_factory()
    print(f"load at start: {os.getloadavg()[0]:.2f}; {len(tasks)} episodes in rollouts of {args.batch}, "
          f"{args.repeats} repeats")
    got: dict[str, list[float]] = {"fresh": [], "pooled": []}
    for rep in range(args.repeats):
        for kind in ("fresh", "pooled") if rep % 2 == 0 else ("pooled", "fresh"):
            pool = EnvPool(make) if kind == "pooled" else None
            eps, ok = episodes_per_s(pool or make, tasks, args.batch)
            if pool is not None:
                pool.close()
            got[kind].append(eps)
            print(f"repeat {rep + 1} {kind}: {eps:.2f} episodes/s, {ok}/{len(tasks)} solved", flush=True)
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"load at end: {os.getloadavg()[0]:.2f}")
    print(f"median: fresh {med['fresh']:.2f}/s, pooled {med['pooled']:.2f}/s, {med['pooled'] / med['fresh']:.2f}x")


if __name__ == "__main__":
    main()

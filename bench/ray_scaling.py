"""Scale-out on Ray: evaluation episodes/s with 1 and 2 Ray workers vs one process, and the share of learner time
spent waiting for rollouts in synchronous vs asynchronous training.

Evaluation: the scripted oracle on coding tasks (real bwrap sandboxes; episodes are sandbox-bound), ``--samples``
x ``--seeds`` x ``--n-tasks``; the single-process path already overlaps env steps in a thread pool. Ray numbers
are given with and without the workers' start-up (import torch + build the policy).

Training: the tiny random Llama of the tests on the toy letters environment (generation-bound), ``--steps``
steps of 4 tasks x 4 samples with 2 rollout workers; the first step (actor warm-up) is excluded from the shares.

    python bench/ray_scaling.py                 # both parts, local Ray with 2 CPUs
    python bench/ray_scaling.py --skip-train --n-tasks 8
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from honest import load_line  # bench/honest.py

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests` (tiny model, toy env) when run as a script


def bench_eval(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    from sandgym.evaluate.config import EvalConfig
    from sandgym.evaluate.distributed import evaluate_policy_ray
    from sandgym.evaluate.policies import load_policy
    from sandgym.evaluate.run import evaluate_policy, load_tasks

    cfg = EvalConfig(policy="oracle", suites=tuple(args.suites), n_tasks=args.n_tasks, samples=args.samples,
                     seeds=tuple(range(args.seeds)))
    tasks = load_tasks(cfg)
    n = len(tasks) * args.samples * args.seeds
    out: list[dict[str, Any]] = []
    policy, info = load_policy("oracle")
    t0 = time.perf_counter()
    evaluate_policy(policy, info, cfg, tmp / "single", tasks=tasks)
    wall = time.perf_counter() - t0
    out.append({"path": "single process", "episodes": n, "wall_s": wall, "eps_per_s": n / wall})
    for workers in (1, 2):
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        evaluate_policy_ray("oracle", cfg, tmp / f"ray{workers}", tasks=tasks, workers=workers, timings=timings)
        wall = time.perf_counter() - t0
        out.append({"path": f"Ray, {workers} worker(s)", "episodes": n, "wall_s": wall, "eps_per_s": n / wall,
                    "startup_s": timings["startup_s"], "eps_per_s_steady": n / timings["rollout_s"]})
    return out


def bench_train(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    import tests.train.toy_env  # noqa: F401  (registers toy/Letters-v0)
    from sandgym.train.config import load_config
    from sandgym.train.loop import run
    from sandgym.train.metrics import load_metrics
    from tests.conftest import build_tiny_model, build_tiny_tokenizer
    from tests.distributed.conftest import toy_overrides

    model_dir = tmp / "tiny"
    tok = build_tiny_tokenizer()
    build_tiny_model(tok).save_pretrained(str(model_dir))
    tok.save_pretrained(str(model_dir))
    common = {"optim.steps": args.steps, "checkpoint.every": 1000, "distributed.backend": '"ray"',
              "distributed.num_workers": 2}
    regimes = {  # generation-bound: long turns, one pass; learner-bound: short turns, 4 passes + KL reference
        "generation-bound": {"rollout.max_new_tokens": args.max_new_tokens},
        "learner-bound": {"rollout.max_new_tokens": 8, "algorithm.epochs": 4, "algorithm.beta": 0.05},
    }
    modes = {"sync": {}, "async, max_staleness=1": {"distributed.async_mode": "true", "distributed.max_staleness": 1}}
    out: list[dict[str, Any]] = []
    for regime, rx in regimes.items():
        for mode, mx in modes.items():
            run_dir = tmp / f"{regime}-{mode.split(',')[0]}"
            run(load_config(None, toy_overrides(model_dir, run_dir, **common, **rx, **mx)))
            rows = load_metrics(run_dir)[1:]  # step 1 includes the first weight push to fresh actors
            wait = sum(r["dist/wait_s"] for r in rows)
            learn = sum(r["dist/learn_s"] for r in rows)
            total = sum(r["perf/step_s"] for r in rows)
            out.append({"regime": regime, "mode": mode, "steps": len(rows), "step_s": total / len(rows),
                        "wait_share": wait / total, "learn_share": learn / total,
                        "staleness_mean": sum(r["dist/staleness_mean"] for r in rows) / len(rows)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suites", nargs="+", default=["coding/strings:heldout"])
    p.add_argument("--n-tasks", type=int, default=8)
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument("--skip-eval", action="store_true")
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)

    import torch

    from sandgym.rollout.pool import init_ray

    torch.set_num_threads(1)
    init_ray(num_cpus=args.num_cpus)
    print(load_line("start") + "; one run per row (no repeats: compare rows of the same run)", flush=True)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if not args.skip_eval:
            results["eval"] = bench_eval(args, tmp)
            print("\n| evaluation path | episodes | wall s | episodes/s | start-up s | episodes/s after start-up |")
            print("|---|---|---|---|---|---|")
            for r in results["eval"]:
                print(f"| {r['path']} | {r['episodes']} | {r['wall_s']:.1f} | {r['eps_per_s']:.2f} | "
                      f"{r.get('startup_s', 0):.1f} | {r.get('eps_per_s_steady', r['eps_per_s']):.2f} |")
        if not args.skip_train:
            results["train"] = bench_train(args, tmp)
            print("\n| regime | mode | steps | s/step | learner waiting | learner updating | mean staleness |")
            print("|---|---|---|---|---|---|---|")
            for r in results["train"]:
                print(f"| {r['regime']} | {r['mode']} | {r['steps']} | {r['step_s']:.2f} | {100 * r['wait_share']:.0f}% | "
                      f"{100 * r['learn_share']:.0f}% | {r['staleness_mean']:.2f} |")
    print(load_line("end"))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

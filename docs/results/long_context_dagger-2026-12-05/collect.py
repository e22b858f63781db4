"""Stage 1 of the DAgger-style lever for the long-context track at >= 4K: the warm start's own episodes on the training tasks.

    python docs/results/long_context_dagger-2026-12-05/collect.py OUT [--warm-run runs/long_context-2026-12-04]
        [--n-tasks 48]

Runs the full-size run's warm start (docs/results/long_context-2026-12-04/: 64 demonstrations x 3 epochs) on the first ``--n-tasks`` tasks of each of the track's
4K and 8K training suites (the tasks RL trains on: the training seed draws them), one sample each at the training temperature (1.0: the
distribution RL would sample), and writes ``OUT/collect/warm_start/episodes.jsonl``: the prefixes that
``sft.source`` relabels (the oracle continues each from the state the policy reached).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from sandgym.evaluate.config import EvalConfig
from sandgym.experiments.demo import evaluate
from sandgym.train.config import load_config

CONFIG = Path(__file__).resolve().parents[3] / "examples" / "long_context_lengths.toml"
LONG = ("tokens=4096", "tokens=8192")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--warm-run", default="runs/long_context-2026-12-04",
                    help="a `sandgym demo --track long_context` run: its train/sft/adapter and eval/sft_rl")
    ap.add_argument("--n-tasks", type=int, default=48)
    args = ap.parse_args()
    out = Path(args.out)
    train = load_config(str(CONFIG), [])
    suites = tuple(d.suite for d in train.domains.mix if any(k in d.suite for k in LONG))
    cfg = EvalConfig(policy="", suites=suites, out=str(out / "collect"), samples=1, seeds=(0,), n_tasks=args.n_tasks,
                     difficulty=1, trained_families=(), task_seed=train.seed, rollout=replace(train.rollout, temperature=1.0))
    done = out / "collect" / "warm_start" / "episodes.jsonl"
    if not done.is_file():
        evaluate(str(Path(args.warm_run) / "train" / "sft" / "adapter"), "warm_start", cfg, out / "collect")
    print(f"episodes: {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

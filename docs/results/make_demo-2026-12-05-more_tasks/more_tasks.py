"""The quick demo's adapters on further held-out tasks: does its suggestive RL-over-SFT gain hold?

    python docs/results/make_demo-2026-12-05-more_tasks/more_tasks.py OUT [--first 40] [--n 200]

``OUT`` is a ``make demo`` output folder (its ``demo_config.toml``, ``train/sft/adapter`` and ``train``). Evaluates
the SFT and the SFT + RL adapters on held-out ``by_example`` tasks ``first .. first+n-1`` (the demo scored tasks
0-39; these are others of the same generator), 1 sample each at the demo's rollout settings, the same tasks and
seeds for both, and writes ``OUT/more_tasks/summary.json`` with the paired RL-over-SFT gains (completion, recovery,
verify-before-submit), and the gain pooled with the demo's own evaluation (``OUT/eval``: tasks 0-39, 2 samples;
each task's mean, paired per task, by ``sandgym.evaluate.metrics.paired_test``). The base model is left out: it scores 0 on ``by_example`` in every recorded run (it never
sees the constants and never submits).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import format_interval, format_p, paired_test
from sandgym.evaluate.policies import load_policy
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.experiments.demo import eval_config
from sandgym.train.config import load_config

SUITE = "coding/by_example:heldout"


def successes(rows: list[EpisodeRow]) -> dict[str, list[float]]:
    """Each ``SUITE`` task's episode successes (1/0)."""
    out: dict[str, list[float]] = {}
    for r in rows:
        if r.task_id.startswith("coding/by_example/"):
            out.setdefault(r.task_id, []).append(float(r.success))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--first", type=int, default=40, help="the first task's index (the demo scored 0-39)")
    ap.add_argument("--n", type=int, default=200, help="how many tasks")
    args = ap.parse_args()
    out = Path(args.out)
    config = load_config(str(out / "demo_config.toml"), [])
    cfg = eval_config(config, out / "more_tasks", n_tasks=args.first + args.n, samples=1, seeds=1)
    cfg = replace(cfg, suites=(SUITE,))
    tasks = load_tasks(cfg)[args.first:]
    print(f"{len(tasks)} held-out tasks: {tasks[0].id} .. {tasks[-1].id}", flush=True)
    specs = {"sft": out / "train" / "sft" / "adapter", "sft_rl": out / "train"}
    rows = {}
    for name, spec in specs.items():
        policy, info = load_policy(str(spec))
        rows[name] = evaluate_policy(policy, info, replace(cfg, policy=str(spec)), out / "more_tasks" / name,
                                     tasks=tasks)
    trained = ("by_example",)
    sft = aggregate(rows["sft"], samples=1, trained_families=trained)
    m = aggregate(rows["sft_rl"], samples=1, baseline=rows["sft"], trained_families=trained)
    demo = {name: [EpisodeRow.from_json(json.loads(x)) for x in
                   (out / "eval" / name / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]
            for name in specs}
    pooled = paired_test(*(successes([*demo[n], *rows[n]]) for n in ("sft_rl", "sft"))).to_json()
    summary = {"tasks": [tasks[0].id, tasks[-1].id, len(tasks)], "sft": sft["overall"], "sft_rl": m["overall"],
               "behaviour": {"sft": sft.get("behaviour"), "sft_rl": m.get("behaviour")},
               "rl_vs_sft": m["baseline"], "pooled_with_demo_eval": pooled}
    path = out / "more_tasks" / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    g = m["baseline"]["gain_overall"]
    print(f"SFT {format_interval(sft['overall']['completion'])}  SFT + RL {format_interval(m['overall']['completion'])}  "
          f"RL over SFT {format_interval(g['diff'], signed=True)} {format_p(g['p_value'])} ({g['n_pairs']} tasks)")
    print(f"pooled with the demo's 40 tasks: RL over SFT {format_interval(pooled['diff'], signed=True)} "
          f"{format_p(pooled['p_value'])} ({pooled['n_pairs']} tasks)")
    print(f"summary: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""RL for tracking from the python-tool warm start, on tracking alone, with per-turn credit that charges repeats.

    python docs/results/long_context-2026-12-05-program_tool/tracking_rl.py OUT --warm ADAPTER --warm-episodes EPISODES [--steps 10]

``docs/results/long_context-2026-12-05-more_tasks/python_tool.py``: a warm start whose demonstrations work a
tracked variable's sum out with the ``python`` tool scored 0.150 on 60 held-out tracking tasks (the plain warm start
0.017), and 8 steps of the track's GRPO from it (its whole training mix, outcome reward) fell back to 0.050: python
calls 0.83 -> 0.28 of the episodes, repeated turns 0.87 -> 3.48 an episode, budget failures 15 -> 44. This runs
the levers that episode record points at, together:

- the training mix is tracking alone, at the track's four lengths (``long_context/tracking:train``, 24 tasks each),
  so every group's reward is about copying the updates right, not about needle/multihop searches that need no sum;
- ``per_step`` advantages with the ``evidence_norepeat@v1`` turn term (``--turn-term``): the grep that shows the
  variable's SET/UPDATE lines earns credit on its turn, and a call that repeats one already run costs.

Everything else is the python warm start's config (``examples/long_context_lengths.toml`` with tools grep,
read_file, python, submit; group 6, 4 tasks a step, lr 1e-4 unless ``--lr``). The RL adapter is scored on the same
60 held-out tracking tasks (15 per length, 1 sample, temperature 0.7, the same sampling seeds: tracking comes first
in ``python_tool.py``'s task list) and paired with the warm start's own episodes there (``--warm-episodes``,
``python_tool.py``'s ``eval/python/episodes.jsonl``; only its tracking rows are read). Writes ``OUT/summary.json``; every stage resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.behaviour import behaviour
from sandgym.evaluate.episodes import EpisodeRow, read_rows
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.policies import load_policy
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.experiments.demo import eval_config
from sandgym.experiments.periodic_eval import train_with_eval
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import TrainConfig, load_config

CONFIG = Path(__file__).resolve().parents[3] / "examples" / "long_context_lengths.toml"
TOOLS = 'rollout.tools=["grep", "read_file", "python", "submit"]'
LENGTHS = (1024, 2048, 4096, 8192)


def python_calls(rows: list[EpisodeRow]) -> float:
    """Share of episodes that called ``python``."""
    return sum(any('"python"' in t["text"] for t in (r.trajectory or {}).get("turns", [])) for r in rows) / len(rows)


def rl_config(out: Path, warm: str, args: argparse.Namespace) -> TrainConfig:
    sets = [f'out_dir="{out / "train"}"', TOOLS, f"optim.steps={args.steps}", f"optim.lr={args.lr}"]
    if args.turn_term:
        sets += ['algorithm.advantage_mode="per_step"',
                 f'rollout.env_kwargs={{turn_rewards=true, turn_term="{args.turn_term}"}}']
    c = load_config(str(CONFIG), sets)
    mix = tuple(replace(d, suite=d.suite.replace("long_context:", "long_context/tracking:"), name="tracking")
                for d in c.domains.mix)
    return replace(c, init="base", model=replace(c.model, adapter=warm), domains=replace(c.domains, mix=mix))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--warm", required=True, help="the python-tool warm start (python_tool.py's OUT/train/sft/adapter)")
    ap.add_argument("--warm-episodes", required=True,
                    help="the warm start's evaluation episodes on the same tasks (python_tool.py's OUT/eval/python/episodes.jsonl)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--turn-term", default="evidence_norepeat@v1", help="per-turn term ('' for outcome reward only)")
    ap.add_argument("--per-length", type=int, default=15, help="held-out tracking tasks per length")
    args = ap.parse_args()
    out = Path(args.out)
    rl = rl_config(out, args.warm, args)
    done = latest_checkpoint(out / "train")
    if done is None or not done.name.endswith(f"{args.steps:06d}"):
        train_with_eval(rl, resume=done is not None)
    suites = tuple(f"long_context/tracking:heldout?tokens={n}&placement=file" for n in LENGTHS)
    ecfg = replace(eval_config(rl, out / "eval", n_tasks=args.per_length, samples=1, seeds=1), suites=suites)
    tasks = load_tasks(ecfg)
    policy, info = load_policy(str(out / "train"))
    rows = {"python_rl_tracking": evaluate_policy(policy, info, replace(ecfg, policy=str(out / "train")),
                                                  out / "eval" / "python_rl_tracking", tasks=tasks)}
    ids = {t.id for t in tasks}
    warm_rows = [r for r in read_rows(Path(args.warm_episodes)) if r.task_id in ids]
    if len(warm_rows) != len(tasks):
        raise SystemExit(f"--warm-episodes {args.warm_episodes}: {len(warm_rows)} of the {len(tasks)} held-out tracking "
                         "tasks scored; pass python_tool.py's eval/python/episodes.jsonl (same --per-length)")
    rows = {"python_warm_start": warm_rows, **rows}
    summary: dict[str, Any] = {"per_length": args.per_length, "suites": list(suites), "steps": args.steps,
                               "lr": args.lr, "turn_term": args.turn_term, "policies": {}}
    for name, rs in rows.items():
        m = aggregate(rs, samples=1)
        summary["policies"][name] = {
            "completion": m["overall"]["completion"],
            "by_length": {k: v["completion"]["value"] for k, v in m.get("by_length", {}).items()},
            "python_calls": python_calls(rs),
            "behaviour": {k: v["value"] for k, v in behaviour(rs).items()},
            "failures": dict(sorted(Counter(r.failure_mode for r in rs).items()))}
        p = summary["policies"][name]
        print(f"{name}: {format_interval(p['completion'])} {p['by_length']} python {p['python_calls']:.2f} "
              f"repeated calls {p['behaviour'].get('repeated_calls', 0):.2f} {p['failures']}", flush=True)
    b = aggregate(rows["python_rl_tracking"], samples=1, baseline=warm_rows, trained_families=("tracking",))["baseline"]
    summary["rl over warm start"] = {k: b.get(k) for k in ("gain_overall", "gain_by_length")}
    g = b["gain_overall"]
    print(f"rl over warm start: {format_interval(g['diff'], signed=True)} {format_p(g['p_value'])} ({g['n_pairs']} tasks)")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {out / 'summary.json'}; adapter: {out / 'train'}; eval: {out / 'eval'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

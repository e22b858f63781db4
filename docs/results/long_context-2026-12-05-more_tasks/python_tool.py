"""The tracking lever: a warm start whose demonstrations work out sums with the ``python`` tool.

    python docs/results/long_context-2026-12-05-more_tasks/python_tool.py OUT --baseline ADAPTER [--per-length 15]

Tracking (a variable's final value after a SET and many += / -= updates) stayed at 0-3 of 52 held-out 4K/8K tasks
for every long-context policy before this lever: the oracle's demonstrations grep the updates and then submit a
number the 135M model would have to add up in its head. With ``python`` among the tools the oracle copies the
numbers its search showed into ``print(10 - 5 + 7)`` and submits what it printed (``compute_turn``;
aggregation likewise, ``print(sum([...]))``). This trains that warm start (``examples/long_context_lengths.toml``,
tools grep, read_file, python, submit; 64 demonstrations x 3 epochs, as the track's own) into ``OUT/train/sft`` and
scores it and ``--baseline`` (the track's plain warm start, e.g. ``OUT/oracle_sft/train/sft/adapter`` of
``docs/results/long_context-2026-12-05-relabel_24_steps/run.sh OUT``, with the track's
tools) on the same held-out tasks: tracking (trained) and aggregation (unseen: no demonstration shows it) at 1K, 2K,
4K and 8K, 1 sample, temperature 0.7. ``--rl-steps N`` then runs the track's GRPO (its training mix, python among the
tools) from the python warm start and scores it too. Writes ``OUT/summary.json``; every stage resumes.
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
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.policies import load_policy
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.experiments.demo import eval_config
from sandgym.experiments.periodic_eval import train_with_eval
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import load_config
from sandgym.train.sft import run_sft

CONFIG = Path(__file__).resolve().parents[3] / "examples" / "long_context_lengths.toml"
TOOLS = 'rollout.tools=["grep", "read_file", "python", "submit"]'
LENGTHS = (1024, 2048, 4096, 8192)


def python_calls(rows: list[EpisodeRow]) -> float:
    """Share of episodes that called ``python``."""
    return sum(any('"python"' in t["text"] for t in (r.trajectory or {}).get("turns", [])) for r in rows) / len(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--baseline", required=True, help="the track's plain warm start (an adapter folder)")
    ap.add_argument("--per-length", type=int, default=15, help="tasks per family per length")
    ap.add_argument("--rl-steps", type=int, default=0,
                    help="then GRPO from the python warm start on the track's training mix (as the track's RL, with "
                         "python among the tools; OUT/train), scored as policy 'python_rl' and paired with it")
    args = ap.parse_args()
    out = Path(args.out)
    plain = load_config(str(CONFIG), [f'out_dir="{out / "train"}"'])
    config = load_config(str(CONFIG), [f'out_dir="{out / "train"}"', TOOLS])
    adapter = out / "train" / "sft" / "adapter"
    if not (adapter / "adapter_config.json").is_file():
        result = run_sft(config, out / "train" / "sft")
        print(f"sft: {result.demonstrations} demonstrations, losses {[round(x, 3) for x in result.losses]}", flush=True)
    policies = [("plain", args.baseline, plain), ("python", str(adapter), config)]
    if args.rl_steps:
        rl = replace(load_config(str(CONFIG), [f'out_dir="{out / "train"}"', TOOLS, f"optim.steps={args.rl_steps}"]),
                     init="base")
        rl = replace(rl, model=replace(rl.model, adapter=str(adapter)))
        done = latest_checkpoint(out / "train")
        if done is None or not done.name.endswith(f"{args.rl_steps:06d}"):
            train_with_eval(rl, resume=done is not None)
        policies.append(("python_rl", str(out / "train"), rl))
    suites = tuple(f"long_context/{f}:heldout?tokens={n}&placement=file" for f in ("tracking", "aggregation")
                   for n in LENGTHS)
    rows: dict[str, list[EpisodeRow]] = {}
    for name, spec, cfg in policies:
        ecfg = replace(eval_config(cfg, out / "eval", n_tasks=args.per_length, samples=1, seeds=1), suites=suites)
        policy, info = load_policy(spec)
        rows[name] = evaluate_policy(policy, info, replace(ecfg, policy=spec), out / "eval" / name,
                                     tasks=load_tasks(ecfg))
    trained = ("tracking",)
    summary: dict[str, Any] = {"per_length": args.per_length, "suites": list(suites), "policies": {}}
    for name, rs in rows.items():
        by_family = {}
        for fam in ("tracking", "aggregation"):
            sub = [r for r in rs if r.family == fam]
            m = aggregate(sub, samples=1)
            by_family[fam] = {"all": m["overall"]["completion"],
                              "by_length": {k: v["completion"]["value"] for k, v in m.get("by_length", {}).items()},
                              "python_calls": python_calls(sub),
                              "failures": dict(sorted(Counter(r.failure_mode for r in sub).items()))}
        summary["policies"][name] = by_family
        print(f"{name}: " + "; ".join(f"{f} {format_interval(v['all'])} {v['by_length']} python {v['python_calls']:.2f} "
                                       f"{v['failures']}" for f, v in by_family.items()), flush=True)
    pairs = [("python", "plain"), *((("python_rl", "python"), ("python_rl", "plain")) if "python_rl" in rows else ())]
    for cand_name, ref_name in pairs:
        for fam in ("tracking", "aggregation"):
            cand = [r for r in rows[cand_name] if r.family == fam]
            base = [r for r in rows[ref_name] if r.family == fam]
            b = aggregate(cand, samples=1, baseline=base, trained_families=trained)["baseline"]
            summary[f"{cand_name} vs {ref_name}, {fam}"] = {k: b.get(k) for k in ("gain_overall", "gain_by_length")}
            g = b["gain_overall"]
            print(f"{cand_name} vs {ref_name}, {fam}: {format_interval(g['diff'], signed=True)} "
                  f"{format_p(g['p_value'])} ({g['n_pairs']} tasks)")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {out / 'summary.json'}; warm start: {adapter}; eval: {out / 'eval'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

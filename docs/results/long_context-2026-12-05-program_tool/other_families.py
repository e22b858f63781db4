"""Does RL on tracking alone cost the track's other trained families? Needle and multihop, before and after.

    python docs/results/long_context-2026-12-05-program_tool/other_families.py OUT [--per-length 8] [--families constraints]

Scores ``program_tool.py``'s warm start (``OUT/sft/adapter``) and its RL adapter (``OUT/train``, trained on
tracking alone or on the track's mix) on held-out needle and multihop tasks at 1K, 2K, 4K and 8K (``--per-length``
each, 1 sample, temperature 0.7, the same tasks and sampling seeds for both, tools grep, read_file, python, submit)
and pairs them.
Writes ``OUT/other_families.json``; each evaluation resumes. ``--families`` scores other families instead (for
example the unseen ``constraints``), into ``OUT/eval_<families>`` and ``OUT/<families>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.policies import load_policy
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.experiments.demo import eval_config
from sandgym.train.config import load_config

CONFIG = Path(__file__).resolve().parents[3] / "examples" / "long_context_lengths.toml"
TOOLS = 'rollout.tools=["grep", "read_file", "python", "submit"]'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="program_tool.py's OUT")
    ap.add_argument("--per-length", type=int, default=8)
    ap.add_argument("--families", default="needle,multihop", help="comma-separated long_context families")
    args = ap.parse_args()
    out = Path(args.out)
    families = tuple(args.families.split(","))
    tag = "other_families" if families == ("needle", "multihop") else "_".join(families)
    eval_dir = out / ("eval_other" if tag == "other_families" else f"eval_{tag}")
    config = load_config(str(CONFIG), [f'out_dir="{out / "train"}"', TOOLS])
    suites = tuple(f"long_context/{f}:heldout?tokens={n}&placement=file" for f in families
                   for n in (1024, 2048, 4096, 8192))
    ecfg = replace(eval_config(config, eval_dir, n_tasks=args.per_length, samples=1, seeds=1), suites=suites)
    tasks = load_tasks(ecfg)
    rows = {}
    for name, spec in (("program", out / "sft" / "adapter"), ("program_rl", out / "train")):
        policy, info = load_policy(str(spec))
        rows[name] = evaluate_policy(policy, info, replace(ecfg, policy=str(spec)), eval_dir / name,
                                     tasks=tasks)
        del policy
    summary: dict = {"per_length": args.per_length, "suites": list(suites)}
    for fam in (*families, None) if len(families) > 1 else families:
        sub = {n: [r for r in rs if fam is None or r.family == fam] for n, rs in rows.items()}
        b = aggregate(sub["program_rl"], samples=1, baseline=sub["program"])
        g = b["baseline"]["gain_overall"]
        key = fam or "both"
        summary[key] = {"program": b["baseline"]["gain_overall"].get("baseline"),
                        "program_rl": b["overall"]["completion"], "gain": g}
        print(f"{key}: program_rl {format_interval(b['overall']['completion'])}, over program "
              f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])} ({g['n_pairs']} tasks)", flush=True)
    (out / f"{tag}.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {out / f'{tag}.json'}; eval: {eval_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

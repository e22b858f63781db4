"""The tracking lever, second form: a warm start whose python call is a program over the document, not a sum.

    python docs/results/long_context-2026-12-05-program_tool/program_tool.py OUT --python-run PYTHON_OUT [--rl-steps N]

The python warm start (``docs/results/long_context-2026-12-05-more_tasks/python_tool.py``) copies the updates its
grep showed into ``print(5 + 6 + 8 - 8)``: tracking 0.017 -> 0.150 on 60 held-out tasks, 4 of 15 at 1K and 2K but 0-1 of 15 at
4K and 8K, where there are more updates to copy and a sign or a term gets lost. With ``sft.compute = "program"``
the oracle's python call is instead the same four lines at every length::

    v=0
    for l in open('logs/updates.log'):
     if l.split()[1:2]==['lambda']:exec('v'+l.split(None,2)[2])
    print(v)

(each of the variable's lines ``SET lambda = 5`` / ``UPDATE lambda -= 3`` applied as ``v= 5`` / ``v-= 3``), so the
model has two things to copy from its context, the file's path and the variable's name, whatever the document's
length. This trains that warm start (the track's config, ``examples/long_context_lengths.toml``, tools grep,
read_file, python, submit; 64 demonstrations x 3 epochs, as ``python_tool.py``'s) into ``OUT/sft`` and scores it on
``python_tool.py``'s held-out tasks (15 tracking and 15 aggregation per length at 1K-8K, 1 sample, temperature 0.7, the same
sampling seeds), paired with the plain and expression warm starts' episodes there (``--python-run``:
``python_tool.py``'s OUT, its ``eval/plain`` and ``eval/python``). ``--rl-steps N`` then runs GRPO from it (``--rl-mix track``: the track's mix of
needle, multihop and tracking; ``tracking``: tracking alone; ``--turn-term`` as ``tracking_rl.py``) into
``OUT/train`` and scores that too. Writes ``OUT/summary.json``; every stage resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from tracking_rl import python_calls

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.behaviour import behaviour
from sandgym.evaluate.episodes import EpisodeRow, read_rows
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
FAMILIES = ("tracking", "aggregation")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--python-run", required=True, help="python_tool.py's OUT (its eval/plain, eval/python)")
    ap.add_argument("--per-length", type=int, default=15, help="tasks per family per length (python_tool.py's: 15)")
    ap.add_argument("--rl-steps", type=int, default=0)
    ap.add_argument("--rl-mix", choices=("track", "tracking"), default="track")
    ap.add_argument("--turn-term", default="", help="per-turn term with per_step advantages ('' = outcome reward)")
    ap.add_argument("--skip-aggregation-rl", action="store_true", help="score the RL adapter on tracking only")
    args = ap.parse_args()
    out = Path(args.out)
    config = load_config(str(CONFIG), [f'out_dir="{out / "train"}"', TOOLS, 'sft.compute="program"'])
    adapter = out / "sft" / "adapter"
    if not (adapter / "adapter_config.json").is_file():
        result = run_sft(config, out / "sft")
        print(f"sft: {result.demonstrations} demonstrations, losses {[round(x, 3) for x in result.losses]}", flush=True)
    suites = tuple(f"long_context/{f}:heldout?tokens={n}&placement=file" for f in FAMILIES for n in LENGTHS)
    ecfg = replace(eval_config(config, out / "eval", n_tasks=args.per_length, samples=1, seeds=1), suites=suites)
    tasks = load_tasks(ecfg)
    ids = {t.id for t in tasks}
    rows: dict[str, list[EpisodeRow]] = {}
    for name in ("plain", "python"):
        rows[f"{name}_warm_start"] = [r for r in read_rows(Path(args.python_run) / "eval" / name / "episodes.jsonl")
                               if r.task_id in ids]
        if len(rows[f"{name}_warm_start"]) != len(tasks):
            raise SystemExit(f"--python-run {args.python_run}: eval/{name} scored "
                             f"{len(rows[f'{name}_warm_start'])} of these {len(tasks)} tasks; "
                             "pass python_tool.py's OUT (same --per-length)")
    policy, info = load_policy(str(adapter))
    rows["program"] = evaluate_policy(policy, info, replace(ecfg, policy=str(adapter)), out / "eval" / "program",
                                      tasks=tasks)
    del policy
    if args.rl_steps:
        sets = [f'out_dir="{out / "train"}"', TOOLS, f"optim.steps={args.rl_steps}"]
        if args.turn_term:
            sets += ['algorithm.advantage_mode="per_step"',
                     f'rollout.env_kwargs={{turn_rewards=true, turn_term="{args.turn_term}"}}']
        rl = load_config(str(CONFIG), sets)
        if args.rl_mix == "tracking":
            rl = replace(rl, domains=replace(rl.domains, mix=tuple(
                replace(d, suite=d.suite.replace("long_context:", "long_context/tracking:"), name="tracking")
                for d in rl.domains.mix)))
        rl = replace(rl, init="base", model=replace(rl.model, adapter=str(adapter)))
        done = latest_checkpoint(out / "train")
        if done is None or not done.name.endswith(f"{args.rl_steps:06d}"):
            train_with_eval(rl, resume=done is not None)
        rl_tasks = [t for t in tasks if t.family == "tracking"] if args.skip_aggregation_rl else tasks
        policy, info = load_policy(str(out / "train"))
        rows["program_rl"] = evaluate_policy(policy, info, replace(ecfg, policy=str(out / "train")),
                                             out / "eval" / "program_rl", tasks=rl_tasks)
    summary: dict[str, Any] = {"per_length": args.per_length, "suites": list(suites), "rl_steps": args.rl_steps,
                               "rl_mix": args.rl_mix, "turn_term": args.turn_term, "policies": {}, "pairs": {}}
    for name, rs in rows.items():
        summary["policies"][name] = {}
        for fam in FAMILIES:
            sub = [r for r in rs if r.family == fam]
            if not sub:
                continue
            m = aggregate(sub, samples=1)
            p = {"completion": m["overall"]["completion"],
                 "by_length": {k: v["completion"]["value"] for k, v in m.get("by_length", {}).items()},
                 "python_calls": python_calls(sub), "behaviour": {k: v["value"] for k, v in behaviour(sub).items()},
                 "failures": dict(sorted(Counter(r.failure_mode for r in sub).items()))}
            summary["policies"][name][fam] = p
            print(f"{name} {fam}: {format_interval(p['completion'])} {p['by_length']} python {p['python_calls']:.2f} "
                  f"repeated calls {p['behaviour'].get('repeated_calls', 0):.2f} {p['failures']}", flush=True)
    pairs = [("program", "python_warm_start"), ("program", "plain_warm_start"), *((("program_rl", "program"),) if "program_rl" in rows else ())]
    for cand, ref in pairs:
        for fam in FAMILIES:
            c = [r for r in rows[cand] if r.family == fam]
            if not c:
                continue
            b = aggregate(c, samples=1, baseline=[r for r in rows[ref] if r.family == fam],
                          trained_families=("tracking",))["baseline"]
            summary["pairs"][f"{cand} vs {ref}, {fam}"] = {k: b.get(k) for k in ("gain_overall", "gain_by_length")}
            g = b["gain_overall"]
            by_len = {k: round(v["diff"]["value"], 3) for k, v in (b.get("gain_by_length") or {}).items()}
            print(f"{cand} vs {ref}, {fam}: {format_interval(g['diff'], signed=True)} {format_p(g['p_value'])} "
                  f"({g['n_pairs']} tasks) by length {by_len}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {out / 'summary.json'}; warm start: {adapter}; eval: {out / 'eval'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

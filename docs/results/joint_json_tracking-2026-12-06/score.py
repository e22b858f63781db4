"""Score a joint run of examples/joint_json_tracking.toml on each single-domain recipe's own held-out tasks.

    python docs/results/joint_json_tracking-2026-12-06/score.py RUN_DIR [--step 8] [--policies sft,rl] [--json-per-suite 16]
        [--tracking-per-length 15] [--out docs/results/joint_json_tracking-2026-12-06]

- JSON coding: the JSON track's held-out tasks of the trained families (strings, lists, numbers; 16 a suite, 1 sample,
  temperature 0.7), in examples/json_tools.toml's rollout (every tool, 160 tokens a turn, five turns,
  `require_submit`), as `docs/results/json_tools-2026-12-06/require_submit.py` scored its single-domain adapters.
- Long-context tracking: the tracking recipe's 60 held-out tracking tasks (15 per length at 1K-8K, documents in files,
  1 sample, temperature 0.7), in the tracking recipe's rollout (grep, read_file, python, submit; 96 tokens a turn,
  six turns), as `docs/results/long_context-2026-12-05-program_tool/program_tool.py` scored its single-domain adapters.
- Long-context recall (``--domains recall``): the program run's 64 held-out needle and multihop tasks (8 per family per
  length), the same rollout, as `docs/results/long_context-2026-12-05-program_tool/other_families.py --per-length 8`.

Policies: the joint warm start (RUN_DIR/sft/adapter) and the joint RL adapter after ``--step`` steps
(RUN_DIR/checkpoints/step-NNNNNN). Each policy's episodes go to OUT_RUNS/<domain>/<policy>/ (skipped when present);
writes OUT/summary.json with completion per domain (tracking per length), behaviour, failure modes and the paired
gain of RL over the joint warm start.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandgym.envs.parsing import parse_turn
from sandgym.evaluate.aggregate import aggregate, paired_gain
from sandgym.evaluate.behaviour import behaviour
from sandgym.evaluate.episodes import EpisodeRow, read_rows
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.experiments.demo import eval_config, evaluate
from sandgym.train.config import load_config

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
LENGTHS = (1024, 2048, 4096, 8192)


def domain_configs(json_per_suite: int, per_length: int, runs: Path) -> dict[str, Any]:
    """Each domain's evaluation config: the single-domain recipe's held-out tasks and rollout."""
    js = load_config(str(EXAMPLES / "json_tools.toml"))
    json_cfg = eval_config(js, runs / "json", n_tasks=json_per_suite, samples=1, seeds=1)
    json_cfg = replace(json_cfg, suites=tuple(s for s in json_cfg.suites if "parsing" not in s))  # trained families
    lc = load_config(str(EXAMPLES / "long_context_lengths.toml"),
                     ['rollout.tools=["grep", "read_file", "python", "submit"]', 'sft.compute="program"'])
    suites = tuple(f"long_context/tracking:heldout?tokens={n}&placement=file" for n in LENGTHS)
    lc_cfg = replace(eval_config(lc, runs / "tracking", n_tasks=per_length, samples=1, seeds=1), suites=suites)
    recall = tuple(f"long_context/{f}:heldout?tokens={n}&placement=file" for f in ("needle", "multihop") for n in LENGTHS)
    recall_cfg = replace(eval_config(lc, runs / "recall", n_tasks=8, samples=1, seeds=1), suites=recall)
    return {"json": json_cfg, "tracking": lc_cfg, "recall": recall_cfg}


def plans(rows: list[EpisodeRow]) -> dict[str, int]:
    """How often each sequence of tool calls (read with the env's own parser) occurs."""
    out: Counter[str] = Counter()
    for r in rows:
        turns = (r.trajectory or {}).get("turns", [])
        out[" > ".join(c.name for t in turns for c in parse_turn(t["text"]).calls)] += 1
    return dict(out.most_common())


def summary_of(rows: list[EpisodeRow]) -> dict[str, Any]:
    m = aggregate(rows, samples=1)
    return {"completion": m["overall"]["completion"], "plans": plans(rows),
            "by_family": {k: v["completion"]["value"] for k, v in m["by_family"].items()},
            "by_length": {k: v["completion"]["value"] for k, v in m.get("by_length", {}).items()},
            "behaviour": {k: v["value"] for k, v in behaviour(rows).items()},
            "failures": dict(sorted(Counter(r.failure_mode for r in rows).items()))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--step", type=int, default=8)
    ap.add_argument("--policies", default="rl,sft")
    ap.add_argument("--domains", default="tracking,json")
    ap.add_argument("--json-per-suite", type=int, default=16)
    ap.add_argument("--tracking-per-length", type=int, default=15)
    ap.add_argument("--out", default=str(Path(__file__).parent))
    ap.add_argument("--runs", default="", help="where episodes go (default RUN_DIR/score)")
    args = ap.parse_args()
    run, out = Path(args.run), Path(args.out)
    runs = Path(args.runs) if args.runs else run / "score"
    specs = {"sft": str(run / "sft" / "adapter"), "rl": str(run / "checkpoints" / f"step-{args.step:06d}")}
    cfgs = domain_configs(args.json_per_suite, args.tracking_per_length, runs)
    rows: dict[str, dict[str, list[EpisodeRow]]] = {}
    for domain in args.domains.split(","):
        cfg = cfgs[domain]
        for name in args.policies.split(","):
            path = runs / domain / name / "episodes.jsonl"
            t = time.time()
            got = read_rows(path) if path.is_file() else evaluate(specs[name], name, cfg, runs / domain)
            rows.setdefault(domain, {})[name] = got
            s = summary_of(got)
            print(f"[joint_json_tracking-2026-12-06] {domain} {name}: {format_interval(s['completion'])} {s['by_length']} "
                  f"{s['failures']} ({time.time() - t:.0f} s; {path})", flush=True)
    summary: dict[str, Any] = {"run": str(run), "step": args.step, "specs": specs, "domains": {}}
    for domain, by_policy in rows.items():
        d: dict[str, Any] = {"suites": list(cfgs[domain].suites), "policies": {}}
        for name, rs in by_policy.items():
            d["policies"][name] = summary_of(rs)
        if "rl" in by_policy and "sft" in by_policy:
            g = paired_gain(by_policy["rl"], by_policy["sft"])
            d["rl_over_sft"] = g
            if g:
                print(f"[joint_json_tracking-2026-12-06] {domain} RL over the joint warm start: "
                      f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}", flush=True)
        summary["domains"][domain] = d
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"[joint_json_tracking-2026-12-06] wrote {out / 'summary.json'}; episodes under {runs}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

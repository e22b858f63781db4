"""``sandgym sweep``: seeds x variations of one training config, resumable, with a report."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sandgym.experiments.sweep import run_sweep
from sandgym.experiments.sweep_report import write_sweep_report


def add_commands(sub: Any) -> None:
    p = sub.add_parser("sweep", help="train one config over seeds and --vary variations; report with intervals")
    p.add_argument("config", nargs="?", help="training TOML config (defaults apply without one)")
    p.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds 0..N-1 per variant (default 3)")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2",
                   help="vary a config key over values (repeatable; the cartesian product is run), "
                        "e.g. --vary algorithm.name=grpo,rloo --vary init=base,sft")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key in every run, e.g. --set eval.every=5 (repeatable)")
    p.add_argument("--out", required=True, metavar="DIR", help="sweep directory (re-run to finish a sweep)")
    p.add_argument("--report-only", action="store_true", help="rewrite the report from DIR without training")
    p.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    if args.report_only:
        write_sweep_report(args.out)
    else:
        print(f"sandgym sweep: writing to {args.out} (one run directory per variant and seed, report.md, "
              "report.html)", file=sys.stderr, flush=True)
        state = run_sweep(args.config, seeds=args.seeds, vary=args.vary, out=args.out, overrides=args.overrides)
        runs = state["runs"]
        counts = {s: sum(r["status"] == s for r in runs) for s in ("done", "skipped", "failed")}
        print(f"sweep: {len(runs)} runs ({counts['done']} trained, {counts['skipped']} already finished, "
              f"{counts['failed']} failed)")
        for r in runs:
            if r["status"] == "failed":
                print(f"  FAILED {r['variant']}/seed-{r['seed']}: {r['error']}")
    print(f"report: {args.out}/report.md and {args.out}/report.html")
    if not args.report_only and any(r["status"] == "failed" for r in state["runs"]):
        return 1
    return 0

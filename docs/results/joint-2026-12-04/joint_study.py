"""Joint training against single-domain runs on the same budget.

    python docs/results/joint-2026-12-04/joint_study.py OUT [--variants joint,long_context_only,coding_only,joint_pcgrad]

One warm start (examples/joint.toml's SFT: ~16 coding and ~64 long-context demonstrations x 3 epochs), then RL from
it in each variant with the same budget (the config's steps x tasks per step x group size):
- joint: both domains, rewards normalised per domain, the gradient cosine between domains logged each step;
- long_context_only / coding_only: the same config with one domain's suites;
- joint_pcgrad: joint with PCGrad projection (algorithm.gradient_conflict = "pcgrad").
Every policy (the warm start and each variant) is scored on the same held-out tasks: each domain's trained families
and unseen ones (coding: parsing; long context: aggregation and constraints). Each stage resumes: rerun to go on.
Writes OUT/summary.json and OUT/SUMMARY.md (per domain: completion per policy, each variant against the warm start
and joint against the single-domain run, paired; the gradient cosine per step).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.experiments.demo import eval_config, evaluate
from sandgym.experiments.periodic_eval import train_with_eval
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.components import domain_name
from sandgym.train.config import TrainConfig, load_config
from sandgym.train.sft import run_sft

CONFIG = Path(__file__).resolve().parents[3] / "examples" / "joint.toml"
DOMAINS = ("coding", "long_context")


def variant_config(base: TrainConfig, name: str, out: Path, adapter: Path) -> TrainConfig:
    mix = base.domains.mix
    if name.endswith("_only"):
        keep = name.removesuffix("_only")
        mix = tuple(d for d in mix if domain_name(d) == keep)
    algorithm = replace(base.algorithm, gradient_conflict="pcgrad") if name == "joint_pcgrad" else base.algorithm
    return replace(base, init="base", out_dir=str(out / name), algorithm=algorithm,
                   domains=replace(base.domains, mix=mix), model=replace(base.model, adapter=str(adapter)))


def gain(g: dict[str, Any] | None) -> str:
    return "n/a" if not g else f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}"


def cosines(run: Path) -> list[dict[str, Any]]:
    out = []
    for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        out.append({"step": m["step"], "grad_cosine": m.get("losses/grad_cosine"),
                    "pcgrad_projections": m.get("losses/pcgrad_projections"),
                    **{f"{d}_success": m.get(f"domain/{d}/success") for d in DOMAINS},
                    "step_s": m.get("perf/step_s")})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--variants", default="joint,long_context_only,coding_only,joint_pcgrad")
    ap.add_argument("--n-tasks", type=int, default=10, help="held-out tasks per suite")
    ap.add_argument("--samples", type=int, default=1)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    base = load_config(str(CONFIG), [f'out_dir="{out / "joint"}"'])

    t = time.perf_counter()
    sft = out / "sft"
    if not (sft / "adapter" / "adapter_config.json").is_file():
        run_sft(base, sft)
    timings["sft"] = time.perf_counter() - t

    variants = [v for v in args.variants.split(",") if v]
    for name in variants:
        t = time.perf_counter()
        cfg = variant_config(base, name, out, sft / "adapter")
        done = latest_checkpoint(out / name)
        if done is None or not done.name.endswith(f"{cfg.optim.steps:06d}"):
            print(f"[joint study] RL: {name} -> {out / name}", file=sys.stderr)
            train_with_eval(cfg, resume=done is not None)
        timings[f"rl_{name}"] = time.perf_counter() - t

    ecfg = eval_config(base, out / "eval", n_tasks=args.n_tasks, samples=args.samples, seeds=1)
    specs = {"sft": str(sft / "adapter"), **{v: str(out / v) for v in variants}}
    rows = {}
    for name, spec in specs.items():
        t = time.perf_counter()
        print(f"[joint study] eval: {name}", file=sys.stderr)
        rows[name] = evaluate(spec, name, ecfg, out / "eval")
        timings[f"eval_{name}"] = time.perf_counter() - t

    summary: dict[str, Any] = {"timings": timings, "eval_suites": list(ecfg.suites), "domains": {}}
    lines = ["| domain | policy | trained families | unseen | vs warm start (trained) | vs single-domain run "
             "(trained) |", "|---|---|---|---|---|---|"]
    for domain in DOMAINS:
        by = {k: [r for r in v if r.domain == domain] for k, v in rows.items()}
        single = f"{domain}_only" if f"{domain}_only" in by else None
        fams = ecfg.trained_families if domain == "coding" else ()  # long context: each task's unseen mark
        res = {}
        for name in specs:
            if name.endswith("_only") and name != single:
                continue  # the other domain's single run: not trained on this domain
            m = aggregate(by[name], samples=args.samples, baseline=by["sft"] if name != "sft" else None,
                          trained_families=fams)
            vs_single = None
            if single and name in ("joint", "joint_pcgrad"):
                vs_single = aggregate(by[name], samples=args.samples, baseline=by[single],
                                      trained_families=fams)["baseline"]["gain_trained"]
            res[name] = {"trained": m["transfer"]["trained"].get("completion"),
                         "unseen": m["transfer"]["unseen"].get("completion"),
                         "vs_sft": (m.get("baseline") or {}).get("gain_trained"), "vs_single": vs_single,
                         "tasks_trained": m["transfer"]["trained"].get("tasks")}
            lines.append(f"| {domain} | {name} | {format_interval(res[name]['trained'])} | "
                         f"{format_interval(res[name]['unseen'])} | {gain(res[name]['vs_sft'])} | "
                         f"{gain(vs_single)} |")
        summary["domains"][domain] = res
    summary["gradient"] = {v: cosines(out / v) for v in variants if v.startswith("joint")}
    lines += ["", "| variant | step | grad cosine | PCGrad projections | coding success | long-context success | "
              "step s |", "|---|---|---|---|---|---|---|"]
    for v, steps in summary["gradient"].items():
        for s in steps:
            lines.append(f"| {v} | {s['step']} | {s['grad_cosine'] if s['grad_cosine'] is None else round(s['grad_cosine'], 3)} | "
                         f"{s['pcgrad_projections']} | {s['coding_success']} | {s['long_context_success']} | "
                         f"{s['step_s'] and round(s['step_s'])} |")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    (out / "SUMMARY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(f"\nsummary: {out / 'SUMMARY.md'} ({out / 'summary.json'}); runs: {out}/<variant>; eval: {out / 'eval'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

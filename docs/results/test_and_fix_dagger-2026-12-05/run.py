"""The test-and-fix track with the warm start's own failures relabelled by the oracle.

    python docs/results/test_and_fix_dagger-2026-12-05/run.py OUT [--samples 2] [--steps 10] [--relabel all_states]
        [--epochs 2] [--lr 1e-4] [--base]

The earlier run (docs/results/test_and_fix-2026-12-03/) found that the track's warm start (32 oracle demonstrations, half of them a planted bug, its failing run
and the fix) teaches the loop but not the fix: recovery after a failing first attempt stays 0.01. The lever named
there is fix demonstrations built from the model's own failed attempts. Stages (each resumes):

1. ``OUT/train/sft/adapter``: the track's warm start (``examples/test_and_fix.toml``, what the demo trains).
2. ``OUT/collect/episodes.jsonl``: that warm start on the config's 96 training tasks (levels 1 and 2 of strings,
   lists, numbers; the training seed draws them), ``--samples`` each at the training temperature (1.0).
3. ``OUT/sft_dagger/adapter``: the warm start trained further on those episodes relabelled by the oracle
   (``sft.source``; ``sandgym.train.relabel``): after a failing block the oracle writes the reference and submits;
   after a passing one it submits.
4. ``OUT/rl``: GRPO from the relabelled adapter, the track's RL settings (``--steps`` steps x 4 tasks x 6); with
   ``--rl-levels 3`` on level 3 of the three families instead (``--rl-name`` names the folder): the relabelled
   SFT solves every sample of the config's own training tasks (it learned their references), so RL there has no
   reward spread.
5. Evaluations (the demo's held-out set: level 2 of the three families plus unseen parsing, 16 tasks each x 2
   samples, temperature 0.7, the same tasks for every policy) of the warm start, the relabelled SFT, SFT + RL and,
   with ``--base``, the base model; paired comparisons and the behaviour metrics in ``OUT/summary.json``.
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
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.experiments.demo import BEHAVIOURS, eval_config, evaluate
from sandgym.experiments.periodic_eval import train_with_eval
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import load_config
from sandgym.train.sft import run_sft

CONFIG = Path(__file__).resolve().parents[3] / "examples" / "test_and_fix.toml"


def gain(g: dict[str, Any] | None) -> str:
    return "n/a" if not g else f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}"


def collect(warm: Path, config: Any, out: Path, samples: int) -> Path:
    """The warm start's episodes on every training task (one evaluation per difficulty level), concatenated."""
    done = out / "episodes.jsonl"
    if done.is_file():
        return done
    by_level: dict[int, list[str]] = {}
    for d in config.domains.mix:
        by_level.setdefault(d.difficulty, []).append(d.suite)
    lines = []
    for level, suites in sorted(by_level.items()):
        n = max(d.n_tasks for d in config.domains.mix if d.difficulty == level)
        cfg = EvalConfig(policy="", suites=tuple(suites), out=str(out / f"d{level}"), samples=samples, seeds=(0,),
                         n_tasks=n, difficulty=level, trained_families=(), task_seed=config.seed,
                         rollout=replace(config.rollout, temperature=1.0))
        evaluate(str(warm), "warm_start", cfg, out / f"d{level}")
        lines += (out / f"d{level}" / "warm_start" / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    done.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=2, help="warm-start episodes per training task to relabel")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--relabel", default="all_states", choices=("last_state", "all_states"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--base", action="store_true", help="also evaluate the base model")
    ap.add_argument("--no-rl", action="store_true", help="stop after the SFT adapters' evaluations")
    ap.add_argument("--rl-levels", default="",
                    help="RL on these difficulty levels of the track's families (comma-separated, 16 tasks each) "
                         "instead of the config's mix: functions the relabelled SFT has not memorised")
    ap.add_argument("--rl-name", default="rl", help="the RL run's folder (OUT/NAME) and evaluation name suffix")
    args = ap.parse_args()
    out = Path(args.out)
    timings: dict[str, float] = {}
    config = load_config(str(CONFIG), [f'out_dir="{out / "train"}"', f"optim.steps={args.steps}"])

    t = time.perf_counter()
    warm = out / "train" / "sft" / "adapter"
    if not (warm / "adapter_config.json").is_file():
        run_sft(config, warm.parent)
    timings["sft"] = time.perf_counter() - t

    t = time.perf_counter()
    episodes = collect(warm, config, out / "collect", args.samples)
    timings["collect"] = time.perf_counter() - t

    t = time.perf_counter()
    dagger = out / "sft_dagger" / "adapter"
    relabel = load_config(str(CONFIG), [f'out_dir="{out / "sft_dagger"}"', f"sft.source={json.dumps(str(episodes))}",
                                        f"sft.epochs={args.epochs}", f"sft.lr={args.lr}",
                                        f'sft.relabel="{args.relabel}"'])
    if not (dagger / "adapter_config.json").is_file():
        result = run_sft(replace(relabel, init="base", model=replace(relabel.model, adapter=str(warm))), dagger.parent)
        print(f"relabelled sft: {result.demonstrations} samples, epoch losses {result.losses}")
    timings["sft_dagger"] = time.perf_counter() - t

    t = time.perf_counter()
    rl_out = out / args.rl_name
    rl = replace(config, out_dir=str(rl_out), init="base", model=replace(config.model, adapter=str(dagger)))
    if args.rl_levels:
        suites = dict.fromkeys(d.suite for d in config.domains.mix)
        mix = tuple(replace(config.domains.mix[0], suite=s, difficulty=int(lv), n_tasks=16)
                    for lv in args.rl_levels.split(",") for s in suites)
        rl = replace(rl, domains=replace(config.domains, mix=mix))
    done = latest_checkpoint(rl_out)
    if not args.no_rl and (done is None or not done.name.endswith(f"{args.steps:06d}")):
        train_with_eval(rl, resume=done is not None)
    timings["rl"] = time.perf_counter() - t

    ecfg = eval_config(config, out / "eval", n_tasks=16, samples=2, seeds=1)
    rl_eval = "sft_dagger_rl" if args.rl_name == "rl" else f"sft_dagger_{args.rl_name}"
    specs = {"warm_start": str(warm), "sft_dagger": str(dagger), **({} if args.no_rl else {rl_eval: str(rl_out)})}
    if args.base:
        specs["base"] = config.model.name
    rows = {}
    for name, spec in specs.items():
        t = time.perf_counter()
        rows[name] = evaluate(spec, name, ecfg, out / "eval")
        timings[f"eval_{name}"] = time.perf_counter() - t

    pairs = [("sft_dagger", "warm_start")]
    pairs += [] if args.no_rl else [(rl_eval, "sft_dagger"), (rl_eval, "warm_start")]
    pairs += [(n, "base") for n in specs if n != "base"] if args.base else []
    summary: dict[str, Any] = {"timings": timings, "policies": {}, "pairs": {}}
    for name in specs:
        m = aggregate(rows[name], samples=2, trained_families=ecfg.trained_families)
        summary["policies"][name] = {"overall": m["overall"], "transfer": m["transfer"],
                                     "behaviour": {k: m.get("behaviour", {}).get(k) for k in BEHAVIOURS},
                                     "failures": m["failure_modes"]}
        print(f"{name:14s} all {format_interval(m['overall']['completion'])}  trained "
              f"{format_interval(m['transfer']['trained'].get('completion'))}  "
              + "  ".join(f"{k} {v['value']:.3f}" for k, v in summary["policies"][name]["behaviour"].items() if v))
    for a, b in pairs:
        base = aggregate(rows[a], samples=2, baseline=rows[b], trained_families=ecfg.trained_families)["baseline"]
        summary["pairs"][f"{a}_vs_{b}"] = base
        print(f"{a} over {b}: all {gain(base.get('gain_overall'))}; trained {gain(base.get('gain_trained'))}; "
              + "; ".join(f"{k} {gain(v)}" for k, v in base["behaviour_gain"].items()))
    path = out / ("summary.json" if args.rl_name == "rl" else f"summary_{args.rl_name}.json")
    path.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {path}; evaluations: {out / 'eval'}; RL run: {rl_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

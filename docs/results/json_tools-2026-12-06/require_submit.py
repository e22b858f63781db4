"""The json_tools track with credit only for submitted work: `rollout.env_kwargs = {require_submit = true}` in
training *and* evaluation (the earlier run's RL, docs/results/json_tools-2026-12-04/, learned to stop verifying and submitting, because the env graded the final
workspace of an unsubmitted episode). Runs the demo's stages in the demo's layout (so `python -m
sandgym.experiments.transfer OUT` scores the adapters on HumanEval afterwards): SFT warm start, RL from it, then the
held-out evaluation of SFT and SFT + RL (and base with --base), each resumed when already done.

    python docs/results/json_tools-2026-12-06/require_submit.py OUT [--n-tasks 16] [--samples 1] [--base]
"""
import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from sandgym.evaluate.behaviour import behaviour
from sandgym.experiments.demo import TRACKS, check_same_config, eval_config, evaluate, train
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import load_config
from sandgym.train.sft import run_sft

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--n-tasks", type=int, default=16)
ap.add_argument("--samples", type=int, default=1)
ap.add_argument("--base", action="store_true", help="also evaluate the base model (last)")
args = ap.parse_args()
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
config = load_config(str(TRACKS["json_tools"]),
                     ["rollout.env_kwargs={require_submit=true}", f'out_dir="{out / "train"}"'])
check_same_config(out, config)
sft_dir = out / "train" / "sft"
t = time.time()
if not (sft_dir / "adapter" / "adapter_config.json").is_file():
    run_sft(config, sft_dir)
print(f"[require_submit] sft {time.time() - t:.0f} s", flush=True)
t = time.time()
rl_config = replace(config, init="base", model=replace(config.model, adapter=str(sft_dir / "adapter")))
done = latest_checkpoint(out / "train")
if done is None or not done.name.endswith(f"{config.optim.steps:06d}"):
    train(rl_config, resume=done is not None)
print(f"[require_submit] rl {time.time() - t:.0f} s", flush=True)
cfg = eval_config(config, out / "eval", n_tasks=args.n_tasks, samples=args.samples, seeds=1)
policies = [("sft", str(sft_dir / "adapter")), ("sft_rl", str(out / "train"))]
for name, spec in policies + ([("base", config.model.name)] if args.base else []):
    t = time.time()
    rows = evaluate(spec, name, cfg, out / "eval")
    ok = [r for r in rows if not r.infra_failure]
    print(f"[require_submit] eval {name} {time.time() - t:.0f} s, {len(rows)} episodes, completion "
          f"{sum(r.success for r in ok) / max(1, len(ok)):.3f}", flush=True)
    print(json.dumps({k: (v["value"], v["low"], v["high"]) for k, v in behaviour(rows).items()}), flush=True)
print(f"[require_submit] outputs: {out} (train/, eval/<policy>/)", flush=True)

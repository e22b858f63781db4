"""RL of the json_tools track from the demo's SFT adapter, then the SFT+RL adapter's evaluation on the same held-out
tasks, seeds and samples as the SFT one, exactly as the demo does them (the demo resumes all of it; its base
evaluation comes after). `python docs/results/json_tools-2026-12-04/rl_gate.py OUT` with OUT holding
docs/results/json_tools-2026-12-04-warm_start_64x3/sft_gate.py's run."""
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from sandgym.evaluate.behaviour import behaviour
from sandgym.experiments.demo import EVAL_SIZE, TRACKS, check_same_config, eval_config, evaluate, train
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import load_config

out = Path(sys.argv[1])
config = load_config(str(TRACKS["json_tools"]), [f'out_dir="{out / "train"}"'])
check_same_config(out, config)
sft_dir = out / "train" / "sft"
t = time.time()
rl_config = replace(config, init="base", model=replace(config.model, adapter=str(sft_dir / "adapter")))
done = latest_checkpoint(out / "train")
if done is None or not done.name.endswith(f"{config.optim.steps:06d}"):
    train(rl_config, resume=done is not None)
print(f"rl {time.time() - t:.0f} s", flush=True)
n, k = EVAL_SIZE["json_tools"]
cfg = eval_config(config, out / "eval", n_tasks=n, samples=k, seeds=1)
for name, spec in (("sft", str(sft_dir / "adapter")), ("sft_rl", str(out / "train"))):
    t = time.time()
    rows = evaluate(spec, name, cfg, out / "eval")
    ok = [r for r in rows if not r.infra_failure]
    b = behaviour(rows)
    print(f"eval {name} {time.time() - t:.0f} s, {len(rows)} episodes, completion "
          f"{sum(r.success for r in ok) / max(1, len(ok)):.3f}", flush=True)
    print(json.dumps({key: (v["value"], v["low"], v["high"]) for key, v in b.items()}), flush=True)

"""The JSON track's held-out evaluation of the SFT adapter and the base model on the same tasks (demo eval config)."""
import json
import sys
import time
from pathlib import Path

from sandgym.evaluate.aggregate import aggregate
from sandgym.experiments.demo import TRACKS, eval_config, evaluate
from sandgym.train.config import load_config

out = Path(sys.argv[1])
n_tasks = int(sys.argv[2])
samples = int(sys.argv[3])
names = sys.argv[4:]
config = load_config(str(TRACKS["json_tools"]))
cfg = eval_config(config, out, n_tasks=n_tasks, samples=samples, seeds=1)
specs = {"base": config.model.name, "sft": "runs/json_tools-2026-12-04-warm_start_24x2/train/sft/adapter"}
rows = {}
for name in names:
    t = time.perf_counter()
    rows[name] = evaluate(specs[name], name, cfg, out)
    print(f"[json_eval] {name}: {len(rows[name])} episodes in {time.perf_counter() - t:.0f} s", flush=True)
    m = aggregate(rows[name], samples=samples, trained_families=cfg.trained_families)
    (out / name / "metrics_summary.json").write_text(json.dumps(m, indent=2, default=str))
    print(json.dumps({"completion": m["overall"]["completion"], "behaviour": m["behaviour"],
                      "failure_modes": m["failure_modes"]}, default=str)[:3000], flush=True)
if len(rows) == 2:
    m = aggregate(rows["sft"], samples=samples, baseline=rows["base"], trained_families=cfg.trained_families)
    (out / "sft_vs_base.json").write_text(json.dumps(m, indent=2, default=str))
    print(json.dumps(m["baseline"].get("gain_overall"), default=str), flush=True)

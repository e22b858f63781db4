"""SFT of the json_tools track, then the SFT adapter's evaluation, exactly as the demo does them (the demo resumes both)."""
import json
import sys
import time
from pathlib import Path

from sandgym.evaluate.behaviour import behaviour
from sandgym.experiments.demo import EVAL_SIZE, TRACKS, check_same_config, eval_config, evaluate
from sandgym.train.config import load_config
from sandgym.train.sft import run_sft

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
config = load_config(str(TRACKS["json_tools"]), [f'out_dir="{out / "train"}"'])
check_same_config(out, config)
t = time.time()
sft_dir = out / "train" / "sft"
if not (sft_dir / "adapter" / "adapter_config.json").is_file():
    run_sft(config, sft_dir)
print(f"sft {time.time() - t:.0f} s", flush=True)
n, k = EVAL_SIZE["json_tools"]
cfg = eval_config(config, out / "eval", n_tasks=n, samples=k, seeds=1)
t = time.time()
rows = evaluate(str(sft_dir / "adapter"), "sft", cfg, out / "eval")
print(f"eval sft {time.time() - t:.0f} s, {len(rows)} episodes", flush=True)
b = behaviour(rows)
print(json.dumps({k: (v["value"], v["low"], v["high"]) for k, v in b.items()}, indent=1))
ok = [r for r in rows if not r.infra_failure]
print("completion", sum(r.success for r in ok) / max(1, len(ok)))

"""Long-context track, stronger warm start only: SFT with more demonstrations/epochs, then the held-out eval."""
import json
import sys
import time
from pathlib import Path

from sandgym.evaluate.aggregate import aggregate
from sandgym.experiments.demo import TRACKS, eval_config, evaluate
from sandgym.train.config import load_config
from sandgym.train.sft import run_sft

out = Path(sys.argv[1])
episodes, epochs = int(sys.argv[2]), int(sys.argv[3])
config = load_config(str(TRACKS["long_context"]), [f"sft.episodes={episodes}", f"sft.epochs={epochs}",
                                                    f'out_dir="{out / "train"}"'])
t = time.perf_counter()
run_sft(config, out / "train" / "sft")
print(f"[lc_sft] SFT {episodes}x{epochs} in {time.perf_counter() - t:.0f} s", flush=True)
cfg = eval_config(config, out / "eval", n_tasks=10, samples=1, seeds=1)
rows = evaluate(str(out / "train" / "sft" / "adapter"), "sft", cfg, out / "eval")
m = aggregate(rows, samples=1)
(out / "eval" / "sft" / "metrics_summary.json").write_text(json.dumps(m, indent=2, default=str))
print(json.dumps({"completion": m["overall"]["completion"], "by_length": {b: v["completion"] for b, v in m["by_length"].items()},
                  "valid_call_rate": m["behaviour"].get("valid_call_rate"), "submitted": m["behaviour"].get("submitted"),
                  "failure_modes": m["failure_modes"]}, default=str), flush=True)

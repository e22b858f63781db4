"""RL over SFT on the json_tools track, paired over the same held-out tasks and samples, from the two evaluations'
episodes (`rl_gate.py` writes them): `python docs/results/json_tools-2026-12-04/compare.py OUT` -> OUT/rl_vs_sft.json."""
import json
import sys
from pathlib import Path

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.behaviour import behaviour
from sandgym.evaluate.episodes import read_rows
from sandgym.experiments.demo import EVAL_SIZE, TRACKS, eval_config
from sandgym.train.config import load_config

out = Path(sys.argv[1])
config = load_config(str(TRACKS["json_tools"]), [f'out_dir="{out / "train"}"'])
cfg = eval_config(config, out / "eval", n_tasks=EVAL_SIZE["json_tools"][0], samples=EVAL_SIZE["json_tools"][1], seeds=1)
rows = {name: read_rows(out / "eval" / name / "episodes.jsonl") for name in ("sft", "sft_rl")}
for name, rs in rows.items():
    ok = [r for r in rs if not r.infra_failure]
    b = behaviour(rs)
    print(name, len(rs), "episodes, completion", round(sum(r.success for r in ok) / max(1, len(ok)), 3),
          {k: tuple(round(x, 3) for x in (v["value"], v["low"], v["high"])) for k, v in b.items()})
m = aggregate(rows["sft_rl"], samples=cfg.samples, baseline=rows["sft"], trained_families=cfg.trained_families)
(out / "rl_vs_sft.json").write_text(json.dumps(m, indent=2, default=str), encoding="utf-8")
print(json.dumps(m["baseline"], indent=1, default=str)[:4000])

"""One more policy on the 60 held-out 4K/8K tasks of the >= 4K runs, paired with the SFT rows already there.

    python docs/results/long_context-2026-12-05-relabel_24_steps/checkpoint_eval.py OUT SPEC NAME

``SPEC`` is an adapter or checkpoint folder (e.g. ``OUT/train/checkpoints/step-000012``); its rows go to
``OUT/eval/NAME`` (an evaluation resumes), and ``OUT/NAME.json`` gets the paired gain over ``OUT/eval/sft``
(overall, trained families, per length) with the same code as ``rl_long_only.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sandgym.evaluate.aggregate import aggregate
from sandgym.experiments.demo import eval_config, evaluate
from sandgym.train.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "long_context_4k-2026-12-04"))
from rl_long_only import CONFIG, gain, long_only, read_rows  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("spec")
    ap.add_argument("name")
    args = ap.parse_args()
    out = Path(args.out)
    config = long_only(load_config(str(CONFIG), []))
    ecfg = eval_config(config, out / "eval", n_tasks=30, samples=1, seeds=1)
    rows = evaluate(args.spec, args.name, ecfg, out / "eval")
    sft = read_rows(out / "eval" / "sft")
    m = aggregate(rows, samples=1, baseline=sft)
    b = m["baseline"]
    summary = {"spec": args.spec, "all": m["overall"]["completion"], "trained": m["transfer"]["trained"],
               "by_length": {k: v["completion"] for k, v in m.get("by_length", {}).items()},
               **{k: b.get(k) for k in ("gain_overall", "gain_trained", "gain_by_length", "gain_by_length_pooled")}}
    (out / f"{args.name}.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"{args.name} vs sft: all {gain(b.get('gain_overall'))}; trained {gain(b.get('gain_trained'))}; "
          + "; ".join(f"{k} {gain(v)}" for k, v in (b.get("gain_by_length") or {}).items()))
    print(f"summary: {out / (args.name + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

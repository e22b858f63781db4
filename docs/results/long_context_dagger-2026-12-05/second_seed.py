"""A second sampling seed for the >= 4K relabelling comparison: the relabelled SFT and its RL adapter on the same 60
held-out 4K/8K tasks with seed 1, and both seeds together (each task's mean over 2 samples, paired per task).

    python docs/results/long_context_dagger-2026-12-05/second_seed.py OUT [--sft ADAPTER] [--rl RUN_DIR] [--rl-name NAME]

Seeds the new folders (``OUT/eval_2seeds``) with seed 0's episodes (``OUT/eval/sft``, ``OUT/eval/NAME``; an
evaluation resumes, so only seed 1 runs), evaluates the SFT adapter (default ``OUT/sft_dagger/adapter``) and the RL
run (default ``OUT/train``, its last checkpoint), and writes ``OUT/second_seed.json`` with the paired gain per seed
and over both. The second pairing: ``second_seed.py runs/long_context_dagger-2026-12-05-all_states --sft
runs/long_context_dagger-2026-12-05/sft_dagger_sft_all/adapter --rl-name rl_dagger_all_evidence``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from sandgym.evaluate.aggregate import aggregate
from sandgym.experiments.demo import eval_config, evaluate
from sandgym.train.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "long_context_4k-2026-12-04"))
from rl_long_only import CONFIG, gain, long_only  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--sft", help="the SFT adapter (default OUT/sft_dagger/adapter)")
    ap.add_argument("--rl", help="the RL run directory (default OUT/train)")
    ap.add_argument("--rl-name", default="rl_dagger_evidence", help="the RL adapter's evaluation name in OUT/eval")
    args = ap.parse_args()
    out = Path(args.out)
    sft, rl = Path(args.sft or out / "sft_dagger" / "adapter"), Path(args.rl or out / "train")
    config = long_only(load_config(str(CONFIG), []))
    ecfg = eval_config(config, out / "eval_2seeds", n_tasks=30, samples=1, seeds=2)
    rows = {}
    for name, spec in {"sft": sft, args.rl_name: rl}.items():
        folder = out / "eval_2seeds" / name
        if not folder.exists():
            folder.mkdir(parents=True)
            shutil.copy(out / "eval" / name / "episodes.jsonl", folder / "episodes.jsonl")
        rows[name] = evaluate(str(spec), name, ecfg, out / "eval_2seeds")
    summary = {}
    for seeds in ((0,), (1,), (0, 1)):
        cand = [r for r in rows[args.rl_name] if r.seed in seeds]
        ref = [r for r in rows["sft"] if r.seed in seeds]
        m = aggregate(cand, samples=1, baseline=ref)
        g = m["baseline"]["gain_overall"]
        key = "+".join(map(str, seeds))
        summary[key] = {"rl": m["overall"]["completion"], "sft": aggregate(ref, samples=1)["overall"]["completion"],
                        "gain": g, "gain_by_length": m["baseline"].get("gain_by_length"),
                        "gain_trained": m["baseline"].get("gain_trained")}
        print(f"seeds {key}: RL over SFT {gain(g)} ({g['n_pairs']} tasks)")
    (out / "second_seed.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {out / 'second_seed.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

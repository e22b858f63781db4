"""Control for the joint run's long-context gain: long-context-only warm starts trained by today's code.

    python docs/results/joint_json_tracking-2026-12-06/control.py OUT --joint RUN_DIR [--seeds 0,1] [--episodes 64] [--domains tracking]

The joint warm start (examples/joint_json_tracking.toml, 128 demonstrations: 66 long context, 62 coding) scored
tracking 0.700 on the tracking recipe's 60 held-out tasks; the long-context-only warm start of the program run
(docs/results/long_context-2026-12-05-program_tool/; examples/long_context_program.toml, 64 demonstrations)
scored 0.367 there. Both saw about as many long-context
demonstrations for three epochs at one constant learning rate, so the difference is the coding demonstrations, the
code between that run and now, or the draw of demonstrations and seed. This trains the long-context recipe's
own warm start (``sft.episodes`` = ``--episodes``) for each ``--seeds`` with the code in this checkout into
``OUT/sft-seed<S>/``, scores it on the same tasks, seeds and rollout as ``score.py`` scored the joint warm start
(tracking; ``--domains tracking,recall`` adds needle and multihop), and the paired difference joint - control.
Writes (updates) ``OUT/summary.json``; each stage is skipped when its output is present.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from score import EXAMPLES, domain_configs, summary_of  # noqa: E402  (this folder's scoring of the joint run)

from sandgym.evaluate.aggregate import paired_gain  # noqa: E402
from sandgym.evaluate.episodes import EpisodeRow, read_rows  # noqa: E402
from sandgym.evaluate.metrics import format_interval, format_p  # noqa: E402
from sandgym.experiments.demo import evaluate  # noqa: E402
from sandgym.train.config import load_config  # noqa: E402
from sandgym.train.sft import run_sft  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--joint", required=True, help="the joint run directory scored by score.py (its score/<domain>/sft)")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--episodes", type=int, default=64, help="demonstrations (the long-context recipe: 64)")
    ap.add_argument("--domains", default="tracking")
    args = ap.parse_args()
    out, joint = Path(args.out), Path(args.joint)
    cfgs = domain_configs(16, 15, out / "score")
    summary_path = out / "summary.json"
    summary: dict[str, Any] = json.loads(summary_path.read_text()) if summary_path.is_file() else {"controls": {}}
    summary.update(joint=str(joint), episodes=args.episodes)
    for seed in (int(s) for s in args.seeds.split(",")):
        name = f"sft-seed{seed}"
        adapter = out / name / "adapter"
        if not (adapter / "adapter_config.json").is_file():
            config = load_config(str(EXAMPLES / "long_context_program.toml"),
                                 [f"seed={seed}", f"sft.episodes={args.episodes}", f'out_dir="{out / "train"}"'])
            t = time.time()
            result = run_sft(config, out / name)
            print(f"[control] {name}: {result.demonstrations} demonstrations in {time.time() - t:.0f} s", flush=True)
        entry: dict[str, Any] = {}
        for domain in args.domains.split(","):
            got = out / "score" / domain / name / "episodes.jsonl"
            rows = read_rows(got) if got.is_file() else evaluate(str(adapter), name, cfgs[domain], out / "score" / domain)
            ref: list[EpisodeRow] = read_rows(joint / "score" / domain / "sft" / "episodes.jsonl")
            s = summary_of(rows)
            g = paired_gain(ref, rows)
            s["joint_sft_minus_control"] = g
            entry[domain] = s
            print(f"[control] {domain} {name}: {format_interval(s['completion'])} {s['by_length']}; joint warm start "
                  f"- control {format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}", flush=True)
        summary["controls"][name] = {**summary["controls"].get(name, {}), **entry}
        out.mkdir(parents=True, exist_ok=True)
        summary_path.write_text(json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"[control] wrote {out / 'summary.json'}; episodes under {out / 'score'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Stage 2 of the DAgger-style lever for the long-context track at >= 4K: the warm start's own episodes, continued by the oracle.

    python docs/results/long_context_dagger-2026-12-05/dagger.py OUT [--warm-run runs/long_context-2026-12-04] [--epochs 2]
        [--lr 1e-4]
        [--relabel last_state|all_states] [--name sft]

- SFT (``sft.source`` = ``OUT/collect/warm_start/episodes.jsonl`` from ``collect.py``): each of the warm start's
  episodes on the 4K/8K training tasks is replayed but for its last turn, the oracle continues it from the state
  it reached (``sandgym.train.relabel``), and the warm start (the full-size run's 64 x 3 adapter) is trained further on
  the continuations' turns only (``--relabel last_state``, the first pairing) or on the oracle's label of
  every state the warm start visited (``all_states``): ``OUT/sft_dagger/adapter`` (``--name`` other than ``sft``:
  ``OUT/sft_dagger_NAME/adapter``).
- Evaluation: that adapter on the 60 held-out 4K/8K tasks (30 per length, 1 sample) every earlier >= 4K run
  scored, written where ``rl_long_only.py`` reads its warm start's evaluation (``OUT/eval/sft``), paired with the
  warm start's own rows (``--warm-start-eval``).
- ``OUT/lc_dagger`` (``OUT/lc_dagger_NAME``) is laid out like the full-size run (``train/sft/adapter`` -> the new adapter,
  ``eval/sft_rl`` -> that run's) so that RL from the new adapter is ``rl_long_only.py OUT --warm-run OUT/lc_dagger ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.experiments.demo import eval_config, evaluate
from sandgym.train.config import load_config
from sandgym.train.sft import run_sft

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "long_context_4k-2026-12-04"))
from rl_long_only import CONFIG, long_only, read_rows  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--warm-run", default="runs/long_context-2026-12-04",
                    help="a `sandgym demo --track long_context` run: its train/sft/adapter and eval/sft_rl")
    ap.add_argument("--warm-start-eval", default="runs/long_context_4k-2026-12-04/eval/sft")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--relabel", default="last_state", choices=("last_state", "all_states"))
    ap.add_argument("--name", default="sft", help="the evaluation's name (OUT/eval/NAME)")
    args = ap.parse_args()
    out, warm_run = Path(args.out), Path(args.warm_run)
    warm = warm_run / "train" / "sft" / "adapter"
    episodes = out / "collect" / "warm_start" / "episodes.jsonl"
    base = load_config(str(CONFIG), [f'out_dir="{out / "train"}"', f"sft.source={json.dumps(str(episodes))}",
                                     f"sft.epochs={args.epochs}", f"sft.lr={args.lr}",
                                     f'sft.relabel="{args.relabel}"'])
    config = replace(long_only(base), init="base", model=replace(base.model, adapter=str(warm)))
    timings = {}
    suffix = "" if args.name == "sft" else f"_{args.name}"
    adapter = out / f"sft_dagger{suffix}" / "adapter"
    if not (adapter / "adapter_config.json").is_file():
        t = time.perf_counter()
        result = run_sft(config, adapter.parent)
        timings["sft"] = time.perf_counter() - t
        print(f"sft: {result.demonstrations} continuations, epoch losses {result.losses}")
    ecfg = eval_config(config, out / "eval", n_tasks=30, samples=1, seeds=1)
    t = time.perf_counter()
    rows = evaluate(str(adapter), args.name, ecfg, out / "eval")
    timings["eval"] = time.perf_counter() - t
    ids = {(r.task_id, r.sample, r.seed) for r in rows}
    warm = Path(args.warm_start_eval)  # absent without the 4K/8K-only run's evaluation: no pairing then
    warm_rows = [r for r in read_rows(warm) if (r.task_id, r.sample, r.seed) in ids] \
        if (warm / "episodes.jsonl").is_file() else []
    m = aggregate(rows, samples=1, baseline=warm_rows or None)
    g = (m.get("baseline") or {}).get("gain_overall") or {}
    print(f"dagger sft: all {format_interval(m['overall']['completion'])}, trained "
          f"{format_interval(m['transfer']['trained'].get('completion'))}; over the warm start "
          + (f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])} ({len(warm_rows)} paired)" if g
             else "not paired (no warm-start evaluation)"))
    (out / f"dagger_summary{suffix}.json").write_text(json.dumps({"timings": timings, "metrics": m}, indent=2, default=str),
                                             encoding="utf-8")
    like = out / f"lc_dagger{suffix}"
    (like / "train" / "sft").mkdir(parents=True, exist_ok=True)
    (like / "eval").mkdir(parents=True, exist_ok=True)
    for link, target in ((like / "train" / "sft" / "adapter", adapter), (like / "eval" / "sft_rl", warm_run / "eval" / "sft_rl")):
        if not link.exists() and target.exists():
            link.symlink_to(target.resolve())
    print(f"adapter: {adapter}; eval: {out / 'eval' / args.name}; summary: {out / f'dagger_summary{suffix}.json'}; RL: "
          f"rl_long_only.py {out} --warm-run {like}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The relabelled long-context adapters (24 RL steps) on further held-out 4K/8K tasks: does RL over the every-state SFT resolve?

    python docs/results/long_context-2026-12-05-more_tasks/more_tasks.py OUT [--per-length 100] [--policy NAME ...]

``OUT`` is a ``docs/results/long_context-2026-12-05-relabel_24_steps/run.sh`` folder. Every earlier >= 4K run scored held-out tasks 0-29
of each length (4K, 8K: 60 tasks, ``OUT/eval``). This scores tasks 30 .. 30+per_length-1 of each length (same generator,
same five families: needle, multihop, tracking trained; aggregation, constraints unseen), 1 sample at the track's
rollout settings, the same tasks and seeds for every policy:

- ``sft``: the every-state relabelled warm start (``OUT/lc_dagger/train/sft/adapter``);
- ``rl_evidence_24``: 24 GRPO steps from it (``OUT/train``); ``rl_evidence_12``: its step-12 checkpoint.

Writes ``OUT/more_tasks/summary.json``: each policy's completion (overall, trained, unseen, per length) and the
paired RL-over-SFT gains on the new tasks and pooled with the first 60 (``OUT/eval``), each task paired by id.
Evaluations resume (``OUT/more_tasks/NAME/episodes.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.policies import load_policy
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.experiments.demo import eval_config
from sandgym.train.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "long_context_4k-2026-12-04"))
from rl_long_only import CONFIG, long_only, read_rows  # noqa: E402

FIRST = 30  # tasks 0-29 of each length were scored by every earlier >= 4K run


def specs(out: Path) -> dict[str, Path]:
    return {"sft": out / "lc_dagger" / "train" / "sft" / "adapter", "rl_evidence_24": out / "train",
            "rl_evidence_12": out / "train" / "checkpoints" / "step-000012"}


def gains(rows: list[EpisodeRow], sft: list[EpisodeRow], trained: tuple[str, ...]) -> dict[str, Any]:
    b = aggregate(rows, samples=1, baseline=sft, trained_families=trained)["baseline"]
    return {k: b.get(k) for k in ("gain_overall", "gain_trained", "gain_unseen", "gain_by_length")}


def line(name: str, g: dict[str, Any]) -> str:
    def one(x: dict[str, Any] | None) -> str:
        return "n/a" if not x else f"{format_interval(x['diff'], signed=True)} {format_p(x['p_value'])} (n={x['n_pairs']})"
    return (f"{name}: all {one(g['gain_overall'])}; trained {one(g['gain_trained'])}; "
            + "; ".join(f"{k} {one(v)}" for k, v in (g.get("gain_by_length") or {}).items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--per-length", type=int, default=100, help="new tasks per document length")
    ap.add_argument("--policy", action="append", default=[], help="only these policies (default: all three)")
    args = ap.parse_args()
    out = Path(args.out)
    config = long_only(load_config(str(CONFIG), []))
    cfg = eval_config(config, out / "more_tasks", n_tasks=FIRST + args.per_length, samples=1, seeds=1)
    first = {t.id for t in load_tasks(replace(cfg, n_tasks=FIRST))}
    tasks = [t for t in load_tasks(cfg) if t.id not in first]
    print(f"{len(tasks)} new held-out tasks ({args.per_length} per length; {len(first)} scored before)", flush=True)
    chosen = {k: v for k, v in specs(out).items() if not args.policy or k in args.policy or k == "sft"}
    rows: dict[str, list[EpisodeRow]] = {}
    for name, spec in chosen.items():
        policy, info = load_policy(str(spec))
        rows[name] = evaluate_policy(policy, info, replace(cfg, policy=str(spec)), out / "more_tasks" / name,
                                     tasks=tasks)
    trained = cfg.trained_families
    summary: dict[str, Any] = {"new_tasks": len(tasks), "per_length": args.per_length, "policies": {},
                               "new": {}, "pooled": {}}
    before = {name: read_rows(out / "eval" / name) for name in rows}
    for name, rs in rows.items():
        for key, pool in (("new", rs), ("pooled", [*before[name], *rs])):
            m = aggregate(pool, samples=1, trained_families=trained)
            summary["policies"].setdefault(name, {})[key] = {
                "episodes": len(pool), "all": m["overall"]["completion"],
                "trained": m["transfer"]["trained"].get("completion"),
                "unseen": m["transfer"]["unseen"].get("completion"),
                "by_length": {k: v["completion"] for k, v in m.get("by_length", {}).items()},
                "failures": dict(sorted(Counter(r.failure_mode for r in pool).items()))}
        print(f"{name}: new {format_interval(summary['policies'][name]['new']['all'])}, pooled "
              f"{format_interval(summary['policies'][name]['pooled']['all'])}", flush=True)
    for name in rows:
        if name == "sft":
            continue
        summary["new"][f"{name} vs sft"] = g = gains(rows[name], rows["sft"], trained)
        print("new tasks   " + line(name, g))
        summary["pooled"][f"{name} vs sft"] = g = gains([*before[name], *rows[name]], [*before["sft"], *rows["sft"]],
                                                        trained)
        print("pooled      " + line(name, g))
    path = out / "more_tasks" / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

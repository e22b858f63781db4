"""A >= 4K lever for the long-context track: RL only on 4K and 8K documents, from the full-size run's warm start
(docs/results/long_context-2026-12-04/), scored on the same 60 held-out 4K/8K tasks as that warm start and as that
run's all-length RL.

    python docs/results/long_context_4k-2026-12-04/rl_long_only.py OUT [--warm-run runs/long_context-2026-12-04]
        [--steps 12]
        [--name rl_4k_8k] [--set KEY=VALUE ...] [--compare NAME=EPISODES_DIR ...]

- RL: examples/long_context_lengths.toml with only its 4096- and 8192-token suites in the mix (48 tasks each),
  ``--steps`` GRPO steps x 4 tasks x 6 samples, from ``WARM_RUN/train/sft/adapter`` (64 demonstrations x 3 epochs);
- evaluation (current code, 30 held-out tasks per length x 1 sample, the tasks the full-size run scored): the warm
  start again and the new adapter; that run's all-length SFT + RL rows (``WARM_RUN/eval/sft_rl``) are paired on the same
  task ids. Resumes every stage. Writes OUT/summary.json and prints the comparison.
- ``--set`` overrides the training config (as ``sandgym train --set``), ``--name`` names the new adapter's rows,
  ``--compare`` pairs more earlier evaluations (an ``episodes.jsonl`` folder) on the same tasks. Every policy also
  gets its evidence-found rate: the share of the task's evidence lines (``metadata["evidence"]``) its searches
  showed, recomputed from the episodes' tool calls with ``evidence@v1``'s rules.

The per-turn evidence lever (docs/results/long_context_evidence-2026-12-05/): ``--name rl_evidence --set 'algorithm.advantage_mode="per_step"'
--set 'rollout.env_kwargs={turn_rewards=true, turn_term="evidence@v1"}' --compare rl_4k_8k=runs/long_context_4k-2026-12-04/eval/rl_4k_8k``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandgym.envs.turn_terms import TURN_TERMS, recorded_calls, repeated_calls, run_turns
from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.run import load_tasks
from sandgym.experiments.demo import eval_config, evaluate
from sandgym.experiments.periodic_eval import train_with_eval
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import load_config

CONFIG = Path(__file__).resolve().parents[3] / "examples" / "long_context_lengths.toml"
LONG = ("tokens=4096", "tokens=8192")


def long_only(config: Any) -> Any:
    """``config`` with only its 4K and 8K suites in the mix, 48 training tasks each (the RL tasks of every 4K/8K lever)."""
    mix = tuple(replace(d, n_tasks=48) for d in config.domains.mix if any(k in d.suite for k in LONG))
    return replace(config, domains=replace(config.domains, mix=mix))


def gain(g: dict[str, Any] | None) -> str:
    return "n/a" if not g else f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}"


def read_rows(folder: Path) -> list[EpisodeRow]:
    lines = (folder / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    return [EpisodeRow.from_json(json.loads(line)) for line in lines]


def evidence_found(rows: list[EpisodeRow], tasks: dict[str, Any]) -> float | None:
    """Mean share of each task's evidence lines its episode's searches showed (``evidence@v1``'s rules)."""
    term, shares = TURN_TERMS["evidence@v1"], []
    for r in rows:
        task = tasks.get(r.task_id)
        if task is None or not term.items(task.metadata) or not r.trajectory:
            continue
        turns = [{"text": t["text"], "calls": recorded_calls(t["text"], t["observation"]) or ()}
                 for t in r.trajectory.get("turns", [])]
        shares.append(sum(run_turns(term.credit, turns, task.metadata, task.files)))
    return sum(shares) / len(shares) if shares else None


def repeats(rows: list[EpisodeRow]) -> float | None:
    """Mean tool calls per episode that repeated one already run in it (same tool, arguments and output),
    recomputed from the episodes' recorded calls (earlier evaluations predate ``Actions.repeated_calls``)."""
    counts = []
    for r in rows:
        earlier: list[Any] = []
        n = 0
        for t in (r.trajectory or {}).get("turns", []):
            calls = recorded_calls(t["text"], t["observation"]) or ()
            n += repeated_calls(calls, earlier)
            earlier += calls
        counts.append(n)
    return sum(counts) / len(counts) if counts else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--warm-run", default="runs/long_context-2026-12-04",
                    help="a `sandgym demo --track long_context` run: its train/sft/adapter and eval/sft_rl")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--name", default="rl_4k_8k", help="name of the new adapter's evaluation")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="training config override")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=DIR",
                    help="an earlier evaluation (a folder with episodes.jsonl) to pair on the same tasks")
    args = ap.parse_args()
    out, warm_run = Path(args.out), Path(args.warm_run)
    out.mkdir(parents=True, exist_ok=True)
    adapter = warm_run / "train" / "sft" / "adapter"
    base = load_config(str(CONFIG), [f'out_dir="{out / "train"}"', f"optim.steps={args.steps}", *args.set])
    config = replace(long_only(base), init="base", model=replace(base.model, adapter=str(adapter)))
    timings = {}
    t = time.perf_counter()
    done = latest_checkpoint(out / "train")
    if done is None or not done.name.endswith(f"{config.optim.steps:06d}"):
        train_with_eval(config, resume=done is not None)
    timings["rl"] = time.perf_counter() - t

    ecfg = eval_config(config, out / "eval", n_tasks=30, samples=1, seeds=1)
    rows: dict[str, list[EpisodeRow]] = {}
    for name, spec in {"sft": str(adapter), args.name: str(out / "train")}.items():
        t = time.perf_counter()
        rows[name] = evaluate(spec, name, ecfg, out / "eval")
        timings[f"eval_{name}"] = time.perf_counter() - t
    ids = {(r.task_id, r.sample, r.seed) for r in rows["sft"]}
    earlier = {"rl_all_lengths": warm_run / "eval" / "sft_rl",
               **{k: Path(v) for k, v in (c.split("=", 1) for c in args.compare)}}
    earlier = {k: v for k, v in earlier.items() if (v / "episodes.jsonl").is_file() or k != "rl_all_lengths"}
    for name, folder in earlier.items():
        rows[name] = [r for r in read_rows(folder) if (r.task_id, r.sample, r.seed) in ids]
    tasks = {t.id: t for t in load_tasks(ecfg)}

    summary: dict[str, Any] = {"timings": timings, "suites": list(ecfg.suites), "policies": {}, "paired": {}}
    for name, rs in rows.items():
        m = aggregate(rs, samples=1)
        summary["policies"][name] = {"episodes": len(rs), "all": m["overall"]["completion"],
                                     "trained": m["transfer"]["trained"].get("completion"),
                                     "unseen": m["transfer"]["unseen"].get("completion"),
                                     "evidence_found": evidence_found(rs, tasks),
                                     "repeated_calls": repeats(rs),
                                     "failures": dict(sorted(Counter(r.failure_mode for r in rs).items())),
                                     "by_length": {k: v["completion"] for k, v in m.get("by_length", {}).items()}}
    pairs = [(args.name, "sft"), *((k, "sft") for k in earlier), *((args.name, k) for k in earlier)]
    for cand, ref in pairs:
        b = aggregate(rows[cand], samples=1, baseline=rows[ref])["baseline"]
        summary["paired"][f"{cand} vs {ref}"] = {k: b.get(k) for k in ("gain_overall", "gain_trained",
                                                                       "gain_unseen", "gain_by_length")}
        print(f"{cand} vs {ref}: all {gain(b.get('gain_overall'))}; trained {gain(b.get('gain_trained'))}; "
              + "; ".join(f"{k} {gain(v)}" for k, v in (b.get("gain_by_length") or {}).items()))
    for name, p in summary["policies"].items():
        print(f"{name}: all {format_interval(p['all'])} trained {format_interval(p['trained'])} "
              f"evidence found {p['evidence_found']} repeated calls {p['repeated_calls']} failures {p['failures']} "
              f"({p['episodes']} episodes)")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(f"summary: {out / 'summary.json'}; training: {out / 'train'}; eval: {out / 'eval'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

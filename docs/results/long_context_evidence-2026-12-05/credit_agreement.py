"""Did the evidence@v1 credit paid during the evidence RL run (the term's first version, which recomputed a call's
view from the pristine document) equal what the final version (which reads the tools' output) pays? And how often
was credit paid only on an episode's last turn (dropped from per-step advantages before a later fix)?

    python docs/results/long_context_evidence-2026-12-05/credit_agreement.py RUN/train/trajectories.jsonl

Each recorded turn is replayed with the final term: its tool calls and their outputs paired from the turn's text
and observation (``sandgym.envs.turn_terms.recorded_calls``).
The paid credit is read from the trajectory (``metadata["turn_rewards"]`` minus the step reward), so the
comparison is per turn: paid by the run vs paid by the final term.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from sandgym.envs.rewards import INTERMEDIATE_DEFAULT_WEIGHT
from sandgym.envs.turn_terms import TURN_TERMS, Turn, recorded_calls
from sandgym.tasks.registry import load_suite


def main(path: str) -> int:
    term = TURN_TERMS["evidence@v1"]
    counts: Counter[str] = Counter()
    tasks = {task.id: task for tokens in (4096, 8192)  # the run's training tasks (rl_long_only.py's mix)
             for task in load_suite(f"long_context:train?tokens={tokens}&placement=file", n=48, difficulty=1)}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        t = json.loads(line)
        task = tasks[t["task_id"]]
        recorded = t["metadata"].get("turn_rewards")
        paid_total = t["reward_components"].get("evidence@v1", 0.0)
        if recorded is None and paid_total > 0:
            counts["episodes whose credit was paid only on the last turn (dropped)"] += 1
        decided: dict[int, bool] = {}
        for k, turn in enumerate(t["turns"]):
            ran = recorded_calls(turn["text"], turn["observation"])
            counts["turns"] += 1
            if ran is None:
                counts["turns whose calls cannot be paired with outputs"] += 1
                continue
            counts["turns with 2+ calls"] += len(ran) > 1
            credit, new = term.credit(Turn(turn["text"], ran, task.metadata, task.files), decided)
            decided.update(new)
            final_step = k == len(t["turns"]) - 1
            paid = (recorded[k] - (t["reward"] if final_step else 0.0)) / INTERMEDIATE_DEFAULT_WEIGHT \
                if recorded is not None else None
            if paid is None:
                continue
            counts["turns compared"] += 1
            if abs(paid - credit) > 1e-9:
                counts["turns paid differently"] += 1
                print(f"differs: {t['task_id']} step {t['step']} turn {k}: run {paid:.3f} final {credit:.3f}")
    for k, v in counts.items():
        print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

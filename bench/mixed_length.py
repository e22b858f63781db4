"""A training step that mixes long-context and short episodes: naive batching against length-aware batching
for the rollout's sampling and for the learner.

    python bench/mixed_length.py                         # a 4K-token document group + 3 short groups, 2 repeats
    python bench/mixed_length.py --long 8192 --repeats 1

The step: one long-context task (a ``--long``-token document, ``--group`` samples) and ``--short-tasks`` coding-size
tasks (``--short`` tokens, ``--group`` samples each), ``--new`` sampled tokens per row, on the embedded
SmolLM2-135M with a LoRA adapter and activation checkpointing in the learner.

* rollout: ``HFPolicy.generate`` on all rows at once. Naive (``pad_slack = -1``): one batch, every distinct prompt
  left-padded to the document's length. Length-aware (the default): one batch per length bucket, shortest first.
  Also reported: when the last short row finished (what a short episode waits before its env step can start).
* learner: one ``learner_update`` on the step's rows. Naive (``pad_slack = -1``, the earlier micro-batching):
  micro-batches cut from the rows sorted by prompt, so when the group size is not a multiple of the micro-batch a
  short row shares a micro-batch with document rows and is padded to their length. Length-aware (the default):
  length buckets first (:func:`sandgym.train.step.micro_batches`).

Each repeat runs both variants in alternating order; prints load at start and end, medians and spread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long", type=int, default=4096, help="document tokens of the long-context task")
    ap.add_argument("--short", type=int, default=300, help="prompt tokens of each short task")
    ap.add_argument("--short-tasks", type=int, default=3)
    ap.add_argument("--group", type=int, default=6, help="samples per task")
    ap.add_argument("--new", type=int, default=32, help="tokens sampled per row")
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import torch

    from sandgym.agents.hf import HFPolicy, LoraSpec
    from sandgym.agents.policy import GenerationRequest, SamplingParams
    from sandgym.train.config import AlgorithmConfig
    from sandgym.train.shared_prefix import set_activation_checkpointing
    from sandgym.train.step import Sample, learner_update

    torch.set_num_threads(2)
    print(f"load at start: {os.getloadavg()[0]:.2f}; long {args.long}, short {args.short} x {args.short_tasks}, "
          f"group {args.group}, {args.new} new tokens, {args.repeats} repeats", flush=True)
    policy = HFPolicy("smollm2-135m", lora=LoraSpec(r=16, alpha=32, dropout=0.0))
    set_activation_checkpointing(policy.model.train(), True)
    prompts = [tuple(torch.randint(100, 40000, (n,), generator=torch.Generator().manual_seed(t)).tolist())
               for t, n in enumerate([args.long] + [args.short] * args.short_tasks)]
    requests = [GenerationRequest(key=t * args.group + g, messages=(), observation="", info={},
                                  max_new_tokens=args.new, token_ids=p)
                for t, p in enumerate(prompts) for g in range(args.group)]
    sampling = SamplingParams(temperature=1.0, stop_strings=())
    policy.kv_reuse_mb = 0
    sampled: list[Any] = []  # the last rollout's generations: the learner trains on them

    def rollout(slack: int) -> dict[str, float]:
        policy.pad_slack = slack
        reqs = [GenerationRequest(**{**r.__dict__, "generator": torch.Generator().manual_seed(r.key)}) for r in requests]
        t0 = time.perf_counter()
        short_done: list[float] = []
        out = policy.generate(reqs, sampling, on_done=lambda i, _g: short_done.append(time.perf_counter() - t0)
                              if len(reqs[i].token_ids) == args.short else None)
        total = time.perf_counter() - t0
        sampled[:] = out
        return {"step_s": total, "short_wait_s": max(short_done)}

    def samples() -> list[Sample]:
        rows = []
        for r, g in zip(requests, sampled, strict=True):
            ids = r.token_ids + g.token_ids
            mask = (0,) * len(r.token_ids) + (1,) * len(g.token_ids)
            rows.append(Sample(ids, mask, (0.0,) * len(r.token_ids) + g.logprobs,
                               tuple((0.5 if r.key % 2 else -0.5) * m for m in mask)))
        return rows

    def learn(slack: int) -> dict[str, float]:
        opt = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=0.0)
        batch = samples()
        t0 = time.perf_counter()
        learner_update(policy.model, opt, batch, AlgorithmConfig(beta=0.0), pad_id=0, temperature=1.0,
                       micro_batch=args.micro_batch, max_grad_norm=1.0, norm_len=args.long, pad_slack=slack)
        return {"step_s": time.perf_counter() - t0}

    results: dict[str, list[dict[str, float]]] = {}
    rollout(-1)  # warm-up, and rows for the learner
    for rep in range(args.repeats):
        for phase, fn in (("rollout", rollout), ("learner", learn)):
            order = ("naive", "length-aware") if rep % 2 == 0 else ("length-aware", "naive")
            for variant in order:
                res = fn(-1 if variant == "naive" else 1024)
                results.setdefault(f"{phase} {variant}", []).append(res)
                print(f"repeat {rep + 1} {phase} {variant}: {res}", flush=True)
    print(f"load at end: {os.getloadavg()[0]:.2f}")
    print("\n| phase | batching | step s median (spread) | short rows done after s |\n|---|---|---:|---:|")
    for key, runs in results.items():
        steps = [r["step_s"] for r in runs]
        waits = [r["short_wait_s"] for r in runs if "short_wait_s" in r]
        wait = f"{statistics.median(waits):.1f}" if waits else "-"
        print(f"| {key.split()[0]} | {key.split()[1]} | {statistics.median(steps):.1f} "
              f"({max(steps) - min(steps):.1f}) | {wait} |")
    for phase in ("rollout", "learner"):
        naive = statistics.median(r["step_s"] for r in results[f"{phase} naive"])
        aware = statistics.median(r["step_s"] for r in results[f"{phase} length-aware"])
        print(f"{phase}: naive / length-aware = {naive / aware:.2f}x")


if __name__ == "__main__":
    main()

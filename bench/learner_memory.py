"""Peak memory and time of one learner micro-batch on long documents, with and without activation checkpointing
(target: a learner micro-batch at 8K tokens within 4 GB), and with the output head in blocks or whole.

    python bench/learner_memory.py                                   # 1K 2K 4K 8K, 4 rows, both modes
    python bench/learner_memory.py --lengths 1024 2048 --rows 1      # smoke run
    python bench/learner_memory.py --lengths 4096 --sampled 4032 --modes checkpointing --heads blocked full

A micro-batch is what a GRPO step trains on a long-context task: ``--rows`` samples of one task share its
document (``LENGTH - 64`` prompt tokens) and each ends with its own 64 sampled tokens. One ``learner_update``
(the embedded SmolLM2-135M, a fresh LoRA adapter with the training config's defaults, float32, 2 threads) runs
once to warm up and then ``--repeats`` times, in a process of its own per (length, mode) so that ``ru_maxrss`` is
that run's peak. Modes: ``plain`` (every activation kept) and ``checkpointing`` (``[optim]
activation_checkpointing``: layer inputs kept, the rest recomputed). ``--sampled`` tokens of each row are trained
on (64: a GRPO completion; nearly all: an SFT demonstration, whose assistant turns run through the episode). Heads:
``blocked`` (the learner's: hidden states out, the head on 1,024 positions at a time, sandgym.train.head) and
``full`` (the model's own logits for every trained position, as before). Prints load at start and end, the medians
and spread, and the peak RSS above the loaded model's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

COMPLETION = 64


def run_one(length: int, mode: str, rows: int, repeats: int, sampled: int = COMPLETION,
            head: str = "blocked") -> dict[str, Any]:
    import contextlib

    import torch

    import sandgym.train.step as step_mod
    from sandgym.agents.hf import HFPolicy, LoraSpec
    from sandgym.train.config import AlgorithmConfig, ModelConfig
    from sandgym.train.shared_prefix import set_activation_checkpointing
    from sandgym.train.step import Sample, learner_update

    torch.set_num_threads(2)
    if head == "full":
        step_mod.hidden_states_out = lambda _model: contextlib.nullcontext(None)  # type: ignore[assignment]
    m = ModelConfig()
    policy = HFPolicy("smollm2-135m", lora=LoraSpec(r=m.lora_r, alpha=m.lora_alpha, dropout=m.lora_dropout))
    model = policy.model.train()
    set_activation_checkpointing(model, mode == "checkpointing")
    prompt = torch.randint(100, 40000, (length - sampled,), generator=torch.Generator().manual_seed(length))
    samples = []
    for r in range(rows):
        done = torch.randint(100, 40000, (sampled,), generator=torch.Generator().manual_seed(r))
        mask = (0,) * (length - sampled) + (1,) * sampled
        samples.append(Sample(tuple(prompt.tolist() + done.tolist()), mask, tuple(-1.0 * x for x in mask),
                              tuple((0.5 if r % 2 else -0.5) * x for x in mask)))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def step() -> float:
        t = time.perf_counter()
        learner_update(model, opt, samples, AlgorithmConfig(beta=0.0), pad_id=0, temperature=1.0,
                       micro_batch=rows, max_grad_norm=1.0, norm_len=length)
        return time.perf_counter() - t

    first = step()
    times = [step() for _ in range(repeats)] or [first]  # --repeats 0: the first step's time (memory runs)
    return {"length": length, "mode": mode, "head": head, "sampled": sampled, "rows": rows, "step_s": statistics.median(times),
            "spread_s": max(times) - min(times), "tok_s": rows * length / statistics.median(times),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "model_rss_mb": loaded,
            "attention": str(getattr(model.config, "_attn_implementation", "?"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--modes", nargs="+", default=["checkpointing", "plain"], choices=["checkpointing", "plain"])
    ap.add_argument("--heads", nargs="+", default=["blocked"], choices=["blocked", "full"])
    ap.add_argument("--sampled", type=int, default=COMPLETION, help="trained tokens at the end of each row")
    ap.add_argument("--rows", type=int, default=4, help="samples of one task in the micro-batch (shared prompt)")
    ap.add_argument("--repeats", type=int, default=1, help="timed steps after the warm-up (0: time the warm-up)")
    ap.add_argument("--max-plain", type=int, default=4096,
                    help="longest length run without checkpointing (8K needs ~26 GB of saved activations)")
    ap.add_argument("--one", nargs=3, metavar=("LENGTH", "MODE", "HEAD"), help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(int(args.one[0]), args.one[1], args.rows, args.repeats, args.sampled, args.one[2])))
        return
    print(f"load at start: {os.getloadavg()[0]:.2f}; lengths {args.lengths}, rows {args.rows}, "
          f"{args.repeats} repeats after a warm-up, {args.sampled} trained tokens a row", flush=True)
    results = []
    for length, mode, head in ((n, m, h) for n in args.lengths for m in args.modes for h in args.heads):
        if mode == "plain" and length > args.max_plain:
            print(f"{length} {mode}: skipped (--max-plain {args.max_plain})", flush=True)
            continue
        cmd = [sys.executable, __file__, "--one", str(length), mode, head, "--rows", str(args.rows),
               "--repeats", str(args.repeats), "--sampled", str(min(args.sampled, length - 1))]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    print(f"load at end: {os.getloadavg()[0]:.2f}; attention: {results[0]['attention'] if results else '?'}")
    print("\n| tokens | trained | rows | mode | head | step s (spread) | tok/s | peak RSS MB | above the model MB |\n"
          "|---:|---:|---:|---|---|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['length']} | {r['sampled']} | {r['rows']} | {r['mode']} | {r['head']} | {r['step_s']:.1f} ({r['spread_s']:.1f}) | "
              f"{r['tok_s']:.0f} | {r['peak_rss_mb']:.0f} | {r['peak_rss_mb'] - r['model_rss_mb']:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()

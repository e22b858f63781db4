"""What long contexts cost on the embedded model: prefill, decoding, the learner and peak memory, 1K to 8K tokens,
sandgym against plain ``transformers`` on the same inputs.

    python bench/long_context_cost.py                       # 1024 2048 4096 7936 tokens, 2 repeats
    python bench/long_context_cost.py --lengths 1024 2048 --repeats 1 --decode 8   # smoke run
    python bench/long_context_cost.py --no-learner --lengths 1024 2048 4096 8128   # prefill and decode only

Each (length, implementation) runs in its own process (so ``ru_maxrss`` is that run's peak), with the embedded
SmolLM2-135M and a fresh LoRA adapter, float32, 2 threads:

* prefill tokens/s: sandgym's sampler producing one token from the prompt (``sample_batch``, what a rollout runs)
  against one ``model(ids, use_cache=True)`` forward;
* decode ms/token at that context: the median time of one decoding forward call (timed directly by hooks on the
  model) while sampling ``--decode`` tokens (sandgym's sampler vs ``model.generate`` with the same count, no
  early stop);
* learner fwd+bwd tokens/s: one ``learner_update`` on a sample whose last 64 tokens are the completion (sandgym:
  logits only from the completion on, log-probs row by row) against a plain forward of the whole sequence with
  full logits, cross-entropy on the same 64 tokens and ``backward``;
* peak RSS of the process (MB).

Prints the load at start and end, the attention implementation, the medians of ``--repeats`` runs and the growth
from the shortest length (time per token; linear growth in tokens keeps it flat).
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


def run_one(length: int, impl: str, decode: int, repeats: int, learner: bool = True,
            checkpointing: bool = False) -> dict[str, Any]:
    import torch

    from sandgym.agents.hf import HFPolicy
    from sandgym.agents.sampler import sample_batch
    from sandgym.train.config import AlgorithmConfig
    from sandgym.train.step import Sample, learner_update

    torch.set_num_threads(2)
    policy = HFPolicy("smollm2-135m")
    model = policy.model
    gen = policy.generation_model()
    pad = int(policy.tokenizer.pad_token_id)
    ids = torch.randint(100, 40000, (length,), generator=torch.Generator().manual_seed(length)).tolist()
    out: dict[str, list[float]] = {"prefill_tok_s": [], "decode_ms_tok": [], "learner_tok_s": []}

    def sandgym_gen(n: int) -> float:
        t = time.perf_counter()
        sample_batch(gen, [tuple(ids)], max_new_tokens=[n], generators=[torch.Generator().manual_seed(0)],
                     temperature=1.0, top_p=1.0, stop_token_ids=frozenset(), stop_strings=(), decode=lambda x: "",
                     pad_token_id=pad)
        return time.perf_counter() - t

    @torch.inference_mode()
    def plain_gen(n: int) -> float:
        x = torch.tensor([ids])
        t = time.perf_counter()
        if n == 1:
            gen(input_ids=x, use_cache=True)
        else:
            gen.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                         do_sample=True, top_k=0, pad_token_id=pad)
        return time.perf_counter() - t

    if checkpointing and impl == "sandgym":  # what `[optim] activation_checkpointing` turns on
        from sandgym.train.shared_prefix import set_activation_checkpointing

        set_activation_checkpointing(model, True)
    elif checkpointing:  # transformers' own
        model.get_base_model().gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if checkpointing:
        model.train()  # checkpointing applies in training mode only (no dropout in this model or adapter)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    mask = [0] * (length - COMPLETION) + [1] * COMPLETION
    sample = Sample(tuple(ids), tuple(mask), tuple(-1.0 * m for m in mask), tuple(0.5 * m for m in mask))

    def sandgym_learn() -> float:
        t = time.perf_counter()
        learner_update(model, opt, [sample], AlgorithmConfig(beta=0.0), pad_id=pad, temperature=1.0, micro_batch=1,
                       max_grad_norm=1.0, norm_len=length)
        return time.perf_counter() - t

    def plain_learn() -> float:
        x = torch.tensor([ids])
        labels = torch.tensor([[-100] * (length - COMPLETION) + ids[-COMPLETION:]])
        t = time.perf_counter()
        loss = model(input_ids=x, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t

    generate, learn = (sandgym_gen, sandgym_learn) if impl == "sandgym" else (plain_gen, plain_learn)
    calls: list[float] = []  # every forward call of the sampling model, timed directly (decode = calls after the 1st)
    started: list[float] = []
    gen.register_forward_pre_hook(lambda *_: started.append(time.perf_counter()))
    gen.register_forward_hook(lambda *_: calls.append(time.perf_counter() - started[-1]))
    generate(1)  # warm-up (allocator, kernels, autograd), not timed
    if learner:
        learn()
    for _ in range(repeats):
        out["prefill_tok_s"].append(length / generate(1))
        calls.clear()
        generate(decode + 1)
        out["decode_ms_tok"].append(statistics.median(calls[1:]) * 1000)
        if learner:
            out["learner_tok_s"].append(length / learn())
    row: dict[str, Any] = {k: statistics.median(v) if v else float("nan") for k, v in out.items()}
    row.update(length=length, impl=impl, checkpointing=checkpointing, attention=str(getattr(model.config, "_attn_implementation", "?")),
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 7936])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--decode", type=int, default=16, help="tokens decoded after the prompt")
    ap.add_argument("--one", nargs=2, metavar=("LENGTH", "IMPL"), help=argparse.SUPPRESS)
    ap.add_argument("--no-learner", action="store_true",
                    help="prefill and decode only (the learner at 8K is in bench/learner_memory.py)")
    ap.add_argument("--checkpointing", action="store_true",
                    help="activation checkpointing in both learners (sandgym's, transformers' own); plain 8K needs ~26 GB")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(int(args.one[0]), args.one[1], args.decode, args.repeats, not args.no_learner,
                                  args.checkpointing)))
        return
    print(f"load at start: {os.getloadavg()[0]:.2f}; lengths {args.lengths}, {args.repeats} repeats, "
          f"decode {args.decode} tokens", flush=True)
    rows = []
    for length in args.lengths:
        for impl in ("sandgym", "transformers") if length % 2 == 0 else ("transformers", "sandgym"):
            cmd = [sys.executable, __file__, "--one", str(length), impl, "--repeats", str(args.repeats),
                   "--decode", str(args.decode), *(["--no-learner"] if args.no_learner else []),
                   *(["--checkpointing"] if args.checkpointing else [])]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    print(f"load at end: {os.getloadavg()[0]:.2f}; attention: {rows[0]['attention']}")
    pairs = {(r["length"], r["impl"]): r for r in rows}
    print("\n| tokens | prefill sandgym / transformers (time) | decode sandgym / transformers (time) |\n|---:|---:|---:|")
    for length in args.lengths:
        s, t = pairs[(length, "sandgym")], pairs[(length, "transformers")]
        print(f"| {length} | {t['prefill_tok_s'] / s['prefill_tok_s']:.2f}x | {s['decode_ms_tok'] / t['decode_ms_tok']:.2f}x |")
    base = {r["impl"]: r for r in rows if r["length"] == args.lengths[0]}
    print("\n| tokens | impl | prefill tok/s | decode ms/token | learner fwd+bwd tok/s | peak RSS MB | "
          "prefill s/token vs shortest | learner s/token vs shortest |\n|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        b = base[r["impl"]]
        print(f"| {r['length']} | {r['impl']} | {r['prefill_tok_s']:.0f} | {r['decode_ms_tok']:.1f} | "
              f"{r['learner_tok_s']:.0f} | {r['peak_rss_mb']:.0f} | {b['prefill_tok_s'] / r['prefill_tok_s']:.2f}x | "
              f"{b['learner_tok_s'] / r['learner_tok_s']:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()

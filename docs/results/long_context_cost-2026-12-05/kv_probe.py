"""Decoding with transformers' concatenating KV cache against sandgym's in-place one (``ReservedLayer``), in one
process on the same prefilled cache, alternating: ms per decoding call at each context length.

    python docs/results/long_context_cost-2026-12-05/kv_probe.py [--lengths 2048 8128] [--repeats 4] [--steps 24]

The embedded SmolLM2-135M's merged generation copy, float32, 2 threads, batch 1, sdpa; each repeat rebuilds both
caches from one prefill's keys and values and decodes ``--steps`` tokens (greedy, the same tokens for both).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from transformers import DynamicCache

from sandgym.agents.hf import HFPolicy
from sandgym.agents.kv_cache import reserved_cache


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", type=int, nargs="+", default=[2048, 8128])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--steps", type=int, default=24)
    args = ap.parse_args()
    torch.set_num_threads(2)
    print(f"load at start {os.getloadavg()[0]:.2f}", flush=True)
    g = HFPolicy("smollm2-135m").generation_model()
    out: dict[str, dict[str, list[float]]] = {}
    for length in args.lengths:
        ids = torch.randint(100, 40000, (1, length), generator=torch.Generator().manual_seed(length))
        with torch.inference_mode():
            pre = DynamicCache(config=g.config)
            logits = g(input_ids=ids, use_cache=True, past_key_values=pre, logits_to_keep=1).logits[:, -1]
            kv = [(layer.keys.clone(), layer.values.clone()) for layer in pre.layers]
            del pre

            def build(mode: str, kv: list[tuple[torch.Tensor, torch.Tensor]]) -> DynamicCache:
                if mode == "concatenating (DynamicLayer)":
                    return DynamicCache(ddp_cache_data=[(k.clone(), v.clone()) for k, v in kv], config=g.config)
                cache = reserved_cache(g, args.steps + 1)
                for layer, (k, v) in zip(list(cache.layers), kv, strict=True):
                    layer.update(k.clone(), v.clone())
                return cache

            modes = ["concatenating (DynamicLayer)", "in place (ReservedLayer)"]
            times: dict[str, list[float]] = {m: [] for m in modes}
            tokens: dict[str, list[int]] = {}
            for rep in range(args.repeats):
                for mode in (modes if rep % 2 == 0 else modes[::-1]):
                    cache, tok, seq, per = build(mode, kv), logits.argmax(-1, keepdim=True), [], []
                    for step in range(args.steps):
                        t = time.perf_counter()
                        o = g(input_ids=tok, position_ids=torch.tensor([[length + step]]), use_cache=True,
                              past_key_values=cache)
                        per.append(time.perf_counter() - t)
                        tok = o.logits[:, -1].argmax(-1, keepdim=True)
                        seq.append(int(tok))
                    times[mode].append(statistics.median(per) * 1000)
                    tokens.setdefault(mode, seq)
                    del cache
            assert tokens[modes[0]] == tokens[modes[1]], "the two caches decoded different tokens"
        out[str(length)] = times
        a, b = (statistics.median(times[m]) for m in modes)
        print(f"{length} tokens: concatenating {a:.1f} ms/token {[round(x, 1) for x in times[modes[0]]]}, "
              f"in place {b:.1f} {[round(x, 1) for x in times[modes[1]]]}: {b / a:.2f}x", flush=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()

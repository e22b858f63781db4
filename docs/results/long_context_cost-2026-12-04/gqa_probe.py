"""Batched decode with left padding: transformers' repeat_kv path vs sdpa's own GQA (TRANSFORMERS_SDPA_FORCE_GQA)."""
import os
import statistics
import sys
import time

import torch
from transformers import DynamicCache

from sandgym.agents.hf import HFPolicy

torch.set_num_threads(2)
p = HFPolicy("smollm2-135m")
g = p.generation_model()
B, L = int(sys.argv[1]), int(sys.argv[2])
gen = torch.Generator().manual_seed(0)
lens = [L - 8 * i for i in range(B)]
ids = torch.zeros(B, L, dtype=torch.long)
mask = torch.zeros(B, L, dtype=torch.long)
for r, n in enumerate(lens):
    ids[r, L - n:] = torch.randint(100, 40000, (n,), generator=gen)
    mask[r, L - n:] = 1
pos = (mask.cumsum(-1) - 1).clamp(min=0)
res = {}
with torch.inference_mode():
    cache = DynamicCache(config=g.config)
    g(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, past_key_values=cache, logits_to_keep=1)
    tok = torch.full((B, 1), 42)
    m2 = torch.cat([mask, mask.new_ones(B, 1)], 1)
    lp = pos[:, -1:] + 1
    times = {"repeat_kv (default)": [], "sdpa gqa": []}
    outs = {}
    for _rep in range(6):
        for k in times:
            os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = "1" if "gqa" in k else "0"
            t = time.perf_counter()
            o = g(input_ids=tok, attention_mask=m2, position_ids=lp, use_cache=True, past_key_values=cache).logits
            times[k].append(time.perf_counter() - t)
            outs[k] = o
            cache.crop(-1)
    for k, v in times.items():
        print(f"B={B} L={L} {k:22s} {statistics.median(v)*1000:8.1f} ms/step  {[round(x*1000) for x in v]}")
    print("max |logit diff|", float((outs["repeat_kv (default)"] - outs["sdpa gqa"]).abs().max()))

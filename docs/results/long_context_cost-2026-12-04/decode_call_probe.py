"""One 8K KV cache (batch 1), decoding calls in the sandgym and generate styles interleaved: ms per call."""
import statistics
import time

import torch
from transformers import DynamicCache

from sandgym.agents.hf import HFPolicy

torch.set_num_threads(2)
p = HFPolicy("smollm2-135m")
g = p.generation_model()
L = 8128
ids = torch.randint(100, 40000, (1, L), generator=torch.Generator().manual_seed(L))
with torch.inference_mode():
    cache = DynamicCache(config=g.config)
    g(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True, past_key_values=cache, logits_to_keep=1)
    tok = torch.tensor([[42]])
    styles = {
        "sandgym (mask+position_ids)": lambda: g(input_ids=tok, attention_mask=torch.ones(1, L + 1, dtype=torch.long), position_ids=torch.tensor([[L]]), use_cache=True, past_key_values=cache),
        "generate (mask+cache_position)": lambda: g(input_ids=tok, attention_mask=torch.ones(1, L + 1, dtype=torch.long), cache_position=torch.tensor([L]), use_cache=True, past_key_values=cache),
        "mask only": lambda: g(input_ids=tok, attention_mask=torch.ones(1, L + 1, dtype=torch.long), use_cache=True, past_key_values=cache),
        "no mask": lambda: g(input_ids=tok, use_cache=True, past_key_values=cache),
        "sandgym style, mask None": lambda: g(input_ids=tok, attention_mask=None, position_ids=torch.tensor([[L]]), use_cache=True, past_key_values=cache),
        "sandgym +logits_to_keep": lambda: g(input_ids=tok, attention_mask=torch.ones(1, L + 1, dtype=torch.long), position_ids=torch.tensor([[L]]), use_cache=True, past_key_values=cache, logits_to_keep=1),
    }
    times = {k: [] for k in styles}
    for _rep in range(8):
        for k, f in styles.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
            cache.crop(-1)
    for k, v in times.items():
        print(f"{k:35s} {statistics.median(v)*1000:7.1f} ms  {[round(x*1000) for x in v]}")

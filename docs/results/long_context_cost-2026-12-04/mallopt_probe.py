"""8K decoding through the rollout sampler, with and without checkpointing's process-wide malloc thresholds."""
import statistics
import sys
import time

import torch

from sandgym.agents.hf import HFPolicy
from sandgym.agents.sampler import sample_batch
from sandgym.train.shared_prefix import return_freed_memory

torch.set_num_threads(2)
if sys.argv[1] == "mallopt":
    print("mallopt set:", return_freed_memory())
p = HFPolicy("smollm2-135m")
g = p.generation_model()
L = 8128
ids = torch.randint(100, 40000, (L,), generator=torch.Generator().manual_seed(L)).tolist()
calls, started = [], []
g.register_forward_pre_hook(lambda *_: started.append(time.perf_counter()))
g.register_forward_hook(lambda *_: calls.append(time.perf_counter() - started[-1]))
sample_batch(g, [tuple(ids)], max_new_tokens=[25], generators=[torch.Generator().manual_seed(0)], temperature=1.0,
             top_p=1.0, stop_token_ids=frozenset(), stop_strings=(), decode=lambda x: "", pad_token_id=0)
print(sys.argv[1], "prefill s", round(calls[0], 1), "decode ms/token median", round(statistics.median(calls[1:]) * 1000, 1))

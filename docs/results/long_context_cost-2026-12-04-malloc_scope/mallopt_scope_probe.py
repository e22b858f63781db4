"""8K decoding through the rollout sampler: glibc defaults, the 1 MiB thresholds left on (the bug measured in docs/results/long_context_cost-2026-12-04/), and
the thresholds scoped to a learner update as `learner_update` now does (`freed_memory_returned`, then sampling).
One process per mode: `for m in default mallopt scoped; do python mallopt_scope_probe.py $m; done`."""
import statistics
import sys
import time

import torch

from sandgym.agents.hf import HFPolicy
from sandgym.agents.sampler import sample_batch
from sandgym.train.shared_prefix import freed_memory_returned, return_freed_memory

torch.set_num_threads(2)
mode = sys.argv[1]
if mode == "mallopt":
    print("mallopt set:", return_freed_memory())
elif mode == "scoped":
    with freed_memory_returned() as applied:
        x = torch.ones(64 << 20)  # a learner-sized block allocated and freed inside the scope
        del x
    print("scoped:", applied)
p = HFPolicy("smollm2-135m")
g = p.generation_model()
L = 8128
ids = torch.randint(100, 40000, (L,), generator=torch.Generator().manual_seed(L)).tolist()
calls, started = [], []
g.register_forward_pre_hook(lambda *_: started.append(time.perf_counter()))
g.register_forward_hook(lambda *_: calls.append(time.perf_counter() - started[-1]))
sample_batch(g, [tuple(ids)], max_new_tokens=[25], generators=[torch.Generator().manual_seed(0)], temperature=1.0,
             top_p=1.0, stop_token_ids=frozenset(), stop_strings=(), decode=lambda x: "", pad_token_id=0)
print(mode, "prefill s", round(calls[0], 1), "decode ms/token median", round(statistics.median(calls[1:]) * 1000, 1))

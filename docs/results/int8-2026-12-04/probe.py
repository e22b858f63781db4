"""Greedy 40 tokens from the float and the int8 generation copy (the SFT adapter, a training prompt), and the
learner-minus-sampler log-prob of each token the copy chose. python probe.py RUN_DIR (a quickstart run)."""
import json
import sys

import torch

from sandgym.agents.hf import HFPolicy

torch.set_num_threads(2)
with open(sys.argv[1] + '/train/trajectories.jsonl') as f:
    tr = json.loads(f.readline())
ids = tr['turns'][0]['prompt_token_ids']
for gw in ("float", "int8"):
    p = HFPolicy("smollm2-135m", adapter=sys.argv[1] + "/train/sft/adapter", generation_weights=gw, lora=None)
    g = p.generation_model()
    x = torch.tensor([ids])
    with torch.no_grad():
        out = g.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=40, do_sample=False)
        print(gw, repr(p.tokenizer.decode(out[0, len(ids):])))
        lf = p.model(input_ids=out).logits[0, len(ids)-1:-1].log_softmax(-1)
        lg = g(input_ids=out).logits[0, len(ids)-1:-1].log_softmax(-1)
        toks = out[0, len(ids):]
        print(" gap per greedy token (learner - gen):", [round(float(lf[i, t] - lg[i, t]), 2) for i, t in enumerate(toks)][:20])

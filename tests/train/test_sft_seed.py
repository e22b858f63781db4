"""The warm start is a function of the config: the LoRA adapter's random init comes from ``seed``, not from
whatever the process's torch RNG held (two demo runs on identical demonstrations once trained different adapters)."""

import json

import torch
from safetensors.torch import load_file

from sandgym.train.config import load_config


def test_run_sft_gives_the_same_adapter_whatever_the_global_rng(tmp_path, tiny_model_dir):
    from sandgym.train.sft import run_sft

    transcripts = tmp_path / "t.jsonl"
    transcripts.write_text("".join(json.dumps({"messages": [
        {"role": "user", "content": f"add {i}"}, {"role": "assistant", "content": f"def f(x): return x + {i}"}]})
        + "\n" for i in range(4)))
    cfg = load_config(None, [f"model.name={json.dumps(str(tiny_model_dir))}", "sft.epochs=1", "sft.micro_batch=2",
                             f"sft.source={json.dumps(str(transcripts))}"])
    adapters = []
    for rng in (123, 456):
        torch.manual_seed(rng)  # what other work in the process left behind
        out = run_sft(cfg, tmp_path / f"sft{rng}").adapter_dir
        adapters.append(load_file(str(out / "adapter_model.safetensors")))
    assert adapters[0].keys() == adapters[1].keys() and adapters[0]
    assert all(torch.equal(adapters[0][k], adapters[1][k]) for k in adapters[0])
    other = load_config(None, [f"model.name={json.dumps(str(tiny_model_dir))}", "sft.epochs=1", "seed=1",
                               "sft.micro_batch=2", f"sft.source={json.dumps(str(transcripts))}"])
    seeded = load_file(str(run_sft(other, tmp_path / "seed1").adapter_dir / "adapter_model.safetensors"))
    assert any(not torch.equal(adapters[0][k], seeded[k]) for k in seeded)  # the seed does decide it

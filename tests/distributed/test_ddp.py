"""Two learner processes (gloo) on shards of one batch end with identical adapters, equal to one process."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch

from sandgym.train.config import AlgorithmConfig
from sandgym.train.distributed import ddp
from sandgym.train.distributed.ddp import (
    broadcast_trainable,
    ddp_learner_update,
    init_process_group,
    spawn,
)
from sandgym.train.step import Sample, learner_update

ALGO = AlgorithmConfig(epochs=2, beta=0.05)


def _model(model_dir: Path, seed: int):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(str(model_dir))
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # lora_B starts at zero; make both factors non-trivial
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.normal_(0, 0.05)
    return model


def _samples(n: int = 7) -> list[Sample]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        k = 6 + i
        ids = torch.randint(5, 300, (k,), generator=g).tolist()
        mask = [0, 0] + [1] * (k - 2)
        lps = (-torch.rand(k, generator=g) * 3).tolist()
        adv = float(torch.randn(1, generator=g))
        out.append(Sample(tuple(ids), tuple(mask), tuple(lps), tuple(adv * m for m in mask)))
    return out


def _update(model, opt, samples, fn):
    return fn(model, opt, samples, ALGO, pad_id=0, temperature=1.0, micro_batch=2, max_grad_norm=1.0, norm_len=64)


def _lora(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k}


def _rank(rank: int, world: int, address: str, model_dir: str, out: str) -> None:
    torch.set_num_threads(1)
    init_process_group(rank, world, address)
    model = _model(Path(model_dir), seed=rank)  # different init per rank: the broadcast must align them
    broadcast_trainable(model)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(2):
        _update(model, opt, _samples(), ddp_learner_update)
    torch.save(_lora(model), Path(out) / f"rank{rank}.pt")


def test_two_gloo_ranks_end_with_identical_adapters_equal_to_one_process(tiny_model_dir, tmp_path):
    spawn(2, _rank, str(tiny_model_dir), str(tmp_path))
    r0, r1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    assert r0.keys() == r1.keys() and r0
    for k in r0:
        assert torch.equal(r0[k], r1[k]), k
    model = _model(tiny_model_dir, seed=0)  # rank 0's initial weights, trained in one process
    start = _lora(model)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(2):
        _update(model, opt, _samples(), learner_update)
    single = _lora(model)
    for k in r0:
        assert not torch.equal(single[k], start[k]), k
        torch.testing.assert_close(r0[k], single[k], rtol=1e-4, atol=1e-5)


def _join(rank: int, world: int, address: str, out: str) -> None:
    init_process_group(rank, world, address)
    Path(out, f"joined{rank}").write_text(address, encoding="utf-8")


def _fail(rank: int, world: int, address: str) -> None:
    raise ValueError(f"rank {rank} failed on its own")


def test_spawn_rendezvous_again_when_its_port_is_taken(tmp_path, monkeypatch):
    """The port ``spawn`` picks can be taken before rank 0 binds it: the ranks start again on another port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = iter([port])
        real = ddp.free_port
        monkeypatch.setattr(ddp, "free_port", lambda: next(ports, None) or real())
        spawn(2, _join, str(tmp_path))
    assert next(ports, None) is None  # the taken port was tried first
    addresses = {(tmp_path / f"joined{r}").read_text(encoding="utf-8") for r in range(2)}
    assert len(addresses) == 1 and not addresses.pop().endswith(f":{port}")


def test_spawn_raises_a_rank_failure_that_is_not_the_port(monkeypatch):
    calls = []
    real = ddp.free_port
    monkeypatch.setattr(ddp, "free_port", lambda: calls.append(1) or real())
    with pytest.raises(Exception, match="failed on its own"):
        spawn(2, _fail)
    assert len(calls) == 1  # not retried

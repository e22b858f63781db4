"""The in-place KV cache: the sampler samples exactly what it sampled with transformers' concatenating cache, and
decoding appends without copying the cache."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import DynamicCache

import sandgym.agents.sampler as sampler_mod
from sandgym.agents.kv_cache import ReservedLayer, reserved_cache
from sandgym.agents.sampler import sample_batch
from tests.conftest import build_tiny_model


@pytest.fixture(scope="module")
def model(tiny_tokenizer: Any) -> Any:
    return build_tiny_model(tiny_tokenizer, stop_pull=2.0)


def _run(model: Any, prompts: list[list[int]], new: list[int], seeds: list[int], eos: int, **kw: Any) -> list[Any]:
    return sample_batch(model, prompts, max_new_tokens=new, generators=[torch.Generator().manual_seed(s) for s in seeds],
                        stop_token_ids=frozenset({eos}), pad_token_id=0, **kw)


def test_the_sampler_samples_the_same_with_the_in_place_cache(model: Any, tiny_tokenizer: Any, monkeypatch) -> None:
    eos, enc = tiny_tokenizer.eos_token_id, tiny_tokenizer.encode
    a, b, c = enc("def add(a, b):\n    return"), enc("The quick brown fox jumps over the lazy dog and then"), enc("x")
    prompts, new, seeds = [a, b, a, c, b, a], [12, 5, 20, 9, 16, 3], [1, 2, 3, 4, 5, 6]

    def both(**kw: Any) -> tuple[list[Any], list[Any]]:
        made: list[Any] = []
        real = sampler_mod.reserved_cache
        monkeypatch.setattr(sampler_mod, "reserved_cache", lambda m, r: made.append(real(m, r)) or made[-1])
        reserved = _run(model, prompts, new, seeds, eos, **kw)
        monkeypatch.setattr(sampler_mod, "reserved_cache", lambda m, r: DynamicCache(config=m.config))
        plain = _run(model, prompts, new, seeds, eos, **kw)
        monkeypatch.undo()
        assert made and all(isinstance(layer, ReservedLayer) for layer in made[0].layers)
        return reserved, plain

    reserved, plain = both(keep_kv=True)
    assert {r.ended for r in plain} == {True, False} and len({len(r.token_ids) for r in plain}) > 2  # rows leave
    for r, p in zip(reserved, plain, strict=True):
        assert (r.token_ids, r.truncated, r.ended) == (p.token_ids, p.truncated, p.ended)
        assert r.logprobs == pytest.approx(p.logprobs, abs=1e-6)
        assert r.kv is not None and p.kv is not None and r.kv.length == p.kv.length
        for (rk, rv), (pk, pv) in zip(r.kv.layers, p.kv.layers, strict=True):
            assert torch.equal(rk, pk) and torch.equal(rv, pv)
    # the next turn from those caches (the past path) samples the same too
    turn2 = [p + list(r.token_ids) + enc(" ok") for p, r in zip(prompts, plain, strict=True)]
    r2 = _run(model, turn2, new, seeds, eos, past=[r.kv for r in reserved])
    p2 = _run(model, turn2, new, seeds, eos, past=[r.kv for r in plain])
    assert [r.token_ids for r in r2] == [r.token_ids for r in p2]


def test_appending_writes_in_place_until_the_room_runs_out() -> None:
    layer = ReservedLayer(reserve=3)
    k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    keys, _ = layer.update(k, v)
    buffer = layer._k
    assert buffer is not None and buffer.shape[-2] == 8 and torch.equal(keys, k)
    for step in range(3):
        nk, nv = torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4)
        keys, values = layer.update(nk, nv)
        assert layer._k is buffer and keys.data_ptr() == buffer.data_ptr()  # no copy of the cache
        assert torch.equal(keys[..., -1:, :], nk) and torch.equal(values[..., -1:, :], nv)
        assert layer.get_seq_length() == 6 + step
    before = keys.clone()
    keys, _ = layer.update(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4))  # full: one copy into a new buffer
    assert layer._k is not buffer and torch.equal(keys[..., :8, :], before) and layer.get_seq_length() == 9
    layer.batch_select_indices(torch.tensor([1]))
    assert layer.keys.shape == (1, 3, 9, 4) and torch.equal(layer.keys[0, :, :8], before[1])
    kept = layer._k
    layer.update(torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 4))
    assert layer._k is kept  # the selected rows kept their spare room


def test_models_with_other_cache_layers_keep_transformers_cache() -> None:
    class SlidingConfig:
        def get_text_config(self, decoder: bool = True) -> Any:
            from transformers import MistralConfig

            return MistralConfig(num_hidden_layers=2, sliding_window=16)

    class Model:
        config = SlidingConfig()

    cache = reserved_cache(Model(), reserve=4)
    assert cache.layers and not any(isinstance(layer, ReservedLayer) for layer in cache.layers)

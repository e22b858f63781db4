"""The batched sampler: rows with the same prompt share one prefill and sample exactly as if run alone."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from sandgym.agents.sampler import sample_batch
from tests.conftest import build_tiny_model


@pytest.fixture(scope="module")
def model(tiny_tokenizer: Any) -> Any:
    return build_tiny_model(tiny_tokenizer, stop_pull=2.0)


def _sample(model: Any, prompts: list[list[int]], seeds: list[int], eos: int) -> list[Any]:
    return sample_batch(model, prompts, max_new_tokens=[12] * len(prompts),
                        generators=[torch.Generator().manual_seed(s) for s in seeds],
                        stop_token_ids=frozenset({eos}), pad_token_id=0)


def test_shared_prompts_prefill_once_and_sample_as_if_alone(model: Any, tiny_tokenizer: Any) -> None:
    eos = tiny_tokenizer.eos_token_id
    a = tiny_tokenizer.encode("def add(a, b):\n    return")
    b = tiny_tokenizer.encode("The quick brown fox jumps over the lazy dog and then")
    prompts = [a, b, a, a, b, a]
    seeds = [11, 12, 13, 14, 15, 16]
    prefill_rows: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda _m, _args, kw: prefill_rows.append(kw["input_ids"].shape[0]) if kw["input_ids"].shape[1] > 1 else None,
        with_kwargs=True)
    try:
        batched = _sample(model, prompts, seeds, eos)
    finally:
        hook.remove()
    assert prefill_rows == [2]  # one prefill over the two distinct prompts, not six
    for i, (p, s) in enumerate(zip(prompts, seeds, strict=True)):
        (alone,) = _sample(model, [p], [s], eos)
        assert batched[i].token_ids == alone.token_ids, i
        assert batched[i].logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert (batched[i].truncated, batched[i].ended) == (alone.truncated, alone.ended)
    assert len({r.token_ids for r in batched}) > 2  # rows sharing a prompt still sample independently


def test_a_rows_own_past_cache_replaces_prefilling_its_history(model: Any, tiny_tokenizer: Any) -> None:
    eos = tiny_tokenizer.eos_token_id
    enc = tiny_tokenizer.encode
    a, b = enc("def add(a, b):\n    return"), enc("The quick brown fox jumps over the lazy dog and then")
    first = sample_batch(model, [a, b], max_new_tokens=[6, 6], generators=[torch.Generator().manual_seed(s) for s in (1, 2)],
                         stop_token_ids=frozenset({eos}), pad_token_id=0, keep_kv=True)
    for prompt, row in zip((a, b), first, strict=True):
        assert row.kv is not None and row.kv.length == len(prompt) + len(row.token_ids) - 1
    # turn 2: each history plus an observation of a different length, and a fresh episode without a past
    prompts = [a + list(first[0].token_ids) + enc(" 3 result"), b + list(first[1].token_ids) + enc(" tool answer the final"),
               enc("system user assistant")]
    pasts = [first[0].kv, first[1].kv, None]
    fed: list[int] = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: fed.append(kw["input_ids"].shape[1]), with_kwargs=True)
    try:
        reused = sample_batch(model, prompts, max_new_tokens=[8] * 3, generators=[torch.Generator().manual_seed(s) for s in (3, 4, 5)],
                              stop_token_ids=frozenset({eos}), pad_token_id=0, past=pasts)
    finally:
        hook.remove()
    new = [len(p) - (k.length if k else 0) for p, k in zip(prompts, pasts, strict=True)]
    assert fed[0] == max(new) < max(len(p) for p in prompts)  # only what was added since the cached tokens
    full = sample_batch(model, prompts, max_new_tokens=[8] * 3, generators=[torch.Generator().manual_seed(s) for s in (3, 4, 5)],
                        stop_token_ids=frozenset({eos}), pad_token_id=0)
    for r, f in zip(reused, full, strict=True):
        assert r.token_ids == f.token_ids
        assert r.logprobs == pytest.approx(f.logprobs, abs=1e-4)
    with pytest.raises(ValueError, match="at least one token"):
        sample_batch(model, [a], max_new_tokens=[2], generators=[torch.Generator()], pad_token_id=0,
                     past=[first[0].kv])  # the prompt adds nothing to its past
    rows = sample_batch(model, [a, b], max_new_tokens=[3, 3], generators=[torch.Generator(), torch.Generator()],
                        pad_token_id=0, keep_kv=[False, True])  # e.g. the first row is on its last turn
    assert rows[0].kv is None and rows[1].kv is not None

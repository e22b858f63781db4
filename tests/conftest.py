"""Shared fixtures: a tiny randomly initialised Llama model and a byte-level BPE tokenizer built offline.

The tokenizer is trained in milliseconds on a small corpus and carries a ChatML chat template. The model has a
built-in "end-of-turn pull": every token embedding carries a constant feature that the untied lm_head row of
``<|im_end|>`` reads, so sampled turns end after ~10 tokens on average (a purely random model would never stop).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_CORPUS = [
    "def add(a, b):\n    return a + b\n",
    '<tool_call>{"name": "python", "arguments": {"code": "print(1 + 2)"}}</tool_call>',
    "<tool_response>\n3\n</tool_response>",
    "You are a helpful assistant. Use the tools to solve the task step by step.",
    "system user assistant tool Task observation result answer submit the final number",
    "The quick brown fox jumps over the lazy dog. 0123456789 ()[]{}:;,.=+-*/_'\"\n\t ",
]


def build_tiny_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|im_start|>"
    )
    fast.chat_template = CHATML
    return fast


def build_tiny_model(tokenizer: Any, *, stop_pull: float = 4.0, seed: int = 0) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 1.0
        model.lm_head.weight[:, 0] = 0.0
        model.lm_head.weight[tokenizer.convert_tokens_to_ids("<|im_end|>"), 0] = stop_pull / 8.0
    return model


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Any:
    return build_tiny_tokenizer()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Any) -> Path:
    """A saved tiny checkpoint (config + safetensors + tokenizer), loadable by ``HFPolicy(str(dir))``."""
    import torch

    torch.set_num_threads(min(2, torch.get_num_threads()))
    out = tmp_path_factory.mktemp("tiny-llama")
    build_tiny_model(tiny_tokenizer).save_pretrained(str(out))
    tiny_tokenizer.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def doc_runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The documented commands of the session's doc-block tests (tests/test_docs.py), running in the background."""
    from tests.test_docs import selected_blocks, start_runner

    runner = start_runner(selected_blocks(request.session.items), tmp_path_factory)
    yield runner
    runner.stop()


@pytest.fixture(scope="session", autouse=True)
def _doc_blocks_from_the_start(request: pytest.FixtureRequest) -> None:
    """Doc blocks are mostly fresh interpreters importing their libraries: started with the session, they run
    beside the other tests instead of after them (``SANDGYM_DOC_TEST_EARLY=0`` starts them at their own tests)."""
    if os.environ.get("SANDGYM_DOC_TEST_EARLY", "1") != "0" and any(
            getattr(getattr(item, "function", None), "__name__", "") == "test_block"
            and item.nodeid.startswith("tests/test_docs.py") for item in request.session.items):
        request.getfixturevalue("doc_runner")

"""Chat rendering: prompts, token deltas without re-tokenizing the model's text, the retokenization check."""

from __future__ import annotations

from typing import Any

import pytest

from sandgym.agents.prompting import (
    CHATML_TEMPLATE,
    ChatFormat,
    PromptConfig,
    PromptError,
    retokenization_mismatch,
)

MSGS = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "do it"}]


@pytest.fixture()
def fmt(tiny_tokenizer: Any) -> ChatFormat:
    return ChatFormat(tiny_tokenizer)


def test_prompt_is_template_render(fmt: ChatFormat, tiny_tokenizer: Any) -> None:
    ids = fmt.prompt_ids(MSGS)
    assert tiny_tokenizer.decode(ids) == "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\ndo it<|im_end|>\n<|im_start|>assistant\n"


def test_system_prompt_always_given(fmt: ChatFormat, tiny_tokenizer: Any) -> None:
    text = tiny_tokenizer.decode(fmt.prompt_ids([{"role": "user", "content": "hi"}], system_prompt="From env"))
    assert text.startswith("<|im_start|>system\nFrom env<|im_end|>")
    text = tiny_tokenizer.decode(fmt.prompt_ids([{"role": "user", "content": "hi"}]))
    assert PromptConfig().default_system_prompt in text


def test_tool_messages_become_wrapped_user_turns(fmt: ChatFormat) -> None:
    assert not fmt.native_tool_role  # the ChatML template never mentions role "tool"
    out = fmt.normalize([*MSGS, {"role": "assistant", "content": "x"}, {"role": "tool", "content": "A"}, {"role": "tool", "content": "B"}])
    assert out[-1] == {"role": "user", "content": "<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n</tool_response>"}
    native = ChatFormat(fmt.tokenizer, PromptConfig(tool_role="native"))
    assert native.normalize([{"role": "tool", "content": "A"}])[-1] == {"role": "tool", "content": "A"}


@pytest.mark.parametrize("ended", [True, False])
def test_delta_appends_without_retokenizing(fmt: ChatFormat, tiny_tokenizer: Any, ended: bool) -> None:
    prompt = fmt.prompt_ids(MSGS)
    completion = fmt.encode("print(1)") + ([fmt.end_of_turn_id] if ended else [])
    history = [*MSGS, {"role": "assistant", "content": fmt.decode(completion)}]
    new = [{"role": "tool", "content": "1"}]
    delta = fmt.delta_ids(history, new, completion_ended=ended)
    full = fmt.encode(fmt.render_text(fmt.normalize([*history, *new]), None, generation_prompt=True))
    assert prompt + completion + delta == full
    assert tiny_tokenizer.decode(delta).endswith("<|im_start|>assistant\n")


def test_delta_needs_assistant_turn(fmt: ChatFormat) -> None:
    with pytest.raises(PromptError, match="assistant"):
        fmt.delta_ids(MSGS, [{"role": "user", "content": "x"}])


def test_chatml_fallback_when_no_template(tiny_tokenizer: Any) -> None:
    import copy

    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = None
    f = ChatFormat(tok)
    assert tok.chat_template == CHATML_TEMPLATE
    assert tok.decode(f.prompt_ids(MSGS)).endswith("<|im_start|>assistant\n")


def test_retokenization_mismatch_detected(tiny_tokenizer: Any) -> None:
    canonical = tiny_tokenizer("return", add_special_tokens=False)["input_ids"]
    assert len(canonical) < len("return")  # merged by BPE
    assert not retokenization_mismatch(tiny_tokenizer, canonical)
    split = [tiny_tokenizer.convert_tokens_to_ids(c) for c in "return"]  # same text, one token per letter
    assert tiny_tokenizer.decode(split) == "return"
    assert retokenization_mismatch(tiny_tokenizer, split)


def test_stop_tokens_and_decode(fmt: ChatFormat, tiny_tokenizer: Any) -> None:
    im_end = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in fmt.stop_token_ids and fmt.end_of_turn_id == im_end
    assert fmt.decode([*fmt.encode("abc"), im_end]) == "abc"
    assert fmt.completion_ids("abc") == [*fmt.encode("abc"), im_end]

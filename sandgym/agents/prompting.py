"""Chat rendering for token-in/token-out rollouts.

The first prompt is the model's chat template applied to the env's system prompt and messages. After each model
turn, the tokens to append are a *delta*: the template text that closes the assistant turn, the environment's new
messages and the next assistant header. The delta is computed by rendering the conversation with a sentinel in
place of the assistant's text and tokenizing only what follows it, so the model's sampled tokens are never
re-tokenized. :func:`retokenization_mismatch` reports when decode -> re-encode of sampled ids would differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandgym.errors import SandgymError

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant that solves tasks step by step using the tools provided."
END_OF_TURN_TOKENS: tuple[str, ...] = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")
_SENTINEL = "\u2063SANDGYM_ASSISTANT_TURN\u2063"

Message = Mapping[str, Any]


class PromptError(SandgymError, ValueError):
    """A conversation cannot be rendered with the model's chat template."""


@dataclass(frozen=True)
class PromptConfig:
    """How conversations are rendered."""

    tool_role: str = "auto"
    """'auto': use role 'tool' if the template mentions it, else wrap tool results as user messages in
    <tool_response>...</tool_response>; 'native' or 'user' force one of the two."""
    pass_tools: str = "auto"
    """'auto': pass ``tools=`` to the template when it mentions ``tools``; 'never'/'always'."""
    default_system_prompt: str = DEFAULT_SYSTEM_PROMPT
    """Used when the env gives none (templates such as SmolLM2's would otherwise insert their own)."""


class ChatFormat:
    """Renders a conversation to token ids with a tokenizer's chat template (ChatML when it has none)."""

    def __init__(self, tokenizer: Any, config: PromptConfig | None = None) -> None:
        self.tokenizer = tokenizer
        self.config = config or PromptConfig()
        if not getattr(tokenizer, "chat_template", None):
            tokenizer.chat_template = CHATML_TEMPLATE
        template = str(tokenizer.chat_template)
        if self.config.tool_role not in ("auto", "native", "user"):
            raise PromptError(f"tool_role={self.config.tool_role!r}; use 'auto', 'native' or 'user'")
        self.native_tool_role = (
            self.config.tool_role == "native" or (self.config.tool_role == "auto" and "tool" in template.replace("tools", ""))
        )
        self.template_takes_tools = self.config.pass_tools == "always" or (
            self.config.pass_tools == "auto" and "tools" in template
        )
        self.stop_token_ids: frozenset[int] = frozenset(_stop_ids(tokenizer))
        end = [t for t in END_OF_TURN_TOKENS if _token_id(tokenizer, t) is not None]
        self.end_of_turn_id: int | None = _token_id(tokenizer, end[0]) if end else tokenizer.eos_token_id

    # ---- messages ---------------------------------------------------------------------------------------------
    def normalize(self, messages: Sequence[Message], system_prompt: str | None = None) -> list[dict[str, str]]:
        """Plain {role, content} dicts, a system message first, tool results mapped as configured."""
        out: list[dict[str, str]] = []
        for m in messages:
            role, content = str(m.get("role", "")), str(m.get("content") or "")
            if role == "tool" and not self.native_tool_role:
                block = f"<tool_response>\n{content}\n</tool_response>"
                if out and out[-1].get("_tool") == "1":
                    out[-1]["content"] += "\n" + block
                else:
                    out.append({"role": "user", "content": block, "_tool": "1"})
                continue
            out.append({"role": role, "content": content})
        if not out or out[0]["role"] != "system":
            out.insert(0, {"role": "system", "content": system_prompt or self.config.default_system_prompt})
        return [{"role": m["role"], "content": m["content"]} for m in out]

    def render_text(self, messages: Sequence[Message], tools: Sequence[Any] | None, *, generation_prompt: bool) -> str:
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": generation_prompt}
        if tools and self.template_takes_tools:
            kwargs["tools"] = list(tools)
        try:
            return str(self.tokenizer.apply_chat_template(list(messages), **kwargs))
        except Exception as e:  # noqa: BLE001 - jinja errors come in many types
            raise PromptError(f"chat template failed on roles {[m['role'] for m in messages]}: {e}") from e

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # ---- token prompts ---------------------------------------------------------------------------------------
    def prompt_ids(self, messages: Sequence[Message], tools: Sequence[Any] | None = None, system_prompt: str | None = None) -> list[int]:
        """Token ids of the first prompt, ending with the assistant header."""
        return self.encode(self.render_text(self.normalize(messages, system_prompt), tools, generation_prompt=True))

    def delta_ids(
        self,
        history: Sequence[Message],
        new_messages: Sequence[Message],
        tools: Sequence[Any] | None = None,
        *,
        completion_ended: bool = False,
        system_prompt: str | None = None,
    ) -> list[int]:
        """Tokens to append after the model's last turn (the last message of ``history``, role assistant).

        ``completion_ended``: the sampled turn already ends with the end-of-turn token, so it is not repeated.
        """
        if not history or history[-1].get("role") != "assistant":
            raise PromptError("delta_ids needs a history ending with the model's (assistant) turn")
        conv = [*history[:-1], {"role": "assistant", "content": _SENTINEL}, *new_messages]
        text = self.render_text(self.normalize(conv, system_prompt), tools, generation_prompt=True)
        pos = text.rfind(_SENTINEL)
        if pos < 0:
            raise PromptError("the chat template dropped the assistant message; use a template that renders it")
        ids = self.encode(text[pos + len(_SENTINEL):])
        if completion_ended and ids and ids[0] == self.end_of_turn_id:
            ids = ids[1:]
        return ids

    def completion_ids(self, text: str) -> list[int]:
        """Token ids for a text-only (scripted) turn: the text plus the end-of-turn token."""
        ids = self.encode(text)
        return [*ids, self.end_of_turn_id] if self.end_of_turn_id is not None else ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text the env receives: sampled ids without a trailing stop token."""
        ids = list(ids)
        if ids and ids[-1] in self.stop_token_ids:
            ids = ids[:-1]
        return str(self.tokenizer.decode(ids, skip_special_tokens=False))


def retokenization_mismatch(tokenizer: Any, ids: Sequence[int]) -> bool:
    """True when decoding ``ids`` and encoding the text again gives different ids (a BPE merge ambiguity)."""
    text = tokenizer.decode(list(ids), skip_special_tokens=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) != list(ids)


def _token_id(tokenizer: Any, token: str) -> int | None:
    vocab = tokenizer.get_vocab()
    return vocab.get(token)


def _stop_ids(tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    for t in END_OF_TURN_TOKENS:
        i = _token_id(tokenizer, t)
        if i is not None:
            ids.add(i)
    return ids

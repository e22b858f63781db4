"""A permissive text space: any ``str`` up to a maximum length.

Gymnasium's ``spaces.Text`` defaults to an alphanumeric charset, so ordinary model output (spaces, punctuation,
newlines, unicode) would fail ``contains`` and ``check_env``. ``AnyText`` accepts every string and samples
printable text (sometimes shaped like a tool call) so random actions exercise the parser.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["AnyText"]

_SAMPLE_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"
_SAMPLE_SNIPPETS = (
    '<tool_call>{"name": "list_files", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "read_file", "arguments": {"path": "solution.py"}}</tool_call>',
    "<tool_call>{not json}</tool_call>",
    '<tool_call>{"name": "lst_files", "arguments": {}}</tool_call>',
)


class AnyText(spaces.Space[str]):
    """Every Python ``str`` of at most ``max_length`` characters (the model's turn or the env's reply)."""

    def __init__(self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None) -> None:
        if max_length <= 0:
            raise ValueError(f"AnyText(max_length={max_length}) must be > 0; pass a positive length")
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Random printable text of up to 64 characters; one sample in four is a (possibly bad) tool call."""
        if self.np_random.random() < 0.25:
            return str(_SAMPLE_SNIPPETS[int(self.np_random.integers(len(_SAMPLE_SNIPPETS)))])
        length = int(self.np_random.integers(1, min(64, self.max_length) + 1))
        idx = self.np_random.integers(len(_SAMPLE_ALPHABET), size=length)
        return "".join(_SAMPLE_ALPHABET[i] for i in idx)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length

    def to_jsonable(self, sample_n: Any) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: list[str]) -> list[str]:
        return list(sample_n)

"""Token counting and context-length buckets.

Anything with ``count(text) -> int`` is a :class:`Tokenizer`. The default,
:class:`ApproxTokenizer`, is a deterministic built-in counter (one compiled regex, about 0.2 µs
per token) that approximates a byte-level BPE on this benchmark's text: letter runs in pieces of
up to six letters, digit runs in pieces of up to three digits, punctuation runs in pieces of up to
four marks, an underscore, runs of newlines; other whitespace is free. :class:`HFTokenizer` counts exactly with any Hugging Face
tokenizer saved in a local directory (the ``hf`` extra); nothing is downloaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ace_gym.errors import ConfigError, did_you_mean, integer

BUCKETS: dict[str, int] = {
    "32k": 32_768,
    "64k": 65_536,
    "128k": 131_072,
    "256k": 262_144,
    "512k": 524_288,
    "1M": 1_048_576,
    "2M": 2_097_152,
    "4M": 4_194_304,
}
"""The paper's context-length buckets under their official directory labels; our choice: binary
sizes (32k = 32,768 tokens), since the paper does not say."""

MESSAGE_OVERHEAD = 4
"""Tokens charged per chat message on top of its text (role and delimiters); our choice."""


@runtime_checkable
class Tokenizer(Protocol):
    """Counts the tokens of a text."""

    def count(self, text: str) -> int: ...


class ApproxTokenizer:
    """The built-in approximate counter (see the module docstring); deterministic and fast."""

    _PIECES = re.compile(r"[^\W\d_]{1,6}|\d{1,3}|\n+|[^\w\s]{1,4}|_")

    def count(self, text: str) -> int:
        return len(self._PIECES.findall(text))

    def __repr__(self) -> str:
        return "ApproxTokenizer()"


class HFTokenizer:
    """Exact counts from a Hugging Face tokenizer stored at a local ``path`` (no special tokens)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not os.path.isdir(path):
            raise ConfigError("tokenizer", os.fspath(path), "must be a local directory holding a saved tokenizer")
        from transformers import AutoTokenizer  # the hf extra; imported only when asked for

        self.path = os.fspath(path)
        self._tokenizer = AutoTokenizer.from_pretrained(self.path)

    def count(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def __repr__(self) -> str:
        return f"HFTokenizer({self.path!r})"


def resolve_tokenizer(spec: str | Tokenizer | None) -> Tokenizer:
    """``None`` or ``"approx"`` -> the built-in counter; ``"hf:<local path>"`` -> :class:`HFTokenizer`;
    a :class:`Tokenizer` is returned as is. Raises ConfigError otherwise."""
    if spec is None or spec == "approx":
        return ApproxTokenizer()
    if isinstance(spec, str):
        kind, sep, path = spec.partition(":")
        if kind == "hf" and sep and path:
            return HFTokenizer(path)
        raise ConfigError("tokenizer", spec, "expected None, 'approx' or 'hf:<local tokenizer directory>'")
    if isinstance(spec, Tokenizer):
        return spec
    raise ConfigError("tokenizer", spec, "expected None, 'approx', 'hf:<path>' or an object with count(text)")


def message_tokens(tokenizer: Tokenizer, message: Mapping[str, Any]) -> int:
    """A chat message's cost: its content, its tool calls' names and JSON arguments, plus
    :data:`MESSAGE_OVERHEAD`."""
    total = MESSAGE_OVERHEAD + tokenizer.count(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        function = call["function"]
        total += tokenizer.count(function["name"]) + tokenizer.count(function["arguments"])
    return total


def resolve_target_tokens(value: int | str) -> tuple[int, str]:
    """``(tokens, bucket label)`` of a ``target_tokens`` value: a bucket label ("32k", "1M"; any
    case) or a positive integer (labelled like its bucket when it is one, else by the number)."""
    if isinstance(value, str):
        for label, tokens in BUCKETS.items():
            if value.lower() == label.lower():
                return tokens, label
        raise ConfigError("target_tokens", value, f"known buckets: {', '.join(BUCKETS)}{did_you_mean(value, BUCKETS)}")
    value = integer("target_tokens", value, minimum=1, note="or a bucket label such as '32k'")
    for label, tokens in BUCKETS.items():
        if tokens == value:
            return value, label
    return value, str(value)

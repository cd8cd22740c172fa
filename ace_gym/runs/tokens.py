"""Token counting and context-length buckets.

Anything with ``count(text) -> int`` is a :class:`Tokenizer`. The default,
:class:`ApproxTokenizer`, is a deterministic built-in counter (one compiled regex, about 0.2 µs
per token) that approximates a byte-level BPE on this benchmark's text: letter runs in pieces of
up to six letters, digit runs in pieces of up to three digits, punctuation runs in pieces of up to
four marks, an underscore, runs of newlines; other whitespace is free. :class:`HFTokenizer` counts exactly with any Hugging Face
tokenizer saved in a local directory (the ``hf`` extra); nothing is downloaded.

:func:`conversation_tokens` counts a chat episode the way a model sees it: the opening prompt (with
the tool schemas), the model's turns and what the env wrote back, apart.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ace_gym.chat_template import ChatTokens
from ace_gym.errors import ConfigError, did_you_mean, integer, one_line

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
    """Exact counts from a Hugging Face tokenizer stored at a local ``path`` (no special tokens);
    ``tokenizer`` is the loaded ``transformers`` tokenizer. ConfigError naming the path when it is
    no directory, holds no tokenizer, or ``transformers`` (the ``hf`` extra) is not installed."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not os.path.isdir(path):
            raise ConfigError("tokenizer", os.fspath(path), "must be a local directory holding a saved tokenizer")
        self.path = os.fspath(path)
        try:
            from transformers import AutoTokenizer  # the hf extra; imported only when asked for
        except ImportError as error:
            raise ConfigError(
                "tokenizer",
                self.path,
                f"needs transformers ({error}); install it: pip install '.[hf]' in an ace-gym checkout",
            ) from None
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        except (OSError, ValueError, TypeError, KeyError) as error:
            problem = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ConfigError("tokenizer", self.path, f"holds no tokenizer transformers can load ({problem})") from None

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

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


@dataclass(frozen=True)
class ConversationTokens:
    """One episode's tokens: ``prompt`` (the opening messages with the tool schemas), ``model``
    (the assistant turns) and ``tool`` (everything the env wrote after the opening: tool replies,
    notices); ``counted_by`` says how (see :func:`conversation_tokens`)."""

    prompt: int
    model: int
    tool: int
    counted_by: str

    @property
    def response(self) -> int:
        """The tokens after the opening prompt: the model's and the env's."""
        return self.model + self.tool


def conversation_tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], tokenizer: Tokenizer
) -> ConversationTokens:
    """Count a chat conversation (OpenAI messages as :class:`~ace_gym.wrappers.ChatAdapter` writes
    them; the opening is every message before the first assistant one) offered ``tools``.

    An :class:`HFTokenizer` with a chat template counts what the model sees: the template's
    rendering with the tools, grown turn by turn (:class:`~ace_gym.chat_template.ChatTokens`): the
    prompt with its generation prompt, each assistant turn as the template writes it (model), the
    replies and the next generation prompt (tool); ``counted_by="chat_template"``. A template that
    is not prefix-stable (it rewrites earlier turns, as Qwen3's drops an empty thinking block) has
    no per-turn split: such an episode, and any tokenizer without a template, is counted message by
    message (:func:`message_tokens`, the tool schemas as their JSON text in the prompt);
    ``counted_by="messages"``. A chat template that fails to render the conversation (it raises,
    names what is undefined, is no valid template, loops past the sandbox's range, or renders
    what the tokenizer cannot encode, a lone surrogate) is a ConfigError naming the tokenizer."""
    opening = next((k for k, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    hf = tokenizer.tokenizer if isinstance(tokenizer, HFTokenizer) else None
    if hf is not None and getattr(hf, "chat_template", None):
        from jinja2 import TemplateError  # transformers' dependency: an HFTokenizer has it

        try:
            counted = _templated_tokens(hf, messages, tools, opening)
        except (TemplateError, ArithmeticError, TypeError, ValueError, RecursionError) as error:
            raise ConfigError(
                "tokenizer",
                getattr(tokenizer, "path", None),
                f"its chat template cannot render an episode's conversation ({type(error).__name__}: "
                f"{one_line(error, 200)})",
            ) from None
        if counted is not None:
            return counted
    prompt = sum(message_tokens(tokenizer, m) for m in messages[:opening]) + (
        tokenizer.count(json.dumps(list(tools), ensure_ascii=False)) if tools else 0
    )
    later = messages[opening:]
    model = sum(message_tokens(tokenizer, m) for m in later if m.get("role") == "assistant")
    tool = sum(message_tokens(tokenizer, m) for m in later if m.get("role") != "assistant")
    return ConversationTokens(prompt, model, tool, "messages")


def _templated_tokens(
    hf: Any, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], opening: int
) -> ConversationTokens | None:
    """The chat-template count of :func:`conversation_tokens`; None when the template is not prefix-stable."""
    tokens = ChatTokens(hf, tools=list(tools) or None)
    with _quiet("ace_gym.chat_template"):  # a template that is not prefix-stable is reported by the caller
        tokens.reset(messages[:opening])
        starts = [k for k in range(opening, len(messages)) if messages[k].get("role") == "assistant"]
        for start, end in zip(starts, [*starts[1:], len(messages)], strict=True):
            tokens.add_turn(messages[start], messages[start + 1 : end])
            if not tokens.prefix_stable:
                return None
    by_kind = {"prompt": 0, "assistant": 0, "env": 0}
    for segment in tokens.segments:
        by_kind[segment.kind] += len(segment.token_ids)
    return ConversationTokens(by_kind["prompt"], by_kind["assistant"], by_kind["env"], "chat_template")


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Drop logger ``name``'s warnings for the duration."""
    logger = logging.getLogger(name)

    def drop(record: logging.LogRecord) -> bool:
        return False

    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)

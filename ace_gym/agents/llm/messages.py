"""Conversation plumbing shared by the engines: what a chat template or an HTTP API expects.

The adapter keeps conversations in OpenAI shape: assistant ``tool_calls`` carry ``arguments`` as a
JSON string and the model's reasoning as ``reasoning_content``. Hugging Face chat templates want
``arguments`` as a mapping (they ``tojson`` it themselves); OpenAI-compatible servers want the
string and only the standard message keys.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ace_gym.agents.base import Completion
from ace_gym.chat_template import template_message

logger = logging.getLogger(__name__)
_OPENAI_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


def _call_arguments(call: Any) -> Any:
    """A call's ``function.arguments``; a string (left as it is) for what is no call object."""
    function = call.get("function") if isinstance(call, Mapping) else None
    return function.get("arguments") if isinstance(function, Mapping) else ""


def _with_arguments(call: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    function = dict(call.get("function", {}))
    function["arguments"] = arguments
    return {**call, "function": function}


def for_chat_template(conversation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copy of ``conversation`` with tool-call arguments decoded to dicts (when they are JSON objects)."""
    return [template_message(message) for message in conversation]


def for_openai(conversation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copy of ``conversation`` with only the standard keys and tool-call arguments as JSON strings."""
    messages = []
    for message in conversation:
        cleaned = {key: message[key] for key in _OPENAI_MESSAGE_KEYS if key in message}
        if cleaned.get("tool_calls") and isinstance(cleaned["tool_calls"], list):
            cleaned["tool_calls"] = [
                call
                if isinstance(_call_arguments(call), str)
                else _with_arguments(call, json.dumps(_call_arguments(call)))
                for call in cleaned["tool_calls"]
            ]
        elif "tool_calls" in cleaned:
            del cleaned["tool_calls"]
        messages.append(cleaned)
    return messages


def render_prompts(
    tokenizer: Any,
    conversations: Sequence[Sequence[Mapping[str, Any]]],
    tools: Sequence[Sequence[Mapping[str, Any]]],
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> list[list[int] | str]:
    """:func:`prompt_token_ids` of each conversation, or the error message where the chat template
    refused it (templates raise on shapes they do not support, e.g. several calls in one turn), so
    that one conversation never fails a whole batch."""
    from jinja2 import TemplateError

    prompts: list[list[int] | str] = []
    for conversation, conversation_tools in zip(conversations, tools, strict=True):
        try:
            prompts.append(prompt_token_ids(tokenizer, conversation, conversation_tools, chat_template_kwargs))
        except TemplateError as error:
            prompts.append(f"chat template error: {error}")
    return prompts


def prompt_token_ids(
    tokenizer: Any,
    conversation: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """Token ids of ``conversation`` rendered by the tokenizer's chat template, ready for the assistant turn.

    The template's own text decides special tokens (a BOS it writes is kept, none is added).
    """
    text = tokenizer.apply_chat_template(
        for_chat_template(conversation),
        tools=list(tools) or None,
        add_generation_prompt=True,
        tokenize=False,
        **dict(chat_template_kwargs or {}),
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def completion_without_generation(prompt: list[int] | str) -> Completion | None:
    """What a rendered prompt gets without calling the model, or None when it can be generated:
    a template refusal (a ``str`` from :func:`render_prompts`) gives ``finish_reason="error"``
    with the message as text. A prompt too long for the model's context is no episode outcome:
    each engine raises :class:`~ace_gym.errors.ConfigError` for it before generating."""
    if isinstance(prompt, str):
        logger.warning("%s", prompt)
        return Completion(text=prompt, finish_reason="error")
    return None

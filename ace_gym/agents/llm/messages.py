"""Conversation plumbing shared by the engines: what a chat template or an HTTP API expects.

The adapter keeps conversations in OpenAI shape: assistant ``tool_calls`` carry ``arguments`` as a
JSON string and the model's reasoning as ``reasoning_content``. Hugging Face chat templates want
``arguments`` as a mapping (they ``tojson`` it themselves); OpenAI-compatible servers want the
string and only the standard message keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

_OPENAI_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


def _call_arguments(call: Mapping[str, Any]) -> Any:
    return call.get("function", {}).get("arguments")


def _with_arguments(call: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    function = dict(call.get("function", {}))
    function["arguments"] = arguments
    return {**call, "function": function}


def for_chat_template(conversation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copy of ``conversation`` with tool-call arguments decoded to dicts (when they are JSON objects)."""
    messages = []
    for message in conversation:
        calls = message.get("tool_calls")
        if calls:
            decoded = []
            for call in calls:
                arguments = _call_arguments(call)
                if isinstance(arguments, str):
                    try:
                        parsed = json.loads(arguments)
                    except json.JSONDecodeError:
                        parsed = None
                    if isinstance(parsed, dict):
                        arguments = parsed
                decoded.append(_with_arguments(call, arguments))
            message = {**message, "tool_calls": decoded}
        messages.append(dict(message))
    return messages


def for_openai(conversation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copy of ``conversation`` with only the standard keys and tool-call arguments as JSON strings."""
    messages = []
    for message in conversation:
        cleaned = {key: message[key] for key in _OPENAI_MESSAGE_KEYS if key in message}
        if cleaned.get("tool_calls"):
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

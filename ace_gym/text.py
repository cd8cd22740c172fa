"""Text that can leave ace-gym: every string an env or wrapper emits encodes as UTF-8, every value
quoted in a message is shown short, and every JSON value read back is nested within a bound."""

from __future__ import annotations

import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

MAX_JSON_DEPTH = 200
"""The deepest nesting of containers (JSON objects and arrays; the outermost is level 1) a JSON
value read from outside may have: deeper ones are refused or replaced, well below the depth at
which Python's recursive readers and writers (``json``, ``repr``, ``==``) raise RecursionError."""


def valid_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so that it encodes as UTF-8.

    A model can spell a lone surrogate as a JSON or Python escape (``"\\ud800"``); passed on raw
    it would make an observation unencodable for a tokenizer and a record unwritable as UTF-8.
    """
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


def valid_strings(value: Any) -> Any:
    """``value`` with every string made valid by :func:`valid_text`: a string itself, and the
    strings (keys too) inside dicts and lists, at any depth (new containers; the others are
    returned as they are). Recursive: for values nested within :data:`MAX_JSON_DEPTH`."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_strings(key): valid_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [valid_strings(item) for item in value]
    return value


def clipped(value: object, limit: int = 80) -> str:
    """``repr(value)`` to quote in a message, at most ``limit`` characters (``...`` marks a cut),
    with lone surrogates replaced. Never raises: an integer too long to print is shown as
    ``<N-bit integer>``, a value whose ``repr`` fails or recurses too deeply as ``<type name>``."""
    try:
        text = repr(value)
    except Exception:  # ValueError (int past the digit limit), RecursionError, a broken __repr__
        if isinstance(value, int):
            text = f"<{value.bit_length()}-bit integer>"
        else:
            text = f"<{type(value).__name__}>"
    text = valid_text(text)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def nested_deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` holds dicts and lists nested more than ``limit`` levels deep (``value``
    itself, when a container, is level 1). Iterative, so it never recurses, and it stops at the
    first level past ``limit``; each container is visited once."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(limit):
        level = [
            child
            for container in level
            for child in (container.values() if isinstance(container, dict) else container)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return False
    return bool(level)

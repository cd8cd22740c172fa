"""What a parser finds in model output: tool calls, and fragments that failed to parse."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

#: keys a JSON object may have and still be read as a call (anything else means it is data)
CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})
#: how much of a broken fragment is quoted back to the model
QUOTE_LIMIT = 120
#: at most this many calls (and broken fragments) are read from one turn; finders stop after one more
MAX_FOUND = 128
#: at most this many opening characters of one kind (``{`` for JSON, ``[`` for pythonic calls) are
#: looked at per turn: a regex search costs a few tens of ns at each, and garbage can be all openers
MAX_OPENERS = 1 << 14
#: longest tool name, parameter name or JSON value the parsers read (tool arguments are short)
MAX_NAME_LENGTH = 128
MAX_VALUE_LENGTH = 1 << 16


class ParsedCall(NamedTuple):
    """One tool call the model asked for.

    ``arguments`` is what the model sent, decoded (normally a dict; anything else is passed on
    and the env answers it with an error envelope). ``call_id`` is the id the model gave (OpenAI
    messages), else None. ``error`` is set when the call's name was readable but its arguments
    were not: such a call is answered with the error and never run. ``arguments_json`` is the
    arguments exactly as written when the model wrote them as a JSON string, else None.
    """

    name: str
    arguments: Any
    call_id: str | None = None
    error: str | None = None
    arguments_json: str | None = None


class Found(NamedTuple):
    """A span of the text that a format claimed: a call, or an error for a broken fragment."""

    start: int
    end: int
    call: ParsedCall | None
    error: str | None


def quote(fragment: str) -> str:
    """A short, single-line quotation of a fragment for an error message."""
    flat = " ".join(fragment[: 2 * QUOTE_LIMIT].split())
    return flat if len(flat) <= QUOTE_LIMIT else flat[: QUOTE_LIMIT - 3] + "..."


def opener_limit(text: str, opener: str) -> int:
    """Where a finder stops looking for ``opener``: the index of its :data:`MAX_OPENERS`-th
    occurrence in ``text``, or ``len(text)`` when there are fewer."""
    if text.count(opener) <= MAX_OPENERS:
        return len(text)
    rest = text.split(opener, MAX_OPENERS)[-1]
    return len(text) - len(rest) - len(opener)


def unread(text: str, start: int, why: str) -> Found:
    """An error claiming nothing: the text from ``start`` on was not read, and why."""
    return Found(
        start, start, None, f"{why}; the text from {quote(text[start : start + 2 * QUOTE_LIMIT])!r} on was not read"
    )


def decode_arguments(name: str, arguments: Any, call_id: str | None = None) -> ParsedCall:
    """A call whose arguments may still be a JSON string (OpenAI style); undecodable -> ``error``."""
    if isinstance(arguments, str):
        if not arguments.strip():
            return ParsedCall(name, {}, call_id)
        try:
            return ParsedCall(name, json.loads(arguments), call_id, None, arguments)
        except (ValueError, RecursionError) as error:
            return ParsedCall(name, None, call_id, error=f"arguments are not valid JSON ({error})")
    return ParsedCall(name, {} if arguments is None else arguments, call_id)


def call_from_object(value: Any) -> ParsedCall | None:
    """Read ``{"name", "arguments"|"parameters"}`` (optionally wrapped as ``{"function": {...}}``)
    as a call; None when ``value`` is not shaped like one."""
    if not isinstance(value, Mapping):
        return None
    function = value.get("function")
    if isinstance(function, Mapping) and "name" in function:
        call_id = value.get("id")
        value = function
    else:
        call_id = None
    name = value.get("name")
    if not isinstance(name, str) or not name or not CALL_KEYS.issuperset(value):
        return None
    arguments = value.get("arguments", value.get("parameters"))
    return decode_arguments(name, arguments, call_id if isinstance(call_id, str) else None)


def calls_from_json(value: Any) -> list[ParsedCall] | None:
    """A call object or a non-empty list of call objects as calls; None if it is anything else."""
    if isinstance(value, list):
        calls = [call for call in map(call_from_object, value) if call is not None]
        return calls if calls and len(calls) == len(value) else None
    call = call_from_object(value)
    return None if call is None else [call]

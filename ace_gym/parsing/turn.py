"""One assistant turn in, its reasoning, prose and tool calls out, whatever format the model used."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ace_gym.parsing.calls import MAX_FOUND, Found, ParsedCall, call_from_object
from ace_gym.parsing.formats import MISTRAL_MARKER, PYTHON_TAG, TAG_OPEN, find_json, find_mistral, find_tagged
from ace_gym.parsing.pythonic import PYTHON_END, PYTHON_START, find_pythonic
from ace_gym.parsing.reasoning import split_reasoning
from ace_gym.text import valid_text

_FINDERS: dict[str, Callable[[str], list[Found]]] = {
    "hermes": lambda text: find_tagged(text, xml_inside=False),
    "qwen3_xml": lambda text: find_tagged(text, json_inside=False),
    "llama3_json": find_json,
    "json": find_json,
    "mistral": find_mistral,
    "pythonic": find_pythonic,
    "openai": lambda text: [],
}
#: accepted values of ``tool_format``: "auto" or one named format
TOOL_FORMATS: tuple[str, ...] = ("auto", *_FINDERS)

#: how each format writes a call, shown to the model when a turn had no usable call
FORMAT_EXAMPLES: dict[str, str] = {
    "hermes": '<tool_call>\n{"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}\n</tool_call>',
    "qwen3_xml": (
        "<tool_call>\n<function=set_slot>\n<parameter=row>\n1\n</parameter>\n<parameter=col>\n2\n</parameter>\n"
        "<parameter=id>\nC1\n</parameter>\n</function>\n</tool_call>"
    ),
    "llama3_json": '{"name": "set_slot", "parameters": {"row": 1, "col": 2, "id": "C1"}}',
    "json": '{"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}',
    "mistral": '[TOOL_CALLS][{"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}]',
    "pythonic": '[set_slot(row=1, col=2, id="C1")]',
    "openai": 'an assistant message with "tool_calls" (function name and JSON arguments)',
}
_MARKERS = (PYTHON_TAG, PYTHON_START, PYTHON_END)
_PROSE_EDGES = " \t\r\n;,"
TOO_MANY_CALLS = f"more than {MAX_FOUND} tool calls in one turn; only the first {MAX_FOUND} were read"


class ParsedTurn(NamedTuple):
    """An assistant turn taken apart.

    ``calls`` in the order written; ``content`` the prose left once reasoning and call markup are
    removed; ``reasoning`` the think text (None if none); ``errors`` describe fragments that
    looked like calls but had no readable tool name; ``format`` is where the calls were found
    (None when nothing call-like was found).
    """

    calls: tuple[ParsedCall, ...]
    content: str
    reasoning: str | None
    errors: tuple[str, ...]
    format: str | None


def parse_turn(action: Any, tool_format: str = "auto") -> ParsedTurn:
    """Take apart one assistant turn: model text, or an OpenAI-style assistant message dict.

    Never raises for any ``action``; what cannot be read is reported in ``errors`` or as calls
    carrying an ``error``. Native ``tool_calls`` of a message are used whatever ``tool_format``
    says; without them the message content is parsed as text. ``tool_format`` must be one of
    :data:`TOOL_FORMATS` (the caller validates it). Every string of the result is valid UTF-8
    (lone surrogates, raw or decoded from an escape, become U+FFFD), so it can be emitted as it
    is; only the decoded ``arguments`` of a call hold what the model sent.
    """
    try:
        if isinstance(action, str):
            return _valid_turn(parse_text(action, tool_format))
        if isinstance(action, Mapping):
            return _valid_turn(_parse_message(action, tool_format))
    except (RecursionError, MemoryError) as error:  # absurdly nested input: a resource limit, not a bug
        return ParsedTurn((), "", None, (f"the turn could not be parsed ({type(error).__name__})",), None)
    kind = type(action).__name__
    return ParsedTurn((), "", None, (f"a turn must be text or an assistant message dict, got {kind}",), None)


def _valid_turn(turn: ParsedTurn) -> ParsedTurn:
    """``turn`` with lone surrogates in its strings (prose, reasoning, errors, call names, ids,
    errors and arguments as written) replaced by U+FFFD; the same turn when all are ASCII."""
    calls, content, reasoning, errors, found = turn
    if (
        content.isascii()
        and (reasoning is None or reasoning.isascii())
        and all(error.isascii() for error in errors)
        and all(_ascii_call(call) for call in calls)
    ):
        return turn
    return ParsedTurn(
        tuple(map(_valid_call, calls)),
        valid_text(content),
        None if reasoning is None else valid_text(reasoning),
        tuple(map(valid_text, errors)),
        found,
    )


def _ascii_call(call: ParsedCall) -> bool:
    name, _, call_id, error, written = call
    return (
        name.isascii()
        and (call_id is None or call_id.isascii())
        and (error is None or error.isascii())
        and (written is None or written.isascii())
    )


def _valid_call(call: ParsedCall) -> ParsedCall:
    if _ascii_call(call):
        return call
    name, arguments, call_id, error, written = call
    return ParsedCall(
        valid_text(name),
        arguments,
        None if call_id is None else valid_text(call_id),
        None if error is None else valid_text(error),
        None if written is None else valid_text(written),
    )


def parse_text(text: str, tool_format: str = "auto") -> ParsedTurn:
    """Parse model text: split off ``<think>`` reasoning, then find calls in ``tool_format``. The
    strings are as the text holds them (:func:`parse_turn` makes them valid UTF-8)."""
    reasoning, rest = split_reasoning(text)
    if tool_format == "auto":
        found, found_format = _detect(rest)
    else:
        found, found_format = _FINDERS[tool_format](rest), tool_format
    if not found:
        return ParsedTurn((), _prose(rest, found), reasoning, (), None)
    too_many = len(found) > MAX_FOUND
    if too_many:
        found = found[:MAX_FOUND]
    calls: list[ParsedCall] = []
    errors: list[str] = []
    for _, _, call, error in found:
        if call is not None:
            calls.append(call)
        if error is not None:
            errors.append(error)
    if too_many:
        errors.append(TOO_MANY_CALLS)
    return ParsedTurn(tuple(calls), _prose(rest, found), reasoning, tuple(errors), found_format)


def _detect(text: str) -> tuple[list[Found], str]:
    if TAG_OPEN in text:
        return find_tagged(text), "qwen3_xml" if "<function=" in text else "hermes"
    if MISTRAL_MARKER in text:
        return find_mistral(text), "mistral"
    found = find_json(text)
    if found:
        return found, "llama3_json" if PYTHON_TAG in text else "json"
    return find_pythonic(text), "pythonic"


def _prose(text: str, found: list[Found]) -> str:
    """The text outside the claimed spans (spans may repeat or nest), without call markers."""
    if found:
        pieces = []
        position = 0
        for start, end, _, _ in found:
            if start >= position:
                pieces.append(text[position:start])
            if end > position:
                position = end
        pieces.append(text[position:])
        text = "".join(pieces)
        if "\n\n\n" in text:  # rare: a run of blank lines may meet at a removed call
            text = _join_pieces(pieces)
    for marker in _MARKERS:
        if marker in text:
            text = text.replace(marker, "")
    return text.strip(_PROSE_EDGES)


def _join_pieces(pieces: list[str]) -> str:
    """Join the text left around removed calls; where the whitespace meeting at a removed call
    holds three or more line breaks, it becomes one blank line. Reads each piece once."""
    joined: list[str] = []
    gap: list[str] = []  # the whitespace around the current joint
    last = len(pieces) - 1
    for index, piece in enumerate(pieces):
        body = piece.lstrip() if index else piece
        gap.append(piece[: len(piece) - len(body)])
        kept = body.rstrip() if index < last else body
        if kept:
            joined.append(_blank_line(gap))
            joined.append(kept)
            gap = []
        gap.append(body[len(kept) :])
    joined.append(_blank_line(gap))
    return "".join(joined)


def _blank_line(whitespace: list[str]) -> str:
    text = "".join(whitespace)
    return "\n\n" if text.count("\n") >= 3 else text


def _text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _parse_message(message: Mapping[str, Any], tool_format: str) -> ParsedTurn:
    text = _text_of(message.get("content"))
    given = message.get("reasoning_content", message.get("reasoning"))
    given_reasoning = given if isinstance(given, str) and given else None
    tool_calls = message.get("tool_calls")
    if tool_calls is None or (isinstance(tool_calls, list) and not tool_calls):
        turn = parse_text(text, tool_format)
    elif not isinstance(tool_calls, list):
        turn = parse_text(text, tool_format)
        ignored = f"tool_calls must be a list of calls, got {type(tool_calls).__name__}, so it was ignored"
        turn = turn._replace(errors=(ignored, *turn.errors))
    else:
        calls, errors = [], []
        for index, item in enumerate(tool_calls[:MAX_FOUND]):
            call = call_from_object(item)
            if call is None:
                errors.append(f"tool_calls[{index}] is not a function call with a name")
            else:
                calls.append(call)
        if len(tool_calls) > MAX_FOUND:
            errors.append(TOO_MANY_CALLS)
        reasoning, rest = split_reasoning(text)
        turn = ParsedTurn(tuple(calls), rest.strip(), reasoning, tuple(errors), "openai")
    if given_reasoning is None:
        return turn
    reasoning = given_reasoning if turn.reasoning is None else f"{given_reasoning}\n\n{turn.reasoning}"
    return ParsedTurn(turn.calls, turn.content, reasoning, turn.errors, turn.format)

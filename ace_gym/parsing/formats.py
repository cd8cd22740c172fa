"""Finders for the text tool-call formats LLMs emit; one function per format family.

Every finder takes the model's text (reasoning already removed) and returns the spans it claims
as :class:`Found` entries, in text order. They never raise: a broken fragment becomes a
``Found`` with an error (or a call with an ``error`` when the tool name was still readable).

They run in time linear in the text, whatever it holds (``benchmarks/bench_parsing.py``): each
block or marker region is read once, names are bounded, JSON values are read up to
:data:`~ace_gym.parsing.calls.MAX_VALUE_LENGTH` characters, and the work spent on garbage is
capped per text; what a cap leaves unread is reported as an error, never dropped silently.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ace_gym.parsing.calls import (
    MAX_FOUND,
    MAX_NAME_LENGTH,
    MAX_VALUE_LENGTH,
    QUOTE_LIMIT,
    Found,
    ParsedCall,
    calls_from_json,
    decode_arguments,
    opener_limit,
    quote,
    unread,
)

TAG_OPEN = "<tool_call>"
TAG_CLOSE = "</tool_call>"
MISTRAL_MARKER = "[TOOL_CALLS]"
PYTHON_TAG = "<|python_tag|>"

_DECODER = json.JSONDecoder()
_TUPLE = tuple.__new__
#: the first window a JSON value is decoded in; a longer value gets windows 4x larger, up to MAX_VALUE_LENGTH
_WINDOW = 1024
_WINDOW_MARGIN = 256
#: JSON values :func:`find_json` tries in one text (calls, data and broken fragments alike)
MAX_JSON_VALUES = 1024
#: characters :func:`find_json` may decode: half the text's length plus a fixed allowance (a
#: call is decoded once; what costs more is garbage whose failed attempts overlap and re-read it)
_DECODE_ALLOWANCE = 1 << 16
_NAME = f"{{0,{MAX_NAME_LENGTH}}}"  # bounded names: a failed match never backtracks over a long run
_SPACE = re.compile(r"\s*")
_FUNCTION = re.compile(rf"<function=([^<>\n]{_NAME})>")
_FUNCTION_CLOSE = "</function>"
_PARAMETER = re.compile(rf"<parameter=([^<>\n]{_NAME})>")
_PARAMETER_OPEN = "<parameter="
_PARAMETER_CLOSE = "</parameter>"
#: parameters read per ``<function=...>`` (the tools take at most six)
MAX_PARAMETERS = 64
_NAME_VALUE = re.compile(r'"name"\s*:\s*"([^"\\]{1,100})"')
_CALL_START = re.compile(r'\{\s*"(?:name|function|type|id)"\s*:')
# the layout chat templates write and models copy: {"name": "<tool>", "arguments": {...}}, up to
# the arguments' opening brace
_CANONICAL_HEAD = r'\{\s*"name"\s*:\s*"([^"\\]{1,100})"\s*,\s*"(?:arguments|parameters)"\s*:\s*'
_CANONICAL_CALL = re.compile(_CANONICAL_HEAD + r"(?=\{)")
_OBJECT_END = re.compile(r"\s*\}")
#: longest arguments text :func:`_simple_block` reads (a longer one goes the general way, which reads it in windows)
_SIMPLE_ARGUMENTS_LENGTH = 1024
# a whole Hermes block in that layout with short flat arguments (no nested object), closed right after the call
_SIMPLE_BLOCK = re.compile(
    rf"{re.escape(TAG_OPEN)}\s*{_CANONICAL_HEAD}(\{{[^{{}}]{{0,{_SIMPLE_ARGUMENTS_LENGTH}}}\}})\s*\}}\s*{re.escape(TAG_CLOSE)}"
)
_TAG_TAIL = "tool_call>"  # ends both tags: a block it does not occur inside holds no other tag
_MISTRAL_NAMED = re.compile(
    rf"\s*([A-Za-z_][\w.\-]{_NAME})\s*(?:\[CALL_ID\]\s*([\w\-]{{1,{MAX_NAME_LENGTH}}})\s*)?\[ARGS\]"
)
_LIST_LOOKBACK = 64


class DecodeBudget:
    """Characters the JSON decoder may still read for one text; ``exhausted`` once a decode was refused."""

    def __init__(self, text_length: int) -> None:
        self.chars = text_length // 2 + _DECODE_ALLOWANCE
        self.exhausted = False

    def charge(self, chars: int) -> None:
        self.chars -= chars


class _NextFinder:
    """Occurrences of ``needle`` in ``text[:stop]`` asked for at increasing positions: a search
    resumes only once the position passes the last occurrence found, so all of them cost one pass."""

    def __init__(self, text: str, needle: str, stop: int | None = None) -> None:
        self.text, self.needle = text, needle
        self.stop = len(text) if stop is None else stop
        self.found = -2  # not searched yet

    def at(self, position: int) -> int:
        """The first occurrence at or after ``position``, or -1."""
        if self.found != -1 and self.found < position:
            self.found = self.text.find(self.needle, position, self.stop)
        return self.found


def _decode_json(text: str, start: int, stop: int, budget: DecodeBudget | None = None) -> tuple[Any, int] | str:
    """``(value, end)`` of the JSON value at ``start`` within ``text[start:stop]``, or the decoder's complaint.

    Decodes growing windows (1 KiB, then 4x larger while the value runs past the window, up to
    :data:`MAX_VALUE_LENGTH`): the decoder's error message counts lines from the start of its
    input and a failed decode may read all of it, so an attempt costs about its window, never the
    rest of the text. ``budget`` (if given) pays for what is read; once spent, values are refused.
    """
    size = _WINDOW
    while True:
        window_end = min(stop, start + size)
        if budget is not None and budget.chars < window_end - start:
            budget.exhausted = True
            return "not read (the turn holds more JSON than the parser reads)"
        window = text[start:window_end]
        try:
            value, end = _DECODER.raw_decode(window)
        except json.JSONDecodeError as error:
            if budget is not None:
                budget.charge(error.pos + 1)
            ran_out = error.pos >= len(window) - _WINDOW_MARGIN or error.msg.startswith("Unterminated string")
            if not ran_out or window_end == stop:
                return f"invalid JSON ({error})"
        except (ValueError, RecursionError) as error:  # a number past the digit limit, or deep nesting
            if budget is not None:
                budget.charge(len(window))
            return f"invalid JSON ({error})"
        else:
            if budget is not None:
                budget.charge(end)
            # a number may go on past the window; objects, lists and strings end where they say
            if end < len(window) or window_end == stop or isinstance(value, (dict, list, str)):
                return value, start + end
        if size >= MAX_VALUE_LENGTH:
            return f"invalid JSON (a value longer than {MAX_VALUE_LENGTH} characters is not read)"
        size *= 4


def _canonical_call(
    text: str, start: int, stop: int, budget: DecodeBudget | None = None
) -> tuple[ParsedCall, int] | str | None:
    """``(call, end)`` for a call object at ``start`` in the canonical layout, keeping the
    arguments text exactly as written (``arguments_json``); the decoder's complaint when the
    arguments of such an object do not decode (the whole object cannot either); None for any
    other layout, which the general path then reads. Also the fast path: only the arguments are
    decoded."""
    head = _CANONICAL_CALL.match(text, start, stop)
    if head is None:
        return None
    decoded = _decode_json(text, head.end(), stop, budget)
    if isinstance(decoded, str):
        return decoded
    arguments, arguments_end = decoded
    tail = _OBJECT_END.match(text, arguments_end, stop)
    if tail is None:
        return None
    return ParsedCall(head.group(1), arguments, None, None, text[head.end() : arguments_end]), tail.end()


def _broken(fragment: str, problem: str, start: int, end: int) -> Found:
    """A fragment that failed to parse; keeps the tool name when one can be read."""
    fragment = fragment[: 4 * QUOTE_LIMIT]
    name = _NAME_VALUE.search(fragment)
    message = f"{problem} in {quote(fragment)!r}"
    if name:
        return Found(start, end, ParsedCall(name.group(1), None, error=message), None)
    return Found(start, end, None, message)


def _json_calls(decoded: tuple[Any, int] | str, fragment: str, start: int, end: int, what: str) -> list[Found]:
    """The calls of a decoded JSON value (a call or a list of calls) claiming ``text[start:end]``;
    ``fragment`` is the start of the raw text, quoted when it did not decode."""
    if isinstance(decoded, str):
        return [_broken(fragment, f"{decoded}, possibly truncated", start, end)]
    calls = calls_from_json(decoded[0])
    if calls is None:
        return [Found(start, end, None, f'{what} is not a call {{"name": ..., "arguments": {{...}}}}')]
    return [Found(start, end, call, None) for call in calls]


def _skip_space(text: str, position: int, stop: int) -> int:
    match = _SPACE.match(text, position, stop)
    return match.end() if match else position


def _head(text: str, start: int, stop: int) -> str:
    """The start of ``text[start:stop]``, enough to quote."""
    return text[start : min(stop, start + 4 * QUOTE_LIMIT)]


# -- <tool_call> blocks: Hermes / Qwen2.5 JSON and Qwen3-Coder / Qwen3.5 XML --------------------


def _xml_value(raw: str) -> Any:
    """A parameter value: JSON when it decodes (numbers, lists, objects...), else the string."""
    value = raw[1:] if raw.startswith("\n") else raw
    value = value[:-1] if value.endswith("\n") else value
    if len(value) > MAX_VALUE_LENGTH:
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def _xml_parameters(text: str, start: int, stop: int) -> dict[str, Any] | str:
    """The ``<parameter=KEY>VALUE</parameter>`` pairs of ``text[start:stop]``; a value ends at its
    closing tag, the next ``<parameter=`` or ``stop``. Why not, when there are too many."""
    arguments: dict[str, Any] = {}
    openers = _NextFinder(text, _PARAMETER_OPEN, stop)
    closers = _NextFinder(text, _PARAMETER_CLOSE, stop)
    position = start
    for _ in range(MAX_PARAMETERS):
        tag = _PARAMETER.search(text, position, stop)
        if tag is None:
            return arguments
        following, closer = openers.at(tag.end()), closers.at(tag.end())
        ends = [p for p in (following, closer) if p != -1]
        value_end = min(ends) if ends else stop
        arguments[tag.group(1).strip()] = _xml_value(text[tag.end() : value_end])
        position = value_end + len(_PARAMETER_CLOSE) if value_end == closer else value_end
    if _PARAMETER.search(text, position, stop):
        return f"more than {MAX_PARAMETERS} <parameter=...> tags in one call"
    return arguments


def _xml_calls(text: str, body_start: int, body_end: int, start: int, end: int) -> list[Found]:
    """The ``<function=NAME>...</function>`` calls in the block body ``text[body_start:body_end]``."""
    found: list[Found] = []
    position = body_start
    while len(found) <= MAX_FOUND and (function := _FUNCTION.search(text, position, body_end)):
        name = function.group(1).strip()
        close = text.find(_FUNCTION_CLOSE, function.end(), body_end)
        if close == -1:
            body = quote(_head(text, body_start, body_end))
            error = f"the call is cut off before </function> (possibly truncated) in {body!r}"
            found.append(Found(start, end, ParsedCall(name, None, error=error), None))
            break
        arguments = _xml_parameters(text, function.end(), close)
        if isinstance(arguments, str):
            found.append(Found(start, end, ParsedCall(name, None, error=arguments), None))
        else:
            found.append(Found(start, end, ParsedCall(name, arguments), None))
        position = close + len(_FUNCTION_CLOSE)
    return found


def _tagged_block(
    text: str, body_start: int, body_end: int, start: int, end: int, json_inside: bool, xml_inside: bool
) -> list[Found]:
    """What one ``<tool_call>`` block claiming ``text[start:end]`` holds; every read stays in its body."""
    value_at = _skip_space(text, body_start, body_end)
    if xml_inside and text.startswith("<function=", value_at, body_end):
        return _xml_calls(text, value_at, body_end, start, end) or [
            Found(start, end, None, "empty <function=...> block")
        ]
    if json_inside and value_at < body_end and text[value_at] in "{[":
        canonical = _canonical_call(text, value_at, body_end)
        if isinstance(canonical, tuple):
            return [Found(start, end, canonical[0], None)]
        decoded = canonical if isinstance(canonical, str) else _decode_json(text, value_at, body_end)
        return _json_calls(decoded, _head(text, value_at, body_end), start, end, "the <tool_call> block")
    expected = " or ".join(shape for shape, ok in (("a JSON call", json_inside), ("<function=NAME>", xml_inside)) if ok)
    return [
        Found(start, end, None, f"<tool_call> must contain {expected}, got {quote(_head(text, value_at, body_end))!r}")
    ]


def _simple_block(text: str, start: int) -> Found | None:
    """The block at ``start`` when it is one canonical call with flat arguments and nothing
    else, as models write nearly every call: what the general path reads from such a block,
    found with one regex match and one decode of the arguments. None for any other block."""
    block = _SIMPLE_BLOCK.match(text, start)
    if block is None or text.find(_TAG_TAIL, start + len(TAG_OPEN), block.end() - len(TAG_CLOSE)) != -1:
        return None
    name, arguments_json = block.groups()
    try:
        arguments, end = _DECODER.raw_decode(arguments_json)
    except ValueError:
        return None
    if end != len(arguments_json):
        return None
    # built as plain tuples: NamedTuple(...) runs a Python-level __new__, which costs more here
    call = _TUPLE(ParsedCall, (name, arguments, None, None, arguments_json))
    return _TUPLE(Found, (start, block.end(), call, None))


def find_tagged(text: str, *, json_inside: bool = True, xml_inside: bool = True) -> list[Found]:
    """``<tool_call>...</tool_call>`` blocks holding JSON (Hermes) or ``<function=...>`` XML (Qwen3).

    A block whose closing tag is missing runs to the next ``<tool_call>`` or the end of the text.
    """
    found: list[Found] = []
    closers: _NextFinder | None = None  # made for the first block the simple path does not read
    start = text.find(TAG_OPEN)
    while len(found) <= MAX_FOUND and start != -1:
        simple = _simple_block(text, start) if json_inside else None
        if simple is not None:
            found.append(simple)
            start = text.find(TAG_OPEN, simple.end)
            continue
        if closers is None:
            closers = _NextFinder(text, TAG_CLOSE)
        body_start = start + len(TAG_OPEN)
        following = text.find(TAG_OPEN, body_start)
        close = closers.at(body_start)
        if close == -1 or (following != -1 and following < close):
            body_end = end = following if following != -1 else len(text)
        else:
            body_end, end = close, close + len(TAG_CLOSE)
        found.extend(_tagged_block(text, body_start, body_end, start, end, json_inside, xml_inside))
        start = following  # never inside this block: it either ends there or closes before it
    return found


# -- Mistral: [TOOL_CALLS][{...}, ...]  or  [TOOL_CALLS]name[ARGS]{...} --------------------------


def find_mistral(text: str) -> list[Found]:
    """Calls after each ``[TOOL_CALLS]`` marker, in the JSON-list or the name[ARGS] form; what a
    marker introduces ends at the next marker."""
    found: list[Found] = []
    start = text.find(MISTRAL_MARKER)
    while len(found) <= MAX_FOUND and start != -1:
        after = start + len(MISTRAL_MARKER)
        following = text.find(MISTRAL_MARKER, after)
        stop = following if following != -1 else len(text)
        body = _skip_space(text, after, stop)
        named = _MISTRAL_NAMED.match(text, after, stop)
        if body < stop and text[body] in "[{":
            decoded = _decode_json(text, body, stop)
            end = decoded[1] if not isinstance(decoded, str) else stop
            found.extend(_json_calls(decoded, _head(text, body, end), start, end, "the [TOOL_CALLS] payload"))
        elif named:
            arguments_at = _skip_space(text, named.end(), stop)
            decoded = _decode_json(text, arguments_at, stop)
            if isinstance(decoded, str):
                error = f"{decoded}, possibly truncated, in {quote(_head(text, arguments_at, stop))!r}"
                found.append(Found(start, stop, ParsedCall(named.group(1), None, named.group(2), error), None))
            else:
                call = decode_arguments(named.group(1), decoded[0], named.group(2))
                found.append(Found(start, decoded[1], call, None))
        else:
            got = quote(_head(text, after, stop))
            found.append(Found(start, stop, None, f"expected a JSON list of calls after [TOOL_CALLS], got {got!r}"))
        start = following
    return found


# -- bare JSON: an object or a list of objects, also Llama-3 {"name", "parameters"} -------------


def _json_start(text: str, position: int) -> int:
    """The next ``{`` at or after ``position``, or the ``[`` opening a list whose first item it is; -1 if none."""
    brace = text.find("{", position)
    if brace == -1:
        return -1
    lookback = max(position, brace - _LIST_LOOKBACK)
    before = text[lookback:brace].rstrip()
    return lookback + len(before) - 1 if before.endswith("[") else brace


def find_json(text: str) -> list[Found]:
    """Top-level JSON call objects (or lists of them) anywhere in the text.

    Accepts ``{"name", "arguments"}``, Llama-3's ``{"name", "parameters"}`` (optionally after
    ``<|python_tag|>``, several separated by ``;``) and ``{"type": "function", "function": {...}}``.
    JSON that is not shaped like a call (say, a grid the model quotes) is skipped; a call-shaped
    object that does not decode is reported up to the next call-shaped start. Work is bounded:
    at most :data:`MAX_JSON_VALUES` values are tried, the decoder reads about half the text's length
    (a :class:`DecodeBudget`) and the first :data:`~ace_gym.parsing.calls.MAX_OPENERS` ``{`` are
    looked at; past any limit the rest of the text is reported unread.
    """
    found: list[Found] = []
    budget = DecodeBudget(len(text))
    limit = opener_limit(text, "{")
    position = tried = 0
    while len(found) <= MAX_FOUND and (start := _json_start(text, position)) != -1:
        if start >= limit or tried == MAX_JSON_VALUES:
            found.append(unread(text, start, "too many JSON values in one turn"))
            break
        tried += 1
        canonical = _canonical_call(text, start, len(text), budget)
        if isinstance(canonical, tuple):
            found.append(Found(start, canonical[1], canonical[0], None))
            position = canonical[1]
            continue
        decoded = canonical if isinstance(canonical, str) else _decode_json(text, start, len(text), budget)
        if budget.exhausted:
            found.append(unread(text, start, "too much malformed JSON in one turn"))
            break
        if isinstance(decoded, str):
            first_brace = text.find("{", start)
            if _CALL_START.match(text, first_brace):
                following = _CALL_START.search(text, first_brace + 1, limit)
                end = following.start() if following else limit
                found.append(_broken(_head(text, start, end), f"{decoded}, possibly truncated", start, end))
                position = end
            else:  # not a call: resume at the next call-shaped start (keeps long garbage linear)
                following = _CALL_START.search(text, start + 1, limit)
                position = following.start() if following else limit
            continue
        value, end = decoded
        calls = calls_from_json(value)
        if calls is not None:
            found.extend(Found(start, end, call, None) for call in calls)
        position = end
    return found

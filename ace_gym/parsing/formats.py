"""Finders for the text tool-call formats LLMs emit; one function per format family.

Every finder takes the model's text (reasoning already removed) and returns the spans it claims
as :class:`Found` entries, in text order. They never raise: a broken fragment becomes a
``Found`` with an error (or a call with an ``error`` when the tool name was still readable).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ace_gym.parsing.calls import MAX_FOUND, QUOTE_LIMIT, Found, ParsedCall, calls_from_json, decode_arguments, quote

TAG_OPEN = "<tool_call>"
TAG_CLOSE = "</tool_call>"
MISTRAL_MARKER = "[TOOL_CALLS]"
PYTHON_TAG = "<|python_tag|>"

_DECODER = json.JSONDecoder()
_WINDOW = 4096
_WINDOW_MARGIN = 256
_SPACE = re.compile(r"\s*")
_FUNCTION = re.compile(r"<function=([^>\n]*)>")
_FUNCTION_CLOSE = "</function>"
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.S)
_NAME_VALUE = re.compile(r'"name"\s*:\s*"([^"\\]{1,100})"')
_JSON_START = re.compile(r"\{|\[\s*\{")
_CALL_START = re.compile(r'\{\s*"(?:name|function|type|id)"\s*:')
# the layout chat templates write and models copy: {"name": "<tool>", "arguments": {...}}
_CANONICAL_CALL = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]{1,100})"\s*,\s*"(?:arguments|parameters)"\s*:\s*(?=\{)')
_OBJECT_END = re.compile(r"\s*\}")
_MISTRAL_NAMED = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*([\w\-]+)\s*)?\[ARGS\]")


def _decode_json(text: str, start: int) -> tuple[Any, int] | str:
    """``(value, end)`` of the JSON value at ``start``, or the decoder's complaint.

    Decodes a window first: the decoder's error message counts lines from the start of its
    input, which would make scanning a long text for calls quadratic.
    """
    window = text[start : start + _WINDOW]
    try:
        value, end = _DECODER.raw_decode(window)
        return value, start + end
    except json.JSONDecodeError as error:
        ran_out = error.pos >= len(window) - _WINDOW_MARGIN or error.msg.startswith("Unterminated string")
        if not ran_out or len(window) == len(text) - start:
            return f"invalid JSON ({error})"
    except RecursionError as error:
        return f"invalid JSON ({error})"
    try:
        value, end = _DECODER.raw_decode(text[start:])
        return value, start + end
    except (ValueError, RecursionError) as error:
        return f"invalid JSON ({error})"


def _canonical_call(text: str, start: int) -> tuple[ParsedCall, int] | None:
    """``(call, end)`` for a call object at ``start`` in the canonical layout, keeping the
    arguments text exactly as written (``arguments_json``); None for any other layout, which the
    general path then reads. Also the fast path: only the arguments are decoded."""
    head = _CANONICAL_CALL.match(text, start)
    if head is None:
        return None
    try:
        arguments, arguments_end = _DECODER.raw_decode(text, head.end())
    except (ValueError, RecursionError):
        return None
    tail = _OBJECT_END.match(text, arguments_end)
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
    ``fragment`` is the raw text, quoted when it did not decode."""
    if isinstance(decoded, str):
        return [_broken(fragment, f"{decoded}, possibly truncated", start, end)]
    calls = calls_from_json(decoded[0])
    if calls is None:
        return [Found(start, end, None, f'{what} is not a call {{"name": ..., "arguments": {{...}}}}')]
    return [Found(start, end, call, None) for call in calls]


# -- <tool_call> blocks: Hermes / Qwen2.5 JSON and Qwen3-Coder / Qwen3.5 XML --------------------


def _xml_value(raw: str) -> Any:
    """A parameter value: JSON when it decodes (numbers, lists, objects...), else the string."""
    value = raw[1:] if raw.startswith("\n") else raw
    value = value[:-1] if value.endswith("\n") else value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def _xml_calls(body: str, start: int, end: int) -> list[Found]:
    found = []
    for function in _FUNCTION.finditer(body):
        name = function.group(1).strip()
        close = body.find(_FUNCTION_CLOSE, function.end())
        if close == -1:
            error = f"the call is cut off before </function> (possibly truncated) in {quote(body)!r}"
            found.append(Found(start, end, ParsedCall(name, None, error=error), None))
            break
        arguments = {
            m.group(1).strip(): _xml_value(m.group(2)) for m in _PARAMETER.finditer(body, function.end(), close)
        }
        found.append(Found(start, end, ParsedCall(name, arguments), None))
    return found


def find_tagged(text: str, *, json_inside: bool = True, xml_inside: bool = True) -> list[Found]:
    """``<tool_call>...</tool_call>`` blocks holding JSON (Hermes) or ``<function=...>`` XML (Qwen3).

    A block whose closing tag is missing runs to the next ``<tool_call>`` or the end of the text.
    """
    found: list[Found] = []
    position = 0
    close = 0
    while len(found) <= MAX_FOUND and (start := text.find(TAG_OPEN, position)) != -1:
        body_start = start + len(TAG_OPEN)
        if close != -1 and close < body_start:  # once no closing tag is left, never search again
            close = text.find(TAG_CLOSE, body_start)
        following = text.find(TAG_OPEN, body_start)
        if close == -1 or (following != -1 and following < close):
            body_end = end = following if following != -1 else len(text)
        else:
            body_end, end = close, close + len(TAG_CLOSE)
        body = text[body_start:body_end].strip()
        if xml_inside and body.startswith("<function="):
            found.extend(_xml_calls(body, start, end) or [Found(start, end, None, "empty <function=...> block")])
        elif json_inside and body[:1] in ("{", "["):
            value_at = text.index(body[0], body_start)
            canonical = _canonical_call(text, value_at)
            if canonical is not None and canonical[1] <= end:
                found.append(Found(start, end, canonical[0], None))
            else:
                decoded = _decode_json(text, value_at)
                found.extend(_json_calls(decoded, text[value_at:end], start, end, "the <tool_call> block"))
        else:
            expected = " or ".join(
                shape for shape, ok in (("a JSON call", json_inside), ("<function=NAME>", xml_inside)) if ok
            )
            found.append(Found(start, end, None, f"<tool_call> must contain {expected}, got {quote(body)!r}"))
        position = end
    return found


# -- Mistral: [TOOL_CALLS][{...}, ...]  or  [TOOL_CALLS]name[ARGS]{...} --------------------------


def find_mistral(text: str) -> list[Found]:
    """Calls after each ``[TOOL_CALLS]`` marker, in the JSON-list or the name[ARGS] form."""
    found: list[Found] = []
    position = 0
    while len(found) <= MAX_FOUND and (start := text.find(MISTRAL_MARKER, position)) != -1:
        after = start + len(MISTRAL_MARKER)
        body = _skip_space(text, after)
        named = _MISTRAL_NAMED.match(text, after)
        if text[body : body + 1] in ("[", "{"):
            decoded = _decode_json(text, body)
            end = decoded[1] if not isinstance(decoded, str) else _next_marker(text, after)
            found.extend(_json_calls(decoded, text[body:end], start, end, "the [TOOL_CALLS] payload"))
        elif named:
            arguments_at = _skip_space(text, named.end())
            decoded = _decode_json(text, arguments_at)
            if isinstance(decoded, str):
                end = _next_marker(text, after)
                error = f"{decoded}, possibly truncated, in {quote(text[arguments_at:end])!r}"
                found.append(Found(start, end, ParsedCall(named.group(1), None, named.group(2), error), None))
            else:
                end = decoded[1]
                found.append(Found(start, end, decode_arguments(named.group(1), decoded[0], named.group(2)), None))
        else:
            end = _next_marker(text, after)
            found.append(
                Found(
                    start,
                    end,
                    None,
                    f"expected a JSON list of calls after [TOOL_CALLS], got {quote(text[after:end])!r}",
                )
            )
        position = max(end, after)
    return found


def _skip_space(text: str, position: int) -> int:
    match = _SPACE.match(text, position)
    return match.end() if match else position


def _next_marker(text: str, position: int) -> int:
    following = text.find(MISTRAL_MARKER, position)
    return following if following != -1 else len(text)


# -- bare JSON: an object or a list of objects, also Llama-3 {"name", "parameters"} -------------


def find_json(text: str) -> list[Found]:
    """Top-level JSON call objects (or lists of them) anywhere in the text.

    Accepts ``{"name", "arguments"}``, Llama-3's ``{"name", "parameters"}`` (optionally after
    ``<|python_tag|>``, several separated by ``;``) and ``{"type": "function", "function": {...}}``.
    JSON that is not shaped like a call (say, a grid the model quotes) is skipped; a call-shaped
    object that does not decode is reported up to the next call-shaped start.
    """
    found: list[Found] = []
    position = 0
    while len(found) <= MAX_FOUND and (match := _JSON_START.search(text, position)):
        start = match.start()
        canonical = _canonical_call(text, start)
        if canonical is not None:
            found.append(Found(start, canonical[1], canonical[0], None))
            position = canonical[1]
            continue
        decoded = _decode_json(text, start)
        if isinstance(decoded, str):
            first_brace = text.index("{", start)
            if _CALL_START.match(text, first_brace):
                following = _CALL_START.search(text, first_brace + 1)
                end = following.start() if following else len(text)
                found.append(_broken(text[start:end], f"{decoded}, possibly truncated", start, end))
                position = end
            else:  # not a call: resume at the next call-shaped start (keeps long garbage linear)
                following = _CALL_START.search(text, start + 1)
                position = following.start() if following else len(text)
            continue
        value, end = decoded
        calls = calls_from_json(value)
        if calls is not None:
            found.extend(Found(start, end, call, None) for call in calls)
        position = end
    return found

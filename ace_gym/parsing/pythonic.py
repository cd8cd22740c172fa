"""Pythonic tool calls (Llama 3.2 / Llama 4 style): ``[set_slot(row=1, col=2, id="C1"), done()]``.

Parsed with :mod:`ast` and :func:`ast.literal_eval` only; nothing the model writes is evaluated.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from ace_gym.parsing.calls import (
    MAX_FOUND,
    MAX_NAME_LENGTH,
    QUOTE_LIMIT,
    Found,
    ParsedCall,
    opener_limit,
    quote,
    unread,
)

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"

# ASCII classes are faster, and tool names are ASCII identifiers; a bounded name never backtracks far
_LIST_OF_CALLS = re.compile(rf"(?a)\[\s*([A-Za-z_][\w.]{{0,{MAX_NAME_LENGTH}}})\s*\(")
_CLOSING = {"(": ")", "[": "]", "{": "}"}
_PLAIN = re.compile(r"[^][(){}'\"]+")
_STRING = {
    "'": re.compile(r"'[^'\\]*(?:\\.[^'\\]*)*'", re.S),
    '"': re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S),
}
_JSON_NAMES = {"true": True, "false": False, "null": None}
#: characters of one call list; a longer list is reported, not parsed (the tools' arguments are short)
MAX_LIST_LENGTH = 1 << 16
#: brackets, strings and runs of other characters read per text while finding where call lists end
MAX_LIST_TOKENS = 1 << 14


def _list_end(text: str, start: int, tokens_left: list[int]) -> int | str:
    """Index just past the ``]`` matching ``text[start] == "["``, skipping string literals; or why
    there is none. ``tokens_left[0]`` is the token budget of the text, spent here."""
    expected: list[str] = []
    stop = min(len(text), start + MAX_LIST_LENGTH)
    position = start
    while position < stop:
        tokens_left[0] -= 1
        if tokens_left[0] < 0:
            return f"too much bracket and string markup to read (more than {MAX_LIST_TOKENS} pieces)"
        char = text[position]
        if char in _CLOSING:
            expected.append(_CLOSING[char])
            position += 1
        elif char in ")]}":
            wanted = expected.pop()
            if wanted != char:
                return f"brackets do not match ({char!r} where {wanted!r} belongs)"
            position += 1
            if not expected:
                return position
        elif char in _STRING:
            string = _STRING[char].match(text, position, stop)
            if string is None:
                return "unterminated string (possibly truncated)"
            position = string.end()
        else:
            position = _PLAIN.match(text, position, stop).end()  # type: ignore[union-attr]
    if stop < len(text):
        return f"call list longer than {MAX_LIST_LENGTH} characters"
    return "unterminated call list (possibly truncated)"


def _unparsed(node: ast.AST) -> str:
    """A short quotation of ``node``'s source; never raises (a 5,000-digit literal cannot be printed)."""
    try:
        return quote(ast.unparse(node))
    except (ValueError, RecursionError, MemoryError):
        return f"<{type(node).__name__}>"


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    return ast.literal_eval(node)


def _call(node: ast.expr) -> ParsedCall | str:
    """A call node as a ParsedCall, or why it is not one."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
        return f"{_unparsed(node)!r} is not a call like name(key=value)"
    name = _unparsed(node.func)
    if node.args or any(k.arg is None for k in node.keywords):
        return ParsedCall(name, None, error="pass arguments by keyword, e.g. set_slot(row=1, col=2, id='C1')")
    arguments = {}
    for keyword in node.keywords:
        try:
            arguments[keyword.arg] = _literal(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return ParsedCall(
                name, None, error=f"argument {keyword.arg} must be a literal, got {_unparsed(keyword.value)!r}"
            )
    return ParsedCall(name, arguments)


def find_pythonic(text: str) -> list[Found]:
    """Every ``[name(key=value, ...), ...]`` list in the text, in order.

    A list is read up to :data:`MAX_LIST_LENGTH` characters, the text up to :data:`MAX_LIST_TOKENS`
    brackets and strings and up to its :data:`~ace_gym.parsing.calls.MAX_OPENERS`-th ``[``; past
    any limit the rest is reported unread.
    """
    found: list[Found] = []
    tokens_left = [MAX_LIST_TOKENS]
    limit = opener_limit(text, "[")
    position = 0
    while len(found) <= MAX_FOUND:
        match = _LIST_OF_CALLS.search(text, position, limit)
        if match is None:
            if limit < len(text):
                found.append(unread(text, limit, "too many '[' in one turn to look for calls"))
            break
        start = match.start()
        end = _list_end(text, start, tokens_left)
        if isinstance(end, str):
            error = f"{end} in {quote(text[start : start + 4 * QUOTE_LIMIT])!r}"
            found.append(Found(start, len(text), ParsedCall(match.group(1), None, error=error), None))
            break
        try:
            tree = ast.parse(text[start:end], mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            problem = getattr(error, "msg", None) or type(error).__name__
            found.append(
                Found(start, end, ParsedCall(match.group(1), None, error=f"not valid Python syntax ({problem})"), None)
            )
            position = end
            continue
        body = tree.body
        for element in body.elts if isinstance(body, ast.List) else [body]:
            call = _call(element)
            found.append(
                Found(start, end, call, None) if isinstance(call, ParsedCall) else Found(start, end, None, call)
            )
        position = end
    return found

"""Pythonic tool calls (Llama 3.2 / Llama 4 style): ``[set_slot(row=1, col=2, id="C1"), done()]``.

Parsed with :mod:`ast` and :func:`ast.literal_eval` only; nothing the model writes is evaluated.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from ace_gym.parsing.calls import MAX_FOUND, Found, ParsedCall, quote

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"

_LIST_OF_CALLS = re.compile(r"\[\s*([A-Za-z_][\w.]*)\s*\(")
_CLOSING = {"(": ")", "[": "]", "{": "}"}
_JSON_NAMES = {"true": True, "false": False, "null": None}


def _list_end(text: str, start: int) -> int | None:
    """Index just past the ``]`` matching ``text[start] == "["``, skipping strings; None if open."""
    expected: list[str] = []
    quote_char = ""
    index = start
    while index < len(text):
        char = text[index]
        if quote_char:
            if char == "\\":
                index += 1
            elif char == quote_char:
                quote_char = ""
        elif char in "'\"":
            quote_char = char
        elif char in _CLOSING:
            expected.append(_CLOSING[char])
        elif char in ")]}":
            if not expected or expected.pop() != char:
                return None
            if not expected:
                return index + 1
        index += 1
    return None


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    return ast.literal_eval(node)


def _call(node: ast.expr) -> ParsedCall | str:
    """A call node as a ParsedCall, or why it is not one."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
        return f"{quote(ast.unparse(node))!r} is not a call like name(key=value)"
    name = ast.unparse(node.func)
    if node.args or any(k.arg is None for k in node.keywords):
        return ParsedCall(name, None, error="pass arguments by keyword, e.g. set_slot(row=1, col=2, id='C1')")
    arguments = {}
    for keyword in node.keywords:
        try:
            arguments[keyword.arg] = _literal(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            value = quote(ast.unparse(keyword.value))
            return ParsedCall(name, None, error=f"argument {keyword.arg} must be a literal, got {value!r}")
    return ParsedCall(name, arguments)


def find_pythonic(text: str) -> list[Found]:
    """Every ``[name(key=value, ...), ...]`` list in the text, in order."""
    found: list[Found] = []
    position = 0
    while len(found) <= MAX_FOUND and (match := _LIST_OF_CALLS.search(text, position)):
        start = match.start()
        end = _list_end(text, start)
        if end is None:
            error = f"unterminated call list (possibly truncated) in {quote(text[start:])!r}"
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

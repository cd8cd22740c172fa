"""The shared hostile corpus: what models and buggy clients send, each item once an exception or an
unencodable string out of some env's or wrapper's ``step()``.

``tests/contracts/test_hostile_actions.py`` runs it (and random actions built from its pieces) through the
ACE envs and their wrapper stacks; ``tests/contracts/test_hostile_registry.py`` runs it through every
registered env id and every exported wrapper. Add a new reproducer here and both pick it up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ace_gym.spaces import ToolCall
from tests.core_helpers import nested_dict, nested_list

MEGABYTE = "x" * 1_000_000
SPECIAL_STRINGS = [
    MEGABYTE,
    "[" * 100_000,  # JSON nesting deep enough to blow the recursion limit
    "[" + "1" * 5000 + "]",  # an integer beyond Python's str->int digit limit
    "1" * 5000,
    "\ud800",  # lone surrogates cannot be encoded to UTF-8
    "a\udfffb",
    "",
    " ",
    "null",
    "NaN",
    "[]",
    '["a", 1]',
    "2.9",
    " 3 ",
    "-1",
    "🦜 ünïcödé ✓",
]
SPECIAL_NUMBERS = [10**5000, -(10**5000), 2**63, -(2**63) - 1, 2**64, math.nan, math.inf, -math.inf, -1, 0, 1, 4, 1e308]


def openai_turn(function: Any, call_id: Any = "c") -> dict[str, Any]:
    """An OpenAI assistant message with one native tool call of ``function``."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


DONE_TEXT = '<tool_call>{"name": "done", "arguments": {}}</tool_call>'
# tool-call actions ({"name", "arguments"} dicts and what stands in their place)
TOOL_CALL_REPRODUCERS: list[Any] = [
    {"name": 5, "arguments": {}},
    {"name": True, "arguments": {}},
    {"name": np.array(["set_slot", "done"]), "arguments": {}},
    {"name": np.array([1, 2]), "arguments": np.array([3, 4])},
    {"name": "set_slot", "arguments": nested_list()},
    {"name": "set_slot", "arguments": {"row": nested_dict()}},
    {"name": "set_slot", "arguments": {"row": 10**5000, "col": 0}},
    {"name": "set_slot", "arguments": '{"row": ' + "9" * 5000 + "}"},
    {"name": "set_slot", "arguments": "[" * 100_000},
    {"name": "x" * 1_000_000, "arguments": {}},
    {"name": "\ud800", "arguments": {}},
    {"name": "set_slot", "arguments": {"\ud800": "\udfff", "row": "\ud800"}},
    {"arguments": {}},
    ToolCall("nope"),
    None,
    "done",
    np.array([1, 2]),
    {"name": "get_current_grid_state", "arguments": {}},
    {"name": "done", "arguments": {}},  # may end the episode: what follows is stepped after the end
]
# assistant turns: model text and OpenAI assistant messages
CHAT_REPRODUCERS: list[Any] = [
    "[set_slot(row=0x" + "f" * 4000 + ", col=1, id='C1')]",
    "[set_slot(row=" + "1" * 5000 + ", col=1, id='C1')]",
    "<tool_call>" + "<function=" * 20_000,
    "<tool_call><function=a>" + "<parameter=" * 20_000 + "</function>",
    '{"y":[{"type":1},' * 5000,
    "[a(" * 5000,
    openai_turn({"name": "set_slot", "arguments": '{"a":' * 100_000 + "1" + "}" * 100_000}),
    openai_turn({"name": "set_slot", "arguments": nested_dict()}),
    openai_turn({"name": np.array([1, 2]), "arguments": "{}"}),
    openai_turn({"name": "set_slot", "arguments": {"row": 10**5000}}),
    # ALB-Puzzle-v0 let these escape (issue 27): a huge integer and deep nesting in native arguments
    openai_turn({"name": "guess", "arguments": {"name": 10**5000}}, call_id="a"),
    openai_turn({"name": "guess", "arguments": nested_dict()}),
    openai_turn({"name": "query_items", "arguments": {"conditions": [{"section": 10**5000}]}}),
    openai_turn({"name": "query_items", "arguments": {"conditions": [{"section": nested_list(), "type": "value"}]}}),
    openai_turn({"name": "query_items", "arguments": {"conditions": nested_list()}}),
    # lone surrogates: raw in the text, escaped in JSON, in a name, an id, prose, reasoning, arguments
    '<tool_call>\n{"name": "x\ud800", "arguments": {',
    '<tool_call>{"name": "x\\ud800", "arguments": {"row": "\\udfff"}}</tool_call>',
    '<think>\ud800</think>a\udfffb <tool_call>{"name": "done\\ud800", "arguments": {}}</tool_call>',
    "[guess(name='\\ud800')] <answer>\ud800</answer>",
    openai_turn({"name": "guess\ud800", "arguments": {"\ud800": "\udfff"}}, call_id="\ud800"),
    openai_turn({"name": "guess", "arguments": '{"name": "\\ud800"}'}),
    {"content": "\ud800", "reasoning_content": "\udfff", "tool_calls": []},
    {"content": "", "tool_calls": np.array([{"function": {"name": "done", "arguments": "{}"}}] * 2)},
    {"content": "", "tool_calls": "done"},
    {"content": nested_list(), "reasoning_content": np.array([1])},
    None,
    5,
    b"<tool_call>",
    np.array(["x", "y"]),
    '<tool_call>{"name": "get_current_grid_state", "arguments": {}}</tool_call>',
    DONE_TEXT,  # may end the episode: what follows is stepped after the end
]
# arguments for every tool an env offers
HOSTILE_ARGUMENTS: list[Any] = [
    None,
    5,
    "[" * 100_000,
    '{"row": ' + "9" * 5000 + "}",
    nested_list(),
    nested_dict(),
    {"row": 10**5000, "col": math.nan, "id": np.array([1, 2])},
    {"conditions": nested_list(), "row": 0, "col": 0},
    {"conditions": [{"field": nested_dict(), "operator": [], "value": math.inf}], "row": "0", "col": 1},
    {"conditions": "[{]", "row": 0, "col": 0},
    {"reason_code": nested_dict(), "explanation": MEGABYTE},
    {"reason_code": "\ud800"},
    {"ids": "[" * 100_000, "field": ["\ud800"], "query": MEGABYTE},
]
# actions of the planning probes (ACE-StepWise-v0, ACE-Holistic-v0): plans and verdicts
PLAN_REPRODUCERS: list[Any] = [
    {"plan": nested_list(), "tool_chain": nested_list()},
    {"plan": "x", "tool_chain": [{"name": np.array([1]), "arguments": nested_dict()}]},
    {
        "plan": "x",
        "tool_chain": [{"name": "set_slot", "arguments": {"row": 10**5000, "col": 0, "id": "step " + "9" * 5000}}],
    },
    {"plan": "x", "tool_chain": [{"name": "set_slot", "parameter_description": MEGABYTE}, "done"]},
    {"status": "REJECT", "reason_code": nested_dict(), "reason": np.array([1])},
    {"status": np.array(["REJECT"])},
    '{"tool_chain": ' + "[" * 100_000,
    [{"tool": "done", "arguments": "[" * 100_000}, nested_dict()],
    [{"tool": nested_list(), "arguments": {}}] * 5,
    {"plan": "\ud800", "tool_chain": [{"name": "done\ud800", "arguments": {}}]},
]


def unencodable_strings(value: Any, where: str = "", depth: int = 0) -> list[str]:
    """Where in ``value`` (an observation or info: strings, mappings and sequences of them) a
    string does not encode as UTF-8; [] when every string does. Stops 50 levels down."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return [f"{where or 'the value'}: {value[:80]!r}"]
        return []
    if depth > 50 or isinstance(value, (bytes, bytearray, np.ndarray)):
        return []
    if isinstance(value, Mapping):
        found = []
        for key, item in value.items():
            found += unencodable_strings(key, f"{where}[key {key!r:.40}]", depth + 1)
            found += unencodable_strings(item, f"{where}[{key!r:.40}]", depth + 1)
        return found
    if isinstance(value, Sequence):
        return [
            problem for i, item in enumerate(value) for problem in unencodable_strings(item, f"{where}[{i}]", depth + 1)
        ]
    return []

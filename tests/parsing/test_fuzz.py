"""Fuzz: no text, however random or truncated, makes parsing or the adapter raise; the fast path for
well-formed Hermes blocks reads exactly what the general path reads."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ace_gym.envs import AceEnv
from ace_gym.parsing import TOOL_FORMATS, formats, parse_turn
from ace_gym.parsing.calls import MAX_FOUND
from ace_gym.wrappers import ChatAdapter
from tests.core_helpers import nested_list

REALISTIC = [
    '<think>C1 fits.</think>\n<tool_call>\n{"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}\n</tool_call>',
    "<tool_call>\n<function=get_slot_id>\n<parameter=row>\n0\n</parameter>\n<parameter=col>\n1\n</parameter>\n</function>\n</tool_call>",
    '<|python_tag|>{"name": "get_slot_id", "parameters": {"row": 0, "col": 1}}; {"name": "done", "parameters": {}}',
    '[TOOL_CALLS][{"name": "get_current_grid_state", "arguments": {}}]',
    '[TOOL_CALLS]set_slot[ARGS]{"row": 1, "col": 2, "id": "C1"}',
    '[get_slot_id(row=0, col=1), query_course_candidate_from_attribute(row=0, col=0, field="price", operator=">=", value=3)]',
    '[{"name": "get_global_check_budget", "arguments": {}}, {"name": "done", "arguments": {}}]',
]
MARKUP = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
        "<function=",
        "<parameter=",
        "</function>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "<|python_tag|>",
        '{"name": ',
        '"arguments": ',
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        '"',
        "'",
        "\\",
        ",",
        "=",
    ]
)
NOISY_TEXT = st.lists(st.one_of(st.text(max_size=12), MARKUP), max_size=40).map("".join)

_ADAPTER = ChatAdapter(AceEnv("course"))


@settings(max_examples=400, deadline=None)
@given(text=NOISY_TEXT, tool_format=st.sampled_from(TOOL_FORMATS))
def test_parse_turn__never_raises_on_random_text(text: str, tool_format: str) -> None:
    turn = parse_turn(text, tool_format)
    assert all(isinstance(c.name, str) for c in turn.calls)
    assert all(isinstance(e, str) for e in turn.errors)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=st.sampled_from(REALISTIC), cut=st.floats(0, 1), noise=st.text(max_size=8))
def test_adapter__truncated_output_always_yields_messages(source: str, cut: float, noise: str) -> None:
    _ADAPTER.reset(seed=0, options={"instance_index": 0})
    text = source[: int(len(source) * cut)] + noise
    replies, _, _, _, info = _ADAPTER.step(text)
    assert replies and _ADAPTER.observation_space.contains(replies)
    assert info["messages"][-len(replies) :] == replies


@settings(max_examples=200, deadline=None)
@given(
    action=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner)
            | st.dictionaries(
                st.sampled_from(["role", "content", "tool_calls", "function", "name", "arguments", "id"]), inner
            )
        ),
        max_leaves=20,
    )
)
def test_adapter__any_json_like_action_yields_messages(action: object) -> None:
    _ADAPTER.reset(seed=0, options={"instance_index": 0})
    replies = _ADAPTER.step(action)[0]
    assert replies and _ADAPTER.observation_space.contains(replies)


HOSTILE_UNITS = st.sampled_from(
    [
        "<tool_call>",
        "<function=",
        "<function=a>",
        "<parameter=",
        "<parameter=x>",
        "<think>",
        "</think>",
        "[TOOL_CALLS]",
        "[TOOL_CALLS]a[ARGS]",
        '{"name": "a", "arguments": ',
        '{"y":[{"type":1},',
        "[a(",
        "[",
        "{",
        "(",
        "'\\'",
        "0x",
        "9",
        "f",
        " ",
        "\n",
    ]
)
REPEATED = st.builds(lambda unit, count: unit * count, HOSTILE_UNITS, st.integers(0, 20_000))
HOSTILE_TEXT = st.lists(st.one_of(REPEATED, NOISY_TEXT, st.sampled_from(REALISTIC)), max_size=5).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@given(text=HOSTILE_TEXT, tool_format=st.sampled_from(TOOL_FORMATS))
def test_parse_turn__never_raises_on_long_repeated_markup(text: str, tool_format: str) -> None:
    turn = parse_turn(text, tool_format)
    assert len(turn.calls) <= MAX_FOUND and all(isinstance(e, str) for e in turn.errors)


# things a buggy client puts in an assistant message: drawn by index (hypothesis never reprs them)
ODD_VALUES = [
    np.array([{"function": {"name": "done", "arguments": "{}"}}] * 2),
    np.array([1, 2]),
    nested_list(),
    "[" * 100_000,
    '{"a":' * 100_000,
    "1" * 5000,
    10**5000,
    {"name": "done"},
    ("done",),
    None,
    0,
]
odd_values = st.integers(0, len(ODD_VALUES) - 1).map(ODD_VALUES.__getitem__)
tool_call_items = st.one_of(
    odd_values,
    st.builds(
        lambda name, arguments: {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}},
        st.one_of(st.sampled_from(["done", "set_slot"]), odd_values),
        odd_values,
    ),
)
messages = st.fixed_dictionaries(
    {"role": st.just("assistant")},
    optional={
        "content": st.one_of(st.text(max_size=20), odd_values),
        "tool_calls": st.one_of(odd_values, st.lists(tool_call_items, max_size=3)),
        "reasoning_content": odd_values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=messages)
def test_adapter__any_assistant_message_yields_messages(message: dict) -> None:
    _ADAPTER.reset(seed=0, options={"instance_index": 0})
    replies = _ADAPTER.step(message)[0]
    assert replies and _ADAPTER.observation_space.contains(replies)


ARGUMENT_VALUES = st.one_of(
    st.integers(-5, 99),
    st.booleans(),
    st.none(),
    st.sampled_from(["C1", ">=", "<=", "}", "{", '"', "\\", "<tool_call>", "</tool_call>", "é", "\n"]),
    st.lists(st.integers(0, 9), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 9), max_size=2),
)
CALL_BLOCKS = st.builds(
    lambda name, arguments, key, layout: layout.format(name=json.dumps(name), key=key, arguments=json.dumps(arguments)),
    st.sampled_from(["get_slot_id", "set_slot", "a<b", "done"]),
    st.dictionaries(st.sampled_from(["row", "col", "id", "field", "value"]), ARGUMENT_VALUES, max_size=4),
    st.sampled_from(["arguments", "parameters"]),
    st.sampled_from(
        [
            '<tool_call>\n{{"name": {name}, "{key}": {arguments}}}\n</tool_call>',
            '<tool_call>{{"name":{name},"{key}":{arguments}}}</tool_call>',
            '<tool_call> {{ "name" : {name} , "{key}" : {arguments} }} \n</tool_call>',
            '<tool_call>\n{{"name": {name}, "{key}": {arguments}, "id": "c1"}}\n</tool_call>',
            '<tool_call>\n{{"{key}": {arguments}, "name": {name}}}\n</tool_call>',
            '<tool_call>\n{{"name": {name}, "{key}": {arguments}}} trailing\n</tool_call>',
            '<tool_call>\n{{"name": {name}, "{key}": {arguments}}}',
        ]
    ),
)
HERMES_TEXT = st.lists(st.one_of(CALL_BLOCKS, NOISY_TEXT, st.sampled_from(["\n", " ", "Checking.\n"])), max_size=6)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=HERMES_TEXT, cut=st.integers(0, 12))
def test_find_tagged__the_simple_block_path_reads_what_the_general_path_reads(
    pieces: list[str], cut: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(pieces)
    text = text[: len(text) - cut] if cut else text  # truncated output too
    fast = formats.find_tagged(text)
    with monkeypatch.context() as patched:
        patched.setattr(formats, "_simple_block", lambda text, start: None)
        assert formats.find_tagged(text) == fast

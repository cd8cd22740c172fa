"""Tool-call parsing: every format, in the shapes real models produce."""

from __future__ import annotations

import json

import pytest

from ace_gym.parsing import TOOL_FORMATS, ParsedCall, ParsedTurn, formats, parse_text, parse_turn, split_reasoning
from ace_gym.parsing.calls import MAX_FOUND
from ace_gym.parsing.formats import MAX_JSON_VALUES, DecodeBudget, find_json
from ace_gym.parsing.reasoning import MAX_THINK_BLOCKS

SET = {"row": 1, "col": 2, "id": "C1"}


def _calls(turn) -> list[tuple[str, object]]:
    return [(c.name, c.arguments) for c in turn.calls]


# -- Hermes / Qwen2.5 ------------------------------------------------------------------------


def test_hermes__thinking_prose_and_two_calls_over_several_lines() -> None:
    text = (
        "<think>\nSlot (1, 2) is hidden; C1 passes its rules.\n</think>\n\nI'll fill it and check.\n"
        '<tool_call>\n{"name": "set_slot",\n "arguments": {"row": 1, "col": 2,\n   "id": "C1"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "check_course_slot_constraints", "arguments": {"row": 1, "col": 2}}\n</tool_call>'
    )
    turn = parse_turn(text)
    assert _calls(turn) == [("set_slot", SET), ("check_course_slot_constraints", {"row": 1, "col": 2})]
    assert turn.reasoning == "Slot (1, 2) is hidden; C1 passes its rules."
    assert turn.content == "I'll fill it and check."
    assert turn.format == "hermes" and turn.errors == ()


def test_hermes__missing_close_tag_and_trailing_garbage_still_parse() -> None:
    text = '<tool_call>\n{"name": "done", "arguments": {}}}\n<|im_end|>'
    assert _calls(parse_turn(text, "hermes")) == [("done", {})]


def test_hermes__arguments_given_as_json_string_are_decoded() -> None:
    text = (
        '<tool_call>{"name": "set_slot", "arguments": "{\\"row\\": 1, \\"col\\": 2, \\"id\\": \\"C1\\"}"}</tool_call>'
    )
    assert _calls(parse_turn(text)) == [("set_slot", SET)]


def test_hermes__truncated_json_is_reported_with_the_tool_name() -> None:
    turn = parse_turn('Let me set it.\n<tool_call>\n{"name": "set_slot", "arguments": {"row": 1, "co')
    assert len(turn.calls) == 1
    call = turn.calls[0]
    assert call.name == "set_slot" and call.arguments is None
    assert "invalid JSON" in call.error and "truncated" in call.error
    assert turn.content == "Let me set it."


def test_hermes__unicode_arguments_survive() -> None:
    text = '<tool_call>{"name": "query_meal_candidate_from_attribute", "arguments": {"row": 0, "col": 1, "field": "cuisine", "operator": "in", "value": ["Café", "日本料理"]}}</tool_call>'
    assert parse_turn(text).calls[0].arguments["value"] == ["Café", "日本料理"]


def test_hermes__block_without_a_call_is_an_error_not_a_call() -> None:
    turn = parse_turn("<tool_call>I am not sure what to call</tool_call>")
    assert turn.calls == () and len(turn.errors) == 1 and "<tool_call> must contain" in turn.errors[0]


# -- Qwen3-Coder / Qwen3.5 XML -----------------------------------------------------------------


def test_qwen3_xml__parameters_are_json_decoded_when_possible() -> None:
    text = (
        "Checking the slot first.\n</think>\n\n<tool_call>\n<function=set_slot>\n<parameter=row>\n1\n</parameter>\n"
        "<parameter=col>\n2\n</parameter>\n<parameter=id>\nC1\n</parameter>\n</function>\n</tool_call>\n"
        '<tool_call>\n<function=get_course_item_attributes>\n<parameter=ids>\n["C1", "C2"]\n</parameter>\n'
        "<parameter=field>\nprice\n</parameter>\n</function>\n</tool_call>"
    )
    turn = parse_turn(text)
    assert _calls(turn) == [("set_slot", SET), ("get_course_item_attributes", {"ids": ["C1", "C2"], "field": "price"})]
    assert turn.reasoning == "Checking the slot first." and turn.format == "qwen3_xml" and turn.content == ""


def test_qwen3_xml__unicode_multiline_string_value_is_kept_verbatim() -> None:
    text = "<tool_call><function=get_meal_item_info><parameter=id>\n菜 M7\nsecond line\n</parameter></function></tool_call>"
    assert parse_turn(text, "qwen3_xml").calls[0].arguments == {"id": "菜 M7\nsecond line"}


def test_qwen3_xml__cut_off_call_is_reported_not_run() -> None:
    call = parse_turn("<tool_call>\n<function=set_slot>\n<parameter=row>\n1\n</parameter>\n<param").calls[0]
    assert call.name == "set_slot" and call.arguments is None and "truncated" in call.error


# -- Llama 3 JSON and bare JSON ----------------------------------------------------------------


def test_llama3_json__python_tag_and_semicolon_separated_calls() -> None:
    text = (
        '<|python_tag|>{"name": "get_slot_id", "parameters": {"row": 0, "col": 1}}; {"name": "done", "parameters": {}}'
    )
    turn = parse_turn(text)
    assert _calls(turn) == [("get_slot_id", {"row": 0, "col": 1}), ("done", {})]
    assert turn.format == "llama3_json" and turn.content == ""


def test_json__array_of_calls_amid_prose() -> None:
    text = 'Here you go:\n[{"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}, {"name": "done", "arguments": {}}]\nThanks!'
    turn = parse_turn(text, "json")
    assert _calls(turn) == [("set_slot", SET), ("done", {})]
    assert turn.content == "Here you go:\n\nThanks!"


def test_json__data_objects_in_prose_are_not_calls() -> None:
    text = 'The grid is {"slots": [["C1", null]]} and {"name": "Alice", "age": 3} is a worker.'
    turn = parse_turn(text)
    assert turn.calls == () and turn.errors == ()


def test_json__openai_function_wrapper_is_accepted() -> None:
    text = '{"type": "function", "function": {"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}}'
    assert _calls(parse_turn(text)) == [("set_slot", SET)]


def test_json__malformed_call_is_reported_and_the_next_call_still_runs() -> None:
    text = '{"name": "set_slot", "arguments": {"row": 1,, "col": 2}}\n{"name": "done", "arguments": {}}'
    turn = parse_turn(text)
    assert [c.name for c in turn.calls] == ["set_slot", "done"]
    assert turn.calls[0].error is not None and turn.calls[1].error is None


# -- Mistral -------------------------------------------------------------------------------------


def test_mistral__json_list_after_marker() -> None:
    text = '[TOOL_CALLS][{"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}, {"name": "done", "arguments": {}}]</s>'
    turn = parse_turn(text)
    assert _calls(turn) == [("set_slot", SET), ("done", {})] and turn.format == "mistral"
    assert turn.content == "</s>"


def test_mistral__name_args_form_with_call_ids() -> None:
    text = '[TOOL_CALLS]set_slot[CALL_ID]a1b2c3d4e[ARGS]{"row": 1, "col": 2, "id": "C1"}[TOOL_CALLS]done[ARGS]{}'
    turn = parse_turn(text, "mistral")
    assert _calls(turn) == [("set_slot", SET), ("done", {})]
    assert turn.calls[0].call_id == "a1b2c3d4e"


def test_mistral__truncated_payload_is_reported() -> None:
    call = parse_turn('[TOOL_CALLS][{"name": "set_slot", "arguments": {"row": 1').calls[0]
    assert call.name == "set_slot" and call.error is not None


# -- pythonic ------------------------------------------------------------------------------------


def test_pythonic__several_calls_with_prose_and_unicode() -> None:
    text = 'Sure. [set_slot(row=1, col=2, id="C1"), get_travel_item_info(id="Zürich-1"), done()] That is all.'
    turn = parse_turn(text)
    assert _calls(turn) == [("set_slot", SET), ("get_travel_item_info", {"id": "Zürich-1"}), ("done", {})]
    assert turn.format == "pythonic" and turn.content == "Sure.  That is all."


def test_pythonic__json_literals_and_nested_values() -> None:
    text = '<|python_start|>[query_course_candidate_from_attribute(row=0, col=0, field="name", operator="not_in", value=["a]", "b"]), set_slot(row=0, col=0, id=null)]<|python_end|>'
    turn = parse_turn(text)
    assert turn.calls[0].arguments["value"] == ["a]", "b"]
    assert turn.calls[1].arguments == {"row": 0, "col": 0, "id": None}
    assert turn.content == ""


def test_pythonic__code_is_never_evaluated() -> None:
    turn = parse_turn('[set_slot(row=__import__("os").getpid(), col=2)]')
    assert turn.calls[0].error is not None and "literal" in turn.calls[0].error


def test_pythonic__positional_arguments_are_reported() -> None:
    assert "keyword" in parse_turn("[set_slot(1, 2)]").calls[0].error


# -- OpenAI messages -------------------------------------------------------------------------------


def test_openai__tool_calls_with_string_and_dict_arguments_keep_their_ids() -> None:
    message = {
        "role": "assistant",
        "content": "Filling it.",
        "reasoning_content": "The truth must be C1.",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "set_slot", "arguments": '{"row": 1, "col": 2, "id": "C1"}'},
            },
            {"id": "call_b", "type": "function", "function": {"name": "done", "arguments": {}}},
        ],
    }
    turn = parse_turn(message)
    assert _calls(turn) == [("set_slot", SET), ("done", {})]
    assert [c.call_id for c in turn.calls] == ["call_a", "call_b"]
    assert turn.reasoning == "The truth must be C1." and turn.content == "Filling it." and turn.format == "openai"


def test_openai__bad_argument_string_is_a_call_error() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "x", "function": {"name": "set_slot", "arguments": '{"row": 1'}}],
    }
    call = parse_turn(message).calls[0]
    assert call == ParsedCall("set_slot", None, "x", call.error) and "not valid JSON" in call.error


def test_openai__message_without_tool_calls_falls_back_to_its_text() -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": '<tool_call>{"name": "done", "arguments": {}}</tool_call>'}],
    }
    assert _calls(parse_turn(message)) == [("done", {})]


# -- reasoning, fixed formats, non-text actions ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reasoning", "rest"),
    [
        ("plain", None, "plain"),
        ("<think>a</think>b", "a", "b"),
        ("a</think>b", "a", "b"),
        ("x<think>a</think>y<think>b</think>z", "a\n\nb", "xyz"),
        ("x<think>never closed", "never closed", "x"),
    ],
)
def test_split_reasoning__handles_every_think_shape(text: str, reasoning: str | None, rest: str) -> None:
    assert split_reasoning(text) == (reasoning, rest)


def test_calls_inside_reasoning__are_not_calls() -> None:
    turn = parse_turn('<think>maybe <tool_call>{"name": "done", "arguments": {}}</tool_call>?</think>No.')
    assert turn.calls == () and turn.content == "No."


def test_fixed_format__ignores_other_formats() -> None:
    text = '[set_slot(row=1, col=2, id="C1")]'
    assert parse_text(text, "hermes").calls == ()
    assert _calls(parse_text(text, "pythonic")) == [("set_slot", SET)]
    assert parse_text('<tool_call>{"name": "done", "arguments": {}}</tool_call>', "qwen3_xml").errors


def test_duplicate_calls__are_all_kept_in_order() -> None:
    block = '<tool_call>{"name": "get_current_grid_state", "arguments": {}}</tool_call>'
    assert len(parse_turn(block * 3).calls) == 3


@pytest.mark.parametrize("action", [None, 3, b"bytes", ["list"], 2.5])
def test_non_text_action__is_reported_not_raised(action: object) -> None:
    turn = parse_turn(action)
    assert turn.calls == () and "must be text or an assistant message" in turn.errors[0]


def test_tool_formats__lists_auto_and_every_format() -> None:
    assert set(TOOL_FORMATS) == {"auto", "hermes", "qwen3_xml", "llama3_json", "json", "mistral", "pythonic", "openai"}


def test_many_calls__are_capped_and_the_cap_is_reported() -> None:
    turn = parse_turn('<tool_call>{"name": "done", "arguments": {}}</tool_call>' * (MAX_FOUND + 20))
    assert len(turn.calls) == MAX_FOUND
    assert f"more than {MAX_FOUND} tool calls" in turn.errors[-1]


@pytest.mark.parametrize("unit", ['{"a": ', '{"name": "x", "arguments": ', "[a(b=[", "[{", "<tool_call><function=x>"])
def test_deeply_nested_or_repeated_garbage__is_reported_not_raised(unit: str) -> None:
    turn = parse_turn(unit * 20000)
    assert len(turn.calls) + len(turn.errors) <= MAX_FOUND + 1


def test_canonical_layout__keeps_the_argument_text_verbatim_and_other_layouts_agree() -> None:
    written = '{"row": 1,\n   "col": 2, "id": "C1"}'
    canonical = parse_turn(f'<tool_call>\n{{"name": "set_slot", "arguments": {written}}}\n</tool_call>').calls[0]
    reordered = parse_turn(f'<tool_call>\n{{"arguments": {written}, "name": "set_slot"}}\n</tool_call>').calls[0]
    assert canonical.arguments_json == written and reordered.arguments_json is None
    assert canonical.arguments == reordered.arguments == SET
    assert parse_turn(f'{{"name": "set_slot", "parameters": {written}}}').calls[0].arguments_json == written


# -- pathological text: every parser reads it in bounded, linear work -------------------------------

MEGABYTE = 1 << 20


def _fill(prefix: str, unit: str, suffix: str = "", size: int = MEGABYTE) -> str:
    return (prefix + unit * (size // len(unit) + 1))[: size - len(suffix)] + suffix


def _errors(turn: ParsedTurn) -> list[str]:
    return [*turn.errors, *(c.error for c in turn.calls if c.error)]


# (format, text, a phrase the turn's errors must contain, or None when the turn reads cleanly)
PATHOLOGICAL = [
    ("qwen3_xml", _fill("<tool_call>", "<function="), "empty <function=...> block"),
    ("qwen3_xml", _fill("<tool_call><function=a>", "<parameter=x>", "</function>"), "more than 64 <parameter=...>"),
    ("qwen3_xml", _fill("<tool_call><function=", "a"), "empty <function=...> block"),
    ("hermes", _fill("", "<tool_call>"), f"more than {MAX_FOUND} tool calls"),
    ("hermes", _fill('<tool_call>{"name": "a", "arguments": {"k": [', "1,"), "longer than 65536 characters"),
    ("hermes", _fill('<tool_call>{"name": "set_slot", "arguments": {"row": ', "1"), "invalid JSON"),
    ("json", _fill("", "{"), "the text from"),
    ("json", _fill("", '{"y":[{"type":1},'), "too much malformed JSON"),
    ("json", _fill("", '{"name": "a", "arguments": '), "too much malformed JSON"),
    ("json", _fill("", "{}"), "too many JSON values"),
    ("mistral", _fill("[TOOL_CALLS]", "a"), "expected a JSON list of calls"),
    ("mistral", _fill("", "[TOOL_CALLS]a[ARGS]"), f"more than {MAX_FOUND} tool calls"),
    ("pythonic", _fill("", "["), "too many '['"),
    ("pythonic", _fill("[a(", "("), "too much bracket and string markup"),
    ("pythonic", _fill("[a(x=0x", "f", ")]"), "call list longer than 65536 characters"),
    ("pythonic", _fill("[a(x='", "\\'"), "unterminated string"),
    ("pythonic", _fill("", "[done()] "), f"more than {MAX_FOUND} tool calls"),
]


@pytest.mark.parametrize(
    ("tool_format", "text", "phrase"), PATHOLOGICAL, ids=[f"{f}-{t[:24]!r}" for f, t, _ in PATHOLOGICAL]
)
def test_pathological_megabyte__is_read_with_a_bounded_answer(tool_format: str, text: str, phrase: str) -> None:
    for turn in (parse_turn(text, tool_format), parse_turn(text)):
        assert len(turn.calls) <= MAX_FOUND and any(phrase in e for e in _errors(turn)), _errors(turn)[-3:]


def test_think_blocks__past_the_limit_stay_in_the_text() -> None:
    text = "<think>a</think>" * (MAX_THINK_BLOCKS + 1) + '<tool_call>{"name": "done", "arguments": {}}</tool_call>'
    reasoning, rest = split_reasoning(text)
    assert reasoning == "\n\n".join(["a"] * MAX_THINK_BLOCKS) and rest.startswith("<think>a")
    assert _calls(parse_turn(text)) == [("done", {})]


class _CountingDecoder:
    def __init__(self) -> None:
        self.read = 0

    def raw_decode(self, text: str, index: int = 0) -> tuple[object, int]:
        self.read += len(text) - index
        return json.JSONDecoder().raw_decode(text, index)


@pytest.mark.parametrize(
    "unit", ['{"y":[{"type":1},', '{"name": "a", "arguments": ', '{"name":"a","arguments":{"k":[1,', "{"]
)
def test_json_decoding__reads_about_half_the_text(unit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    decoder = _CountingDecoder()
    monkeypatch.setattr(formats, "_DECODER", decoder)
    text = _fill("", unit)
    find_json(text)
    # the budget, plus the first window of each value tried (charged only for what was read)
    assert decoder.read <= DecodeBudget(len(text)).chars + MAX_JSON_VALUES * 1024


def test_hex_literal_beyond_the_digit_limit__is_read_as_the_integer_it_is() -> None:
    call = parse_turn("[set_slot(row=0x" + "f" * 4000 + ", col=1, id='C1')]").calls[0]
    assert call.arguments["row"] == 16**4000 - 1 and call.error is None


def test_unprintable_literal_in_an_error__is_named_not_printed() -> None:
    turn = parse_turn("[done(), 0x" + "f" * 4000 + "]")
    assert turn.errors == ("'<Constant>' is not a call like name(key=value)",)


SURROGATE_TURNS = [
    '<tool_call>\n{"name": "x\ud800", "arguments": {',
    '<think>\ud800</think>\udfff<tool_call>{"name": "x\\ud800", "arguments": {"a": "\\udfff"}}</tool_call>',
    "[set_slot(row='\\ud800', col=0, id='\ud800')]",
    "<tool_call>\n<function=x\ud800>\n<parameter=row\ud800>\n\ud800\n</parameter>\n</function>\n</tool_call>",
    {
        "content": "\ud800",
        "reasoning_content": "\udfff",
        "tool_calls": [{"id": "\ud800", "function": {"name": "a\ud800"}}],
    },
    {"content": "", "tool_calls": [{"id": "a", "function": {"name": "b", "arguments": '{"\ud800": 1}'}}, {"x": 1}]},
]


@pytest.mark.parametrize("turn", SURROGATE_TURNS)
def test_lone_surrogates__every_string_of_the_parsed_turn_is_valid_utf8(turn: object) -> None:
    parsed = parse_turn(turn)
    strings = [parsed.content, parsed.reasoning or "", *parsed.errors]
    for call in parsed.calls:
        strings += [call.name, call.call_id or "", call.error or "", call.arguments_json or ""]
    for text in strings:
        text.encode("utf-8")
    assert parsed.calls or parsed.errors  # the turn was read, not refused


def test_lone_surrogates__become_the_replacement_character_and_valid_text_is_the_same_turn() -> None:
    assert parse_turn('<tool_call>{"name": "x\\ud800", "arguments": {}}</tool_call>').calls[0].name == "x\ufffd"
    text = '<tool_call>{"name": "done", "arguments": {}}</tool_call> ünïcödé'
    assert parse_turn(text) == parse_text(text)

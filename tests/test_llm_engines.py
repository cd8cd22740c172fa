"""make_engine's policy strings and the conversation conversions the engines share (no model needed)."""

from __future__ import annotations

import json

import pytest

from ace_gym.agents.llm import make_engine
from ace_gym.agents.llm.messages import for_chat_template, for_openai
from ace_gym.errors import ConfigError

CONVERSATION = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "grid"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "thinking",
        "tool_calls": [
            {"id": "call_1_0", "type": "function", "function": {"name": "set_slot", "arguments": '{"row": 1}'}},
            {"id": "call_1_1", "type": "function", "function": {"name": "done", "arguments": "{not json"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1_0", "name": "set_slot", "content": "{}"},
]


@pytest.mark.parametrize("spec", ["solver", "vllm:", "openai:@http://x", "openai:m@", "llama:/models/x", "vlm:/x"])
def test_make_engine__rejects_malformed_specs(spec: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_engine(spec)
    assert caught.value.field == "policy"


def test_make_engine__suggests_the_close_engine_kind() -> None:
    with pytest.raises(ConfigError, match="did you mean 'vllm'"):
        make_engine("vlm:/models/x")


def test_make_engine__openai_spec_splits_model_and_base_url() -> None:
    pytest.importorskip("openai")
    engine = make_engine("openai:tiny-model@http://127.0.0.1:9/v1", max_retries=0)
    try:
        assert engine.model == "tiny-model"
        assert str(engine._client.base_url).rstrip("/") == "http://127.0.0.1:9/v1"
    finally:
        engine.close()


def test_for_chat_template__decodes_json_object_arguments_and_keeps_the_rest() -> None:
    messages = for_chat_template(CONVERSATION)
    calls = messages[2]["tool_calls"]
    assert calls[0]["function"]["arguments"] == {"row": 1}
    assert calls[1]["function"]["arguments"] == "{not json"
    assert messages[2]["reasoning_content"] == "thinking"
    assert CONVERSATION[2]["tool_calls"][0]["function"]["arguments"] == '{"row": 1}'  # input untouched


def test_for_openai__keeps_standard_keys_and_string_arguments() -> None:
    conversation = [
        *CONVERSATION[:2],
        {
            **CONVERSATION[2],
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "set_slot", "arguments": {"row": 2}}}],
        },
    ]
    messages = for_openai(conversation)
    assert "reasoning_content" not in messages[2]
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"row": 2}
    assert messages[:2] == CONVERSATION[:2]


def test_for_openai__drops_an_empty_tool_calls_list() -> None:
    messages = for_openai([{"role": "assistant", "content": "hi", "tool_calls": []}])
    assert messages == [{"role": "assistant", "content": "hi"}]

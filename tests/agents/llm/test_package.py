"""make_engine's policy strings and the conversation conversions the engines share (no model needed)."""

from __future__ import annotations

import json

import pytest

from ace_gym.agents.llm import make_engine
from ace_gym.agents.llm.loading import loaded
from ace_gym.agents.llm.messages import for_chat_template, for_openai
from ace_gym.errors import ConfigError, EngineUnavailableError

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


@pytest.mark.parametrize(
    "spec",
    ["solver", "vllm:", "openai:@http://x", "openai:m@", "llama:/models/x", "vlm:/x", "openai:m@localhost:8000/v1"],
)
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


@pytest.mark.parametrize(
    ("url", "base_url", "warned"),
    [
        ("http://127.0.0.1:9", "http://127.0.0.1:9/v1", True),  # a bare host: every known server serves /v1
        ("http://127.0.0.1:9/", "http://127.0.0.1:9/v1", True),
        ("https://example.org/api/v1", "https://example.org/api/v1", False),  # a path is taken as given
        ("http://127.0.0.1:9/v1beta/openai/", "http://127.0.0.1:9/v1beta/openai", False),
    ],
)
def test_make_engine__an_openai_url_without_a_path_gets_v1_with_a_warning(
    url: str, base_url: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("openai")
    engine = make_engine(f"openai:m@{url}", max_retries=0)
    try:
        assert engine.base_url.rstrip("/") == base_url
    finally:
        engine.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert bool(warnings) == warned
    assert not warned or (f"using {base_url}" in warnings[0] and "/v1/chat/completions" in warnings[0])


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


@pytest.mark.parametrize("tool_calls", ["get_current_grid_state", [None, 5], {"name": "done"}, [{"function": "x"}]])
def test_conversions__a_models_malformed_tool_calls_pass_without_raising(tool_calls: object) -> None:
    """Issue 40: what a model wrote as ``tool_calls`` (a string, ``[null, 5]``) raised AttributeError."""
    message = {"role": "assistant", "content": "hi", "tool_calls": tool_calls}
    (templated,) = for_chat_template([message])
    assert templated == message
    (sent,) = for_openai([message])
    assert sent["content"] == "hi" and sent.get("tool_calls") in (None, tool_calls)


def test_for_openai__drops_an_empty_tool_calls_list() -> None:
    messages = for_openai([{"role": "assistant", "content": "hi", "tool_calls": []}])
    assert messages == [{"role": "assistant", "content": "hi"}]


def _raises(error: Exception) -> None:
    raise error


@pytest.mark.parametrize(
    "error",
    [
        FileNotFoundError(2, "No such file or directory", "/models/x/config.json"),
        OSError("/models/x does not appear to have a file named config.json"),
        ValueError("Unrecognized model in /models/x. Should have a `model_type` key in its config.json."),
        ValueError("Value error, Invalid repository ID or local directory specified: '/models/x'."),
    ],
)
def test_loaded__a_model_that_is_not_there_or_not_readable_is_unavailable_naming_it(error: Exception) -> None:
    with pytest.raises(EngineUnavailableError) as raised:
        loaded("model", "/models/x", lambda: _raises(error))
    assert str(raised.value).startswith(f"model /models/x: cannot load: {type(error).__name__}")
    assert raised.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [
        ValueError(
            "LlamaForCausalLM cannot be instantiated under `dtype=torch.int8` as it's not a floating-point dtype"
        ),
        ValueError("User-specified max_model_len (10000000) is greater than the derived max_model_len (8192)."),
        RuntimeError("Engine core initialization failed. See root cause above."),
    ],
)
def test_loaded__a_configuration_error_propagates_as_it_is(error: Exception) -> None:
    """A bad dtype or an impossible max_model_len is no missing model: never "re-run once it is available"."""
    with pytest.raises(type(error)) as raised:
        loaded("model", "/models/x", lambda: _raises(error))
    assert raised.value is error

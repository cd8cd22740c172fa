"""ChatAdapter: assistant turns in, OpenAI tool messages out, over every domain and format."""

from __future__ import annotations

import json
import pickle
import tracemalloc
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

from ace_gym import ENV_IDS
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.instance import CompiledInstance
from ace_gym.tools import STOP, TOOL_CALL_FAILED
from ace_gym.wrappers import ChatAdapter, StepBudget, ToolFailureInjection
from ace_gym.wrappers.chat_adapter import ARGUMENTS_FAILED, NOT_EXECUTED
from tests.core_helpers import nested_dict
from tests.hostile_corpus import unencodable_strings


def _adapter(domain: str = "course", index: int = 0, **kwargs: Any) -> ChatAdapter:
    env = ChatAdapter(AceEnv(domain), **kwargs)
    env.reset(seed=0, options={"instance_index": index})
    return env


def _truth_calls(compiled: CompiledInstance) -> list[dict[str, Any]]:
    return [{"row": s.row, "col": s.col, "id": compiled.item_ids[int(compiled.truth[s.cell])]} for s in compiled.slots]


def _hermes(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"


WRITERS = {
    "hermes": lambda calls: "\n".join(_hermes(n, a) for n, a in calls),
    "qwen3_xml": lambda calls: "\n".join(
        f"<tool_call>\n<function={n}>\n"
        + "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in a.items())
        + "</function>\n</tool_call>"
        for n, a in calls
    ),
    "llama3_json": lambda calls: (
        "<|python_tag|>" + "; ".join(json.dumps({"name": n, "parameters": a}) for n, a in calls)
    ),
    "mistral": lambda calls: "[TOOL_CALLS]" + json.dumps([{"name": n, "arguments": a} for n, a in calls]),
    "pythonic": lambda calls: (
        "[" + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls) + "]"
    ),
    "json": lambda calls: json.dumps([{"name": n, "arguments": a} for n, a in calls]),
}


def test_reset__returns_system_and_user_messages_with_tools_and_history() -> None:
    core = AceEnv("meal")
    user, core_info = core.reset(options={"instance_index": 4})
    messages, info = ChatAdapter(AceEnv("meal")).reset(options={"instance_index": 4})
    assert messages == [{"role": "system", "content": core_info["system_prompt"]}, {"role": "user", "content": user}]
    assert info["tools"] == core_info["tools"] and info["messages"] == messages and info["turn"] == 0


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize("tool_format", sorted(WRITERS))
def test_one_turn_with_every_set_slot_and_done__solves_the_instance(domain: str, tool_format: str) -> None:
    env = _adapter(domain, index=9, tool_format=tool_format)
    compiled = env.unwrapped.compiled
    calls = [("set_slot", a) for a in _truth_calls(compiled)] + [("done", {})]
    replies, reward, terminated, truncated, info = env.step(
        f"<think>I know the truth.</think>\n{WRITERS[tool_format](calls)}"
    )
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["score"] == 1.0 and info["tool_format"] == tool_format
    assert [m["tool_call_id"] for m in replies] == [f"call_1_{i}" for i in range(len(calls))]
    assert all(m["role"] == "tool" for m in replies) and replies[-1]["content"] == STOP
    assistant = info["messages"][2]
    assert assistant["reasoning_content"] == "I know the truth." and assistant["content"] == ""
    decoded = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in assistant["tool_calls"]]
    assert decoded == calls


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_tool_messages__carry_exactly_the_bare_env_replies(domain: str) -> None:
    env = _adapter(domain, index=20)
    bare = AceEnv(domain)
    bare.reset(options={"instance_index": 20})
    slot = bare.compiled.slots[0]
    calls = [
        ("get_current_grid_state", {}),
        ("get_slot_id", {"row": slot.row, "col": slot.col}),
        ("set_slot", {"row": 9, "col": 9, "id": "nope"}),
        ("get_hidden_slot_query_budget", {"row": slot.row, "col": slot.col}),
    ]
    replies = env.step("Let me look around.\n" + WRITERS["hermes"](calls) + "\nthen decide")[0]
    assert [m["content"] for m in replies] == [bare.step({"name": n, "arguments": a})[0] for n, a in calls]
    assert [m["name"] for m in replies] == [n for n, _ in calls]
    assert env.messages[2]["content"] == "Let me look around.\n\nthen decide"


def test_calls_after_a_successful_done__are_not_executed_but_answered() -> None:
    env = _adapter()
    replies, _, terminated, _, info = env.step(
        WRITERS["hermes"]([("done", {}), ("set_slot", {"row": 0, "col": 0, "id": "X"})])
    )
    assert terminated and [m["content"] for m in replies] == [STOP, NOT_EXECUTED]
    assert info["skipped_calls"] == 1 and len(info["calls"]) == 1


def test_injected_failure_of_done__does_not_stop_the_turn() -> None:
    env = ChatAdapter(ToolFailureInjection(AceEnv("course"), 1.0))
    env.reset(seed=0)
    replies, _, terminated, _, info = env.step(WRITERS["json"]([("done", {}), ("get_global_check_budget", {})]))
    assert not terminated and [m["content"] for m in replies] == [TOOL_CALL_FAILED, TOOL_CALL_FAILED]
    assert info["calls"][-1]["injected_failures"] == 2


def test_duplicate_calls__run_as_many_times_as_written() -> None:
    env = _adapter()
    slot = env.unwrapped.compiled.slots[0]
    query = (
        "query_course_candidate_from_attribute",
        {"row": slot.row, "col": slot.col, "field": "name", "operator": "not_in", "value": []},
    )
    env.step(WRITERS["hermes"]([query, query, query]))
    assert env.unwrapped.state.query_calls[0] == 3


def test_turn_without_a_call__gets_one_corrective_message_and_counts() -> None:
    env = _adapter(tool_format="pythonic")
    replies, reward, terminated, truncated, info = env.step("<think>hmm</think>I am not sure what to do.")
    assert len(replies) == 1 and replies[0]["role"] == "user"
    assert (
        "contains no tool call" in replies[0]["content"]
        and '[set_slot(row=1, col=2, id="C1")]' in replies[0]["content"]
    )
    assert (reward, terminated, truncated, info["turn"]) == (0.0, False, False, 1)
    assert env.step("still nothing")[4]["turn"] == 2


def test_truncated_call__is_answered_and_not_run() -> None:
    env = _adapter()
    replies, *_, info = env.step('<tool_call>{"name": "set_slot", "arguments": {"row": 0, "col": 0, "id": "C1')
    assert replies[0]["name"] == "set_slot" and replies[0]["content"].startswith(ARGUMENTS_FAILED.format(error="")[:30])
    assert info["calls"] == [] and info["parse_errors"]
    assert env.messages[-2]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_unreadable_fragment_beside_a_good_call__gets_a_note_after_the_replies() -> None:
    env = _adapter()
    replies = env.step(_hermes("get_global_check_budget", {}) + "<tool_call>no json here</tool_call>")[0]
    assert [m["role"] for m in replies] == ["tool", "user"]
    assert "could not be read" in replies[1]["content"]


def test_openai_message__keeps_its_call_ids_and_reasoning() -> None:
    env = _adapter()
    message = {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "Budget first.",
        "tool_calls": [
            {"id": "abc", "type": "function", "function": {"name": "get_global_check_budget", "arguments": "{}"}}
        ],
    }
    replies = env.step(message)[0]
    assert replies[0]["tool_call_id"] == "abc"
    assert env.messages[2] == {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "Budget first.",
        "tool_calls": [
            {"id": "abc", "type": "function", "function": {"name": "get_global_check_budget", "arguments": "{}"}}
        ],
    }


SURROGATE_TURNS: list[Any] = [
    '<tool_call>\n{"name": "x\ud800", "arguments": {',  # issue 27: a raw lone surrogate in a tool name
    '<tool_call>{"name": "x\\ud800", "arguments": {"row": "\\udfff"}}</tool_call>',  # escaped in JSON
    '<think>\ud800</think>a\udfffb <tool_call>{"name": "done\\ud800", "arguments": {}}</tool_call>',
    "[set_slot(row='\\ud800', col=0, id='\\udfff')] \ud800",
    "<tool_call>\n<function=x\ud800>\n<parameter=row>\n\ud800\n</parameter>\n</function>\n</tool_call>",
    {
        "content": "\ud800",
        "reasoning_content": "\udfff",
        "tool_calls": [{"id": "\ud800", "function": {"name": "get_slot_id\ud800", "arguments": {"\ud800": "\udfff"}}}],
    },
    {"content": "", "tool_calls": [{"id": "a", "function": {"name": "get_slot_id", "arguments": {"row": "\ud800"}}}]},
    "no call at all \ud800",
]


@pytest.mark.parametrize("turn", SURROGATE_TURNS)
def test_lone_surrogates__every_emitted_string_is_valid_utf8(turn: Any) -> None:
    env = _adapter()
    replies, *_, info = env.step(turn)
    assert unencodable_strings([replies, list(info["messages"]), info]) == []  # the name, the content, ...
    json.dumps(list(info["messages"]), ensure_ascii=False).encode("utf-8")  # the record serialises


def test_lone_surrogate_in_a_tool_name__becomes_the_replacement_character() -> None:
    replies = _adapter().step('<tool_call>\n{"name": "x\ud800", "arguments": {')[0]
    assert replies[0]["name"] == "x\ufffd"


def test_same_seed_and_turns__give_the_same_conversation() -> None:
    env_a = ChatAdapter(ToolFailureInjection(AceEnv("workforce"), 0.3))
    env_b = ChatAdapter(ToolFailureInjection(AceEnv("workforce"), 0.3))
    for env in (env_a, env_b):
        env.reset(seed=42)
        for k in range(6):
            env.step(_hermes("get_slot_id", {"row": k % 5, "col": 1}) * 2)
    assert env_a.messages == env_b.messages
    assert TOOL_CALL_FAILED in {m["content"] for m in env_a.messages}  # the seed did inject failures


def test_bad_tool_format__is_a_config_error() -> None:
    with pytest.raises(ConfigError) as error:
        ChatAdapter(AceEnv("course"), tool_format="xml")
    assert error.value.field == "tool_format"


@pytest.mark.parametrize("stack", ["adapter", "full"])
def test_check_env__passes(stack: str) -> None:
    env: Any = ChatAdapter(AceEnv("shopping"))
    if stack == "full":
        env = StepBudget(ChatAdapter(ToolFailureInjection(AceEnv("shopping"), 0.2)), 8, notice=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_full_stack_over_gym_make__runs_without_warnings(env_id: str) -> None:
    env = StepBudget(ChatAdapter(ToolFailureInjection(gym.make(env_id), 0.1)), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.reset(seed=1)
        env.step(_hermes("get_current_grid_state", {}))
        env.step("no call")
        _, _, terminated, truncated, info = env.step(WRITERS["json"]([("done", {})]))
    assert terminated != truncated and info["turns_left"] == 0 and info["score"] == 0.0


def test_step_before_reset__raises_reset_needed_even_without_calls() -> None:
    with pytest.raises(ResetNeeded):
        ChatAdapter(AceEnv("course")).step("no call at all")


def test_history__carries_the_model_argument_text_when_it_wrote_json() -> None:
    env = _adapter()
    env.step(
        '<tool_call>\n{"name": "get_slot_id", "arguments": {"row":0,  "col":1}}\n</tool_call>\n[get_slot_id(row=0, col=1)]'
    )
    tool_calls = env.messages[2]["tool_calls"]
    assert [c["function"]["arguments"] for c in tool_calls] == ['{"row":0,  "col":1}']
    env.step("[get_slot_id(row=0, col=1)]")
    assert env.messages[-2]["tool_calls"][0]["function"]["arguments"] == '{"row": 0, "col": 1}'


# -- hostile turns: each one gets an observation that explains it --------------------------------


def _openai_call(arguments: Any, name: Any = "set_slot") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "function": {"name": name, "arguments": arguments}}],
    }


def test_hex_literal_beyond_the_digit_limit__is_answered_by_the_env() -> None:
    env = _adapter()
    replies, _, _, _, info = env.step("[set_slot(row=0x" + "f" * 4000 + ", col=1, id='C1')]")
    assert json.loads(replies[0]["content"])["messages"].startswith("Invalid tool arguments, Invalid slot")
    assert env.messages[2]["tool_calls"][0]["function"]["arguments"] == '"<unserialisable dict>"'
    assert info["calls"][0]["tool"] == "set_slot"


def test_openai_arguments_nested_beyond_the_recursion_limit__are_answered() -> None:
    env = _adapter()
    replies = env.step(_openai_call('{"a":' * 100_000 + "1" + "}" * 100_000))[0]
    assert replies[0]["content"].startswith(ARGUMENTS_FAILED.split("{")[0])
    replies = env.step(_openai_call(nested_dict()))[0]  # already decoded, by a client
    assert json.loads(replies[0]["content"])["status"] == "failed"
    assert env.messages[-2]["tool_calls"][0]["function"]["arguments"] == '"<unserialisable dict>"'


@pytest.mark.parametrize("tool_calls", [np.array([{"function": {"name": "done", "arguments": "{}"}}] * 2), "done", 7])
def test_tool_calls_that_are_not_a_list__are_explained(tool_calls: Any) -> None:
    replies = _adapter().step({"role": "assistant", "content": "", "tool_calls": tool_calls})[0]
    assert replies[-1]["role"] == "user" and "tool_calls must be a list of calls" in replies[-1]["content"]


def test_info_messages__view_the_history_without_copying_it() -> None:
    env = _adapter()
    action = "no call in this turn"
    views = [env.step(action)[4]["messages"] for _ in range(3)]
    assert [len(v) for v in views] == [4, 6, 8] and views[0] == env.messages[:4] and views[2] == env.messages
    assert views[1][-1] is env.messages[5] and views[2][4:] == env.messages[4:]
    assert pickle.loads(pickle.dumps(views[2])) == views[2]
    kept = list(views[1])  # a view slices like the list of the messages it stood for
    for part in (
        slice(3, None),
        slice(-2, None),
        slice(1, 4),
        slice(5, 2),
        slice(None, None, 2),
        slice(None, None, -1),
    ):
        assert views[1][part] == kept[part]
    with pytest.raises(TypeError):
        views[2][0] = {}  # type: ignore[index]

    def step_allocation() -> int:
        """Bytes a step allocates at its peak; the least of five (one may grow the history list)."""
        peaks = []
        for _ in range(5):
            tracemalloc.start()
            env.step(action)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        return min(peaks)

    early = step_allocation()
    for _ in range(3000):
        env.step(action)
    assert step_allocation() < early + 4096  # a copy of the 6,000-message history would add 48 KB

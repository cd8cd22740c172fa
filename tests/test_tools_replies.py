"""Typed tool replies: the facts the env reads (ok, episode end, budget charged) come from the tool
layer and agree with the envelope text; the serialisation cache is the tool layer's own."""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any, get_args

import pytest

from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.instance import CompiledInstance, resolve_dataset
from ace_gym.tools import OPERATORS, STOP, Charge, EpisodeState, Operator, ToolConfig, ToolReply, tool_names, toolset
from ace_gym.tools.replies import texts_of, value_json
from tests.core_helpers import H15_INDEX, truth_id


def _calls(compiled: CompiledInstance, domain: str) -> list[tuple[str, Any]]:
    names = tool_names(domain)
    slot = compiled.slots[0]
    cell = {"row": slot.row, "col": slot.col}
    query = {**cell, "field": "name", "operator": "not_in", "value": []}
    return [
        (names["query"], query),
        (names["query"], {**query, "operator": "=="}),  # refused: charges nothing
        (names["global_check"], {}),  # grid not full: refused
        *[
            (names["set_slot"], {"row": s.row, "col": s.col, "id": truth_id(compiled, k)})
            for k, s in enumerate(compiled.slots)
        ],
        (names["global_check"], {}),
        (names["slot_check"], cell),
        ("nope", {}),
        (names["set_slot"], "[1, 2]"),
        (names["done"], {}),
    ]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_reply__ok_end_and_charge_agree_with_the_envelope_and_the_counters(domain: str) -> None:
    compiled = resolve_dataset("5x5", domain).compiled(H15_INDEX)
    state = EpisodeState(compiled, ToolConfig(extra_query_num=3, global_check_alpha=1))
    tools = toolset(get_domain(domain))
    for name, arguments in _calls(compiled, domain):
        queries, checks = sum(state.query_calls), state.global_calls
        reply = tools.call(state, name, arguments)
        assert type(reply) is ToolReply
        envelope = json.loads(reply.text)
        assert reply.ok == (envelope["status"] == "success"), reply
        assert reply.ends_episode == (reply.text == STOP)
        charged = (sum(state.query_calls) - queries, state.global_calls - checks)
        if reply.charged is None:
            assert charged == (0, 0), reply
        elif reply.charged.budget == "query":
            slot = compiled.slots[0]
            assert reply.charged == Charge("query", (slot.row, slot.col)) and charged == (1, 0)
        else:
            assert reply.charged == Charge("global_check") and charged == (0, 1)
    assert reply.ends_episode and reply.ok


def test_operator_enum__comes_from_the_operator_type() -> None:
    assert tuple(OPERATORS) == get_args(Operator)
    for domain in DOMAIN_NAMES:
        query = toolset(get_domain(domain)).tools[tool_names(domain)["query"]]
        operator = query.schema["function"]["parameters"]["properties"]["operator"]
        assert list(operator) == ["type", "description", "enum"]  # the published key order
        assert operator["enum"] == list(get_args(Operator))


def test_texts__one_cache_per_compiled_instance_owned_by_the_tool_layer() -> None:
    dataset = resolve_dataset("5x5", "course")
    fresh = CompiledInstance(dataset[3], dataset.domain)
    first, second = EpisodeState(fresh, ToolConfig()), EpisodeState(fresh, ToolConfig())
    assert first.texts is second.texts is texts_of(fresh)
    assert not any("text" in key for key in vars(fresh))  # nothing hides in the instance's __dict__
    instance = weakref.ref(fresh)
    del first, second, fresh
    gc.collect()
    assert instance() is None  # the cache does not keep its instance alive


@pytest.mark.parametrize("value", [0, -7, 2**70, True, False, 3.5, -0.0, "café", 'a "quoted" \\ value', None])
def test_value_json__writes_what_json_dumps_writes(value: object) -> None:
    assert value_json(value) == json.dumps(value, ensure_ascii=False)

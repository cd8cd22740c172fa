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
from ace_gym.tools.replies import SUCCESS_MESSAGE, InstanceTexts, dumps, invalid, ok_reply, texts_of
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


def test_texts__one_cache_per_compiled_instance_kept_in_its_one_store() -> None:
    dataset = resolve_dataset("5x5", "course")
    fresh = CompiledInstance(dataset[3], dataset.domain)
    first, second = EpisodeState(fresh, ToolConfig()), EpisodeState(fresh, ToolConfig())
    assert first.texts is second.texts is texts_of(fresh) is fresh.derived(InstanceTexts)
    assert not any("text" in key for key in vars(fresh))  # nothing hides in the instance's __dict__
    instance = weakref.ref(fresh)
    del first, second, fresh
    gc.collect()
    assert instance() is None  # the cache does not keep its instance alive


@pytest.mark.parametrize("value", [0, -7, 2**70, True, False, 3.5, -0.0, "café", 'a "quoted" \\ value', None])
def test_dumps__writes_what_json_dumps_writes(value: object) -> None:
    assert dumps(value) == json.dumps(value, ensure_ascii=False)


def _cache_probe_calls(compiled: CompiledInstance, domain: str) -> list[tuple[str, Any]]:
    """Queries and attribute lookups whose arguments are equal (or hash alike) but are answered
    differently, each twice, around calls that change the episode's budgets."""
    names, spec = tool_names(domain), get_domain(domain)
    slot = compiled.slots[0]
    cell = {"row": slot.row, "col": slot.col}
    numeric = spec.numeric_attributes[0]
    visible = sorted(compiled.visible_ids)
    values: list[Any] = [1, 1.0, True, "1", "1.0", 0.0, -0.0, float("nan"), 2**70, 10**6]
    queries = [{**cell, "field": numeric, "operator": ">=", "value": v} for v in values]
    queries += [
        {**cell, "field": f" {numeric}", "operator": "<", "value": 5},
        {**cell, "field": "name", "operator": ">=", "value": 1},
        {**cell, "field": numeric, "operator": "==", "value": 1},
        {**cell, "field": numeric, "operator": "in", "value": ["1"]},
        {**cell, "field": numeric, "operator": "<", "value": "abc"},
        {**cell, "field": "nonexistent_field", "operator": "<", "value": 1},
        {**cell, "field": numeric, "operator": "<", "value": None},
    ]
    names_in = [compiled.item_ids[i] for i in slot.candidate_items[:2]]
    for operator in ("in", "not_in"):
        queries += [
            {**cell, "field": "name", "operator": operator, "value": names_in},
            {**cell, "field": "name", "operator": operator, "value": json.dumps(names_in)},
            {**cell, "field": "name", "operator": operator, "value": [names_in[0], ["nested"]]},
        ]
    lookups = [
        {"ids": visible[:2], "field": "name"},
        {"ids": visible[:2], "field": [numeric, "name"]},
        {"ids": json.dumps(visible[:2]), "field": json.dumps([numeric, "name"])},
        {"ids": visible[:6], "field": "name"},  # 6 ids: over the default limit of 5
        {"ids": visible[:2], "field": ["name", numeric, numeric]},
        {"ids": [visible[0], ["x"]], "field": "name"},
        {"ids": visible[:1], "field": [{"a": 1}]},
        {"ids": "not json", "field": "name"},
        {"ids": [1], "field": "name"},
        {"ids": [1.0], "field": "name"},
        {"ids": visible[:1], "field": "nonexistent_field"},
        {"ids": visible[:1], "field": [numeric, "name", "x", "y", "z", "w"]},
    ]
    calls = [(names["query"], q) for q in queries] + [(names["item_attributes"], a) for a in lookups]
    calls.append((names["slot_query_budget"], cell))
    return calls * 2


def _h15_instance(domain: str) -> CompiledInstance:
    """A new compiled instance (its own per-instance store) of the bundled H=15 instance of ``domain``."""
    dataset = resolve_dataset("5x5", domain)
    return CompiledInstance(dataset[H15_INDEX], dataset.domain)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_shared_instance__episodes_on_one_instance_answer_as_a_fresh_instance_does(domain: str) -> None:
    shared, tools = _h15_instance(domain), toolset(get_domain(domain))
    calls = _cache_probe_calls(shared, domain)
    configs = [
        ToolConfig(),
        ToolConfig(extra_query_num=0, max_query_ids=2, max_query_fields=1),  # budgets run out, limits tighter
        ToolConfig(extra_query_num=3),
    ]
    for config in configs:  # each episode after the first finds the instance's store filled by the ones before
        episode = EpisodeState(shared, config)
        fresh = EpisodeState(_h15_instance(domain), config)
        for name, arguments in calls:
            expected = tools.call(fresh, name, arguments)
            assert tools.call(episode, name, arguments) == expected, (config, name, arguments)
            fresh = EpisodeState(_h15_instance(domain), config)
            for s, count in enumerate(episode.query_calls):  # the fresh instance, at the episode's counters
                fresh.query_calls[s] = count


def _state_probe_calls(compiled: CompiledInstance, domain: str) -> list[tuple[str, Any]]:
    """Calls of the tools whose replies show a few numbers of the state (a cell's item, a budget's
    count, a check's verdict), around calls that change those numbers."""
    names = tool_names(domain)
    slot = compiled.slots[0]
    cell = {"row": slot.row, "col": slot.col}
    truth = truth_id(compiled, 0)
    wrong = next(compiled.item_ids[i] for i in slot.candidate_items if i not in slot.valid_items)
    visible = next(c for c in range(compiled.n_cells) if compiled.cell_slot_list[c] < 0)
    probes = [
        (names["slot_id"], cell),
        (names["slot_check"], cell),
        (names["slot_query_budget"], cell),
        (names["global_check_budget"], {}),
        (names["global_check"], {}),
    ]
    fill = [
        (names["set_slot"], {"row": s.row, "col": s.col, "id": truth_id(compiled, k)})
        for k, s in enumerate(compiled.slots)
    ]
    return [
        *probes,
        (names["set_slot"], {**cell, "id": wrong}),
        *probes,
        (names["query"], {**cell, "field": "name", "operator": "not_in", "value": []}),
        (names["set_slot"], {**cell, "id": truth}),
        *probes,
        *fill,
        *probes,  # a valid grid
        (names["set_slot"], {**cell, "id": wrong}),
        *probes,  # a grid failing the slot rules of the first slot
        (names["slot_id"], {"row": visible // compiled.cols, "col": visible % compiled.cols}),
        (names["set_slot"], {**cell, "id": None}),
        *probes,
    ]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_state_tools__episodes_on_one_instance_answer_as_a_fresh_instance_does(domain: str) -> None:
    shared, tools = _h15_instance(domain), toolset(get_domain(domain))
    calls = _state_probe_calls(shared, domain)
    limited = ToolConfig(extra_query_num=0, global_check_alpha=0.2, check_include_reason=True)  # budgets run out
    configs = [ToolConfig(), limited, ToolConfig(global_check_alpha=1, check_include_reason=True)]
    for config in configs * 2:  # the second round plays on the instance the first played on
        episode, fresh = EpisodeState(shared, config), EpisodeState(_h15_instance(domain), config)
        for name, arguments in calls:
            expected = tools.call(fresh, name, arguments)
            assert tools.call(episode, name, arguments) == expected, (config, name, arguments)


def test_tool_reply__keeps_the_values_its_text_encodes() -> None:
    data = {"row": 0, "col": 1, "id": "café", "items": [1.5, None]}
    reply = ok_reply(data)
    assert reply.envelope == {"status": "success", "messages": SUCCESS_MESSAGE, "data": data}
    assert reply.data is data  # the value itself, never the text read back
    assert json.loads(reply.text) == reply.envelope
    refused = invalid("x")
    assert (refused.ok, refused.data, json.loads(refused.text)) == (False, {}, refused.envelope)
    assert ToolReply("cut short {", ok=False).data == {}


@pytest.mark.parametrize("domain", ["course", "travel"])
def test_tools__every_call_builds_its_own_reply_values(domain: str) -> None:
    """No reply is kept and handed out again: a consumer that changes a reply's values changes no
    later reply."""
    compiled, tools = _h15_instance(domain), toolset(get_domain(domain))
    state = EpisodeState(compiled, ToolConfig())
    for name, arguments in _state_probe_calls(compiled, domain) + _cache_probe_calls(compiled, domain):
        first = tools.call(state, name, arguments)
        if first.ok and first.data:
            again = tools.call(state, name, arguments)
            assert again.envelope is not first.envelope and again.data is not first.data, (name, arguments)

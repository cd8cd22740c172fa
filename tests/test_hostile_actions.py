"""A bad model output never escapes ``step()``: every action gets a JSON envelope and the env keeps working."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ace_gym.constraints import aggregate
from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv
from ace_gym.spaces import ToolCall
from ace_gym.tools import toolset
from tests.core_helpers import H15_INDEX, truth_id

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


def _special_number(index: int) -> Any:
    return SPECIAL_NUMBERS[index]


def _special_string(index: int) -> str:
    return SPECIAL_STRINGS[index]


# drawn by index so that hypothesis never has to repr a 1 MB string or a 5000-digit integer
special_numbers = st.integers(0, len(SPECIAL_NUMBERS) - 1).map(_special_number)
special_strings = st.integers(0, len(SPECIAL_STRINGS) - 1).map(_special_string)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10, max_value=10),
    st.integers(),
    special_numbers,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=8),
    special_strings,
    st.sampled_from([">", ">=", "=", "<", "<=", "in", "not_in", "name", "price", "category"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)


def _argument_dicts(parameters: tuple[str, ...]) -> st.SearchStrategy[dict[Any, Any]]:
    keys = (
        st.one_of(st.sampled_from((*parameters, "kwargs")), st.text(max_size=6)) if parameters else st.text(max_size=6)
    )
    return st.dictionaries(keys, values, max_size=len(parameters) + 2)


def _json_text(arguments: dict[Any, Any], truncate: bool = False) -> str:
    """``arguments`` as JSON text; a huge integer becomes a 5000-digit JSON number."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, default=repr)
    except ValueError:
        text = '{"row": ' + "9" * 5000 + ', "col": 0}'
    return text[:-1] if truncate else text


def _arguments(parameters: tuple[str, ...]) -> st.SearchStrategy[Any]:
    dicts = _argument_dicts(parameters)
    return st.one_of(
        dicts,
        dicts.map(_json_text),  # JSON objects
        dicts.map(lambda d: _json_text(d, truncate=True)),  # truncated JSON
        special_strings,
        st.text(max_size=30),
        values,  # lists, numbers, None ... where an object belongs
    )


def _actions(tool_name: str, parameters: tuple[str, ...]) -> st.SearchStrategy[Any]:
    arguments = _arguments(parameters)
    return st.one_of(
        st.builds(lambda a: {"name": tool_name, "arguments": a}, arguments),
        st.builds(lambda a: ToolCall(tool_name, a), arguments),
        st.builds(lambda n, a: {"name": n, "arguments": a}, values, arguments),
        st.builds(lambda a: {"arguments": a}, arguments),  # no name
        values,  # not a tool call at all
    )


def _assert_envelope(observation: Any) -> dict[str, Any]:
    assert isinstance(observation, str)
    envelope = json.loads(observation)
    assert observation == json.dumps(envelope, ensure_ascii=False)  # hand-built JSON matches json.dumps
    observation.encode("utf-8")  # valid text for any tokenizer: no lone surrogate echoed back
    assert list(envelope) == ["status", "messages", "data"]
    assert envelope["status"] in ("success", "failed")
    assert isinstance(envelope["messages"], str) and isinstance(envelope["data"], dict)
    if envelope["status"] == "failed":
        assert envelope["data"] == {}
    return envelope


def _assert_state_consistent(env: AceEnv) -> None:
    """The grid holds only candidates in hidden cells, visible cells are untouched, totals are current."""
    state, compiled = env.state, env.compiled
    grid = np.asarray(state.grid, dtype=np.int32)
    for cell, item in enumerate(state.grid):
        s = compiled.cell_slot_list[cell]
        if s < 0:
            assert item == compiled.initial_grid[cell]
        else:
            assert item == -1 or item in compiled.slots[s].candidate_items
    assert state.empty_cells == int((grid < 0).sum())
    for k, rule in enumerate(compiled.global_rules):
        assert state.totals.value(k) == aggregate(rule, grid, compiled.cols)


TOOL_CASES = [(domain, name) for domain in DOMAIN_NAMES for name in toolset(get_domain(domain)).names]
HOSTILE_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@pytest.mark.parametrize(("domain", "tool_name"), TOOL_CASES, ids=[f"{d}-{t}" for d, t in TOOL_CASES])
def test_hostile_actions__always_get_an_envelope_and_the_env_keeps_working(domain: str, tool_name: str) -> None:
    env = AceEnv(domain, extra_query_num=1, global_check_alpha=1, max_steps=10**9)
    env.reset(options={"instance_index": H15_INDEX})
    parameters = env.tools.tools[tool_name].parameters
    slot = env.compiled.slots[0]
    valid = {"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": truth_id(env.compiled, 0)}}

    @HOSTILE_SETTINGS
    @given(action=_actions(tool_name, parameters))
    def run(action: Any) -> None:
        observation, reward, terminated, _truncated, info = env.step(action)
        envelope = _assert_envelope(observation)
        assert isinstance(reward, float) and isinstance(info, dict)
        if not isinstance(action, (dict, ToolCall)) or "name" not in getattr(action, "__dict__", action):
            assert envelope["status"] == "failed"
        if terminated:  # a hostile "done" may end the episode: start again
            env.reset(options={"instance_index": H15_INDEX})
        _assert_state_consistent(env)
        assert json.loads(env.step(valid)[0])["status"] == "success"

    run()


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_hostile_actions__non_object_arguments_and_unknown_names_fail(domain: str) -> None:
    env = AceEnv(domain)
    env.reset(options={"instance_index": H15_INDEX})
    for arguments in ("[1, 2]", "null", "NaN", '"text"', "{bad json", [1, 2], 5, {1, 2}):
        envelope = _assert_envelope(env.step({"name": "get_slot_id", "arguments": arguments})[0])
        assert envelope["status"] == "failed" and envelope["messages"].startswith("Invalid tool arguments, ")
    for name in (5, ["set_slot"], {"a": 1}, "x" * 1_000_000, "\ud800"):
        envelope = _assert_envelope(env.step({"name": name, "arguments": {}})[0])
        assert envelope["status"] == "failed" and envelope["messages"].startswith("Unknown tool, ")
        assert len(envelope["messages"]) < 400  # echoes are clipped
    for action in (None, 5, "done", ["done"], {"arguments": {}}, {"name": None}, ToolCall("nope")):
        envelope = _assert_envelope(env.step(action)[0])
        assert envelope["status"] == "failed"


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_hostile_actions__lone_surrogates_are_not_echoed(domain: str) -> None:
    env = AceEnv(domain)
    env.reset(options={"instance_index": H15_INDEX})
    slot = env.compiled.slots[0]
    noun = get_domain(domain).tool_noun
    escaped = '"\\ud800x"'  # a model can write this escape in JSON arguments; it decodes to a lone surrogate
    actions = [
        {"name": json.loads(escaped), "arguments": {}},
        {"name": f"get_{noun}_item_info", "arguments": '{"id": ' + escaped + "}"},
        {"name": f"get_{noun}_item_attributes", "arguments": '{"ids": [' + escaped + '], "field": "name"}'},
        {"name": f"get_{noun}_item_attributes", "arguments": '{"ids": [], "field": [' + escaped + "]}"},
        {
            "name": f"query_{noun}_candidate_from_attribute",
            "arguments": f'{{"row": {slot.row}, "col": {slot.col}, "field": "name", "operator": "in", "value": [{escaped}]}}',
        },
        {
            "name": f"query_{noun}_candidate_from_attribute",
            "arguments": f'{{"row": {slot.row}, "col": {slot.col}, "field": {escaped}, "operator": "in", "value": []}}',
        },
    ]
    for action in actions:
        observation = env.step(action)[0]
        observation.encode("utf-8")
        assert "\ufffdx" in observation, observation

"""A bad model output never escapes ``step()``: every action gets a JSON envelope and the env keeps
working, in the bare env, every wrapper, their stacks and sync/async vector envs. The reproducers are
the shared corpus of ``tests/hostile_corpus.py``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ace_gym.constraints import aggregate
from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv
from ace_gym.envs.procedural import ProceduralAceEnv
from ace_gym.feedback import FeedbackRounds
from ace_gym.feedback.scenario import ScenarioEnv
from ace_gym.planning import BrokenTool, CostAnnotatedTools, ExtraneousTools, Refine, UnsolvableMix
from ace_gym.planning.settings import SETTINGS, apply_settings
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.spaces import ToolCall
from ace_gym.tools import toolset
from ace_gym.wrappers import ChatAdapter, ChatMessages, Curriculum, StepBudget, ToolFailureInjection
from tests.core_helpers import H15_INDEX, truth_id
from tests.hostile_corpus import (
    CHAT_REPRODUCERS,
    HOSTILE_ARGUMENTS,
    PLAN_REPRODUCERS,
    SPECIAL_NUMBERS,
    SPECIAL_STRINGS,
    TOOL_CALL_REPRODUCERS,
)


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


# -- every wrapper, their stacks, and vector envs: 0 escapes -----------------------------------------


def _core() -> AceEnv:
    return AceEnv("course", max_steps=10**6)


def _planning_stack() -> gym.Env:
    """Every planning setting at once, over failure injection (the evaluation's stack)."""
    options = {"unsolvable": {"p_unsolvable": 1.0}, "extraneous": {"behaviour": "misleading"}}
    return apply_settings(ToolFailureInjection(_core(), 0.3), SETTINGS, options)


PLANNING_LAYERS: dict[str, Any] = {
    "ExtraneousTools": lambda: ExtraneousTools(_core(), n=4, behaviour="misleading", penalty=0.1),
    "BrokenTool": lambda: BrokenTool(_core(), hint=True),
    **{
        f"UnsolvableMix({kind})": partial(lambda kind: UnsolvableMix(_core(), 1.0, kinds=[kind]), kind)
        for kind in UNSOLVABLE_KINDS
    },
    "CostAnnotatedTools": lambda: CostAnnotatedTools(_core(), lam=0.1),
    "Refine": lambda: Refine(_core()),
    "every setting": _planning_stack,
}
TOOL_CALL_LAYERS: dict[str, Any] = {
    "ToolFailureInjection": lambda: ToolFailureInjection(_core(), 0.5),
    "StepBudget": lambda: StepBudget(_core(), 9, notice=True),
    "StepBudget(ToolFailureInjection)": lambda: StepBudget(ToolFailureInjection(_core(), 0.5), 9, notice=True),
    **PLANNING_LAYERS,
    "ScenarioEnv": lambda: ScenarioEnv("course", max_steps=10**6, max_attempts=2),
    "FeedbackRounds(ToolFailureInjection)": lambda: FeedbackRounds(
        ToolFailureInjection(_core(), 0.5), max_attempts=3, threshold=1.0, feedback="directive"
    ),
}
CHAT_LAYERS: dict[str, Any] = {
    "ChatAdapter": lambda: ChatAdapter(_core()),
    "ChatAdapter(ToolFailureInjection)": lambda: ChatAdapter(ToolFailureInjection(_core(), 0.5)),
    "StepBudget(ChatAdapter(ToolFailureInjection))": lambda: StepBudget(
        ChatAdapter(ToolFailureInjection(_core(), 0.5)), 9, notice=True
    ),
    "StepBudget(ChatAdapter(every setting))": lambda: StepBudget(ChatAdapter(_planning_stack()), 9, notice=True),
    "FeedbackRounds(StepBudget(ChatAdapter(ToolFailureInjection)))": lambda: FeedbackRounds(
        StepBudget(ChatAdapter(ToolFailureInjection(_core(), 0.5)), 9, notice=True), max_attempts=3, threshold=1.0
    ),
    "StepBudget(ChatAdapter(ScenarioEnv))": lambda: StepBudget(
        ChatAdapter(ScenarioEnv("course", max_steps=10**6)), 9, notice=True
    ),
}
LAYERS = [(name, make, TOOL_CALL_REPRODUCERS) for name, make in TOOL_CALL_LAYERS.items()] + [
    (name, make, CHAT_REPRODUCERS) for name, make in CHAT_LAYERS.items()
]


def _assert_observation(env: gym.Env, observation: Any) -> None:
    if isinstance(env.observation_space, ChatMessages):
        assert observation and env.observation_space.contains(observation)
    else:  # StepBudget's notice, if any, follows the envelope
        _assert_envelope(observation.rsplit("\n\n(", 1)[0] if observation.endswith(" left)") else observation)


def _run_counting_escapes(
    env: gym.Env, actions: list[Any], reset: bool, options: dict[str, Any] | None = None
) -> tuple[list[str], list[dict[str, Any]]]:
    """Step every action (resetting with ``options``, by default the H=15 instance's, after an
    episode ends when ``reset``); the exceptions that escaped ``step()``, and every info returned."""
    options = {"instance_index": H15_INDEX} if options is None else options
    escapes, infos = [], [env.reset(seed=0, options=options)[1]]
    for action in actions:
        try:
            observation, reward, terminated, truncated, info = env.step(action)
            _assert_observation(env, observation)
            assert isinstance(reward, float)
        except Exception as error:  # counted, not raised: the test reports every escape at once
            escapes.append(f"{type(error).__name__}: {str(error)[:120]}")
            continue
        infos.append(info)
        if reset and (terminated or truncated):
            infos.append(env.reset(seed=0, options=options)[1])
    return escapes, infos


NUMERIC = (bool, int, float, np.number)


def _leaves(info: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Info values as vector envs batch them: nested dicts by key, the rest as they are."""
    for key, value in info.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _unstable_keys(infos: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Keys whose values a vector env could not batch in one array: more than one type, or None
    next to a number (the array takes the type of the first value it sees)."""
    kinds: dict[str, set[type]] = {}
    for info in infos:
        for key, value in _leaves(info):
            kinds.setdefault(key, set()).add(type(value))
    return {key: {t.__name__ for t in types} for key, types in kinds.items() if not _batchable(types)}


def _batchable(types: set[type]) -> bool:
    """One type, or one non-numeric type and None (an object array holds both; a number array
    made from a first number value cannot take None)."""
    present = types - {type(None)}
    return len(present) <= 1 and not (present and type(None) in types and issubclass(*present, NUMERIC))


@pytest.mark.parametrize(("make", "actions"), [(m, a) for _, m, a in LAYERS], ids=[n for n, _, _ in LAYERS])
def test_every_layer__reproducers_never_escape_and_info_keeps_one_type_per_key(make: Any, actions: list[Any]) -> None:
    env = make()
    escapes, infos = _run_counting_escapes(env, actions * 2, reset=True)
    more_escapes, more_infos = _run_counting_escapes(env, actions, reset=False)  # past the end, and the budget
    assert escapes + more_escapes == []
    assert _unstable_keys(infos + more_infos) == {}


def _curriculum_stack() -> gym.Env:
    """A curriculum over failure injection on a small procedural grid; window 1, so the level
    moves between episodes."""
    core = ProceduralAceEnv("course", rows=3, cols=4, hidden_slots=[2], decoy_budget=[1], max_steps=10**6)
    chat = StepBudget(ChatAdapter(ToolFailureInjection(core, 0.5)), 9, notice=True)
    return Curriculum(chat, levels=[[2, 1], [3, 0]], window=1)


def test_curriculum_layer__reproducers_never_escape_and_info_keeps_one_type_per_key() -> None:
    env = _curriculum_stack()
    escapes, infos = _run_counting_escapes(env, CHAT_REPRODUCERS * 2, reset=True, options={})
    more_escapes, more_infos = _run_counting_escapes(env, CHAT_REPRODUCERS, reset=False, options={})
    assert escapes + more_escapes == []
    assert _unstable_keys(infos + more_infos) == {}
    assert any("curriculum_outcome" in info for info in infos)


@pytest.mark.parametrize("make", list(PLANNING_LAYERS.values()), ids=list(PLANNING_LAYERS))
def test_planning_layers__every_offered_tool_takes_hostile_arguments(make: Any) -> None:
    env = make()
    _, info = env.reset(seed=0, options={"instance_index": H15_INDEX})
    names = [schema["function"]["name"] for schema in info["tools"]]
    actions = [{"name": name, "arguments": arguments} for name in names for arguments in HOSTILE_ARGUMENTS]
    escapes, infos = _run_counting_escapes(env, actions, reset=True)
    assert escapes == []
    assert _unstable_keys(infos) == {}


@pytest.mark.parametrize("env_id", ["ACE-StepWise-v0", "ACE-Holistic-v0"])
def test_planning_envs__hostile_actions_never_escape(env_id: str) -> None:
    env = gym.make(env_id, disable_env_checker=True).unwrapped
    escapes = []
    for action in [*PLAN_REPRODUCERS, *CHAT_REPRODUCERS, *TOOL_CALL_REPRODUCERS]:
        env.reset(seed=0)
        for _ in range(2):  # the action, then again once the episode may have ended
            try:
                observation, reward, _, _, _ = env.step(action)
                assert ChatMessages().contains(observation) and isinstance(reward, float)
            except Exception as error:  # counted, not raised
                escapes.append(f"{type(error).__name__}: {str(error)[:120]}")
    assert escapes == []


def _chat_actions() -> st.SearchStrategy[Any]:
    reproducer = st.integers(0, len(CHAT_REPRODUCERS) - 1).map(CHAT_REPRODUCERS.__getitem__)
    pieces = st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "<function=", "<parameter=x>", "[a(", "{", '"'])
    text = st.lists(st.one_of(st.text(max_size=10), pieces, special_strings), max_size=8).map("".join)
    call = st.builds(
        lambda n, a: {"name": n, "arguments": a}, st.one_of(st.sampled_from(["done", "set_slot"]), values), values
    )
    message = st.builds(
        lambda c, t: {"content": c, "tool_calls": t},
        st.one_of(text, values),
        st.one_of(values, st.lists(call, max_size=3)),
    )
    return st.one_of(reproducer, text, message, values)


def _tool_call_actions() -> st.SearchStrategy[Any]:
    reproducer = st.integers(0, len(TOOL_CALL_REPRODUCERS) - 1).map(TOOL_CALL_REPRODUCERS.__getitem__)
    tool = get_domain("course").tool_noun
    return st.one_of(reproducer, _actions("set_slot", ("row", "col", "id")), _actions(f"get_{tool}_item_info", ("id",)))


@pytest.mark.parametrize(("make", "actions"), [(m, a) for _, m, a in LAYERS], ids=[n for n, _, _ in LAYERS])
def test_every_layer__random_hostile_actions_never_escape(make: Any, actions: list[Any]) -> None:
    env = make()
    env.reset(seed=0, options={"instance_index": H15_INDEX})
    strategy = _chat_actions() if actions is CHAT_REPRODUCERS else _tool_call_actions()

    @HOSTILE_SETTINGS
    @given(action=strategy)
    def run(action: Any) -> None:
        observation, _, terminated, truncated, _ = env.step(action)
        _assert_observation(env, observation)
        if terminated or truncated:
            env.reset(seed=0, options={"instance_index": H15_INDEX})

    run()


def _close_within(envs: gym.vector.VectorEnv, seconds: float) -> bool:
    closer = threading.Thread(target=envs.close, daemon=True)
    closer.start()
    closer.join(seconds)
    return not closer.is_alive()


VECTOR_WRAPPERS = {
    "bare": [],
    "ChatAdapter": [ChatAdapter],
    "StepBudget(ChatAdapter(ToolFailureInjection))": [
        partial(ToolFailureInjection, rate=0.5),
        ChatAdapter,
        partial(StepBudget, max_turns=9, notice=True),
    ],
    "FeedbackRounds(StepBudget(ChatAdapter(ToolFailureInjection)))": [
        partial(ToolFailureInjection, rate=0.5),
        ChatAdapter,
        partial(StepBudget, max_turns=9, notice=True),
        partial(FeedbackRounds, max_attempts=3, threshold=1.0),
    ],
}


@pytest.mark.parametrize("wrappers", list(VECTOR_WRAPPERS.values()), ids=list(VECTOR_WRAPPERS))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec__hostile_batches_never_escape_and_close_returns(mode: str, wrappers: list[Any]) -> None:
    actions, normal = (
        (TOOL_CALL_REPRODUCERS, {"name": "get_global_check_budget", "arguments": {}})
        if not wrappers
        else (CHAT_REPRODUCERS, "no call")
    )
    envs = gym.make_vec("ACE-course-v0", 2, vectorization_mode=mode, wrappers=wrappers)  # Gymnasium's defaults
    escapes = []
    try:
        envs.reset(seed=0)
        for action in actions:
            for batch in ((action, normal), (normal, action)):  # each env sees it first and second
                try:
                    observations, _, _, _, infos = envs.step(batch)
                except Exception as error:  # counted: the vector env may be unusable afterwards
                    escapes.append(f"{type(error).__name__}: {str(error)[:120]}")
                    break
                assert len(observations) == 2
                for key, values in infos.items():  # what the envs reported under a key batched cleanly
                    if not key.startswith("_") and isinstance(values, np.ndarray) and values.dtype == object:
                        assert _batchable({type(v) for v in values[infos[f"_{key}"]]}), (key, values)
                assert "tool" not in infos or infos["tool"].dtype == object  # names, never numbers
    finally:
        assert _close_within(envs, 60), "close() hung"
    assert escapes == []

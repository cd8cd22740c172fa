"""ToolFailureInjection: the published failure pattern, identity at rate 0, seeded reproducibility."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.scoring import grid_of_ids
from ace_gym.spaces import ToolCall
from ace_gym.tools import STOP, TOOL_CALL_FAILED
from ace_gym.wrappers import FAILURE_ENVELOPES, ToolFailureInjection
from tests.conftest import load_traces, trace_env
from tests.core_helpers import nested_list

TRACES_D = [t for t in load_traces() if t["variant"] == "D"]
SCRIPT = [
    {"name": "get_current_grid_state", "arguments": {}},
    {"name": "get_global_check_budget", "arguments": {}},
    {"name": "get_slot_id", "arguments": {"row": 0, "col": 0}},
    {"name": "set_slot", "arguments": {"row": 9, "col": 9, "id": "X"}},
] * 10


def _trace_env(trace: dict) -> ToolFailureInjection:
    return ToolFailureInjection(trace_env(trace), trace["task_config"]["tool_failure_rate"], rng="python")


def _run(env, seed: int | None, domain: str = "course", instance_index: int = 8) -> list[str]:
    env.reset(seed=seed, options={"instance_index": instance_index})
    return [env.step(action)[0] for action in SCRIPT]


@pytest.mark.parametrize("trace", TRACES_D, ids=[t["instance_id"] for t in TRACES_D])
def test_python_rng__replays_published_variant_d_exactly(trace: dict) -> None:
    env = _trace_env(trace)
    env.reset(seed=trace["task_config"]["rng_seed"], options={"instance_index": trace["instance_index"]})
    injected = 0
    for k, call in enumerate(trace["calls"]):
        observation, _, _, _, info = env.step({"name": call["tool"], "arguments": call["args"]})
        injected += info["failure_injected"]
        if call["exception"] is not None:  # the release raised a TypeError; ace-gym answers with a failed envelope
            assert json.loads(observation)["status"] == "failed", k
        else:
            assert observation == call["content"], f"call {k} {call['tool']}({call['args']})"
    assert injected == sum(c["content"] == TOOL_CALL_FAILED for c in trace["calls"])
    core = env.unwrapped
    assert grid_of_ids(core.compiled, core.state.grid) == trace["final"]["agent_solution"]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize("rng", ["numpy", "python"])
def test_rate_zero__is_an_identity(domain: str, rng: str) -> None:
    bare = AceEnv(domain)
    wrapped = ToolFailureInjection(AceEnv(domain), 0.0, rng=rng)
    assert _run(wrapped, seed=5, instance_index=3) == _run(bare, seed=5, instance_index=3)


@pytest.mark.parametrize("rng", ["numpy", "python"])
def test_same_reset_seed__gives_the_same_failure_pattern(rng: str) -> None:
    env = ToolFailureInjection(AceEnv("meal"), 0.4, rng=rng)
    first = _run(env, seed=7)
    assert first.count(TOOL_CALL_FAILED) > 0
    assert _run(ToolFailureInjection(AceEnv("meal"), 0.4, rng=rng), seed=7) == first
    assert _run(env, seed=7) == first  # re-seeded on reset, not continued
    assert _run(env, seed=8) != first


def test_failure_pattern__does_not_depend_on_the_instance_choice() -> None:
    def pattern(index: int) -> list[bool]:
        env = ToolFailureInjection(AceEnv("travel"), 0.5)
        return [o == TOOL_CALL_FAILED for o in _run(env, seed=11, instance_index=index)]

    assert pattern(0) == pattern(20)


def test_injected_done__does_not_end_the_episode_and_changes_nothing() -> None:
    env = ToolFailureInjection(AceEnv("course"), 1.0)
    env.reset(seed=0, options={"instance_index": 0})
    observation, reward, terminated, truncated, info = env.step({"name": "done", "arguments": {}})
    assert (observation, reward, terminated, truncated) == (TOOL_CALL_FAILED, 0.0, False, False)
    assert info["failure_injected"] and info["failure_mode"] == "failed"
    assert env.unwrapped.step({"name": "done", "arguments": {}})[0] == STOP


def test_injected_failure__charges_no_budget() -> None:
    env = ToolFailureInjection(AceEnv("course", global_check_alpha=1), 1.0)
    env.reset(seed=0, options={"instance_index": 0})
    state = env.unwrapped.state
    grid, global_calls = list(state.grid), state.global_calls
    slot = state.compiled.slots[0]
    env.step({"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": state.compiled.item_ids[0]}})
    env.step({"name": "check_course_global_constraints", "arguments": {}})
    assert state.grid == grid and state.global_calls == global_calls


def test_stats__count_injected_failures_and_same_call_retries() -> None:
    env = ToolFailureInjection(AceEnv("course"), 1.0)
    env.reset(seed=0)
    call = {"name": "get_slot_id", "arguments": {"row": 0, "col": 1}}
    env.step(call)
    info = env.step({"name": "get_slot_id", "arguments": '{"col": 1, "row": 0}'})[4]  # same call, other spelling
    assert (info["injected_failures"], info["retried_failed_calls"]) == (2, 1)
    info = env.step({"name": "get_slot_id", "arguments": {"row": 1, "col": 1}})[4]
    assert (info["injected_failures"], info["retried_failed_calls"]) == (3, 1)
    env.reset(seed=1)
    assert env.step(call)[4]["injected_failures"] == 1


def test_extra_failure_modes__return_timeout_and_empty_envelopes() -> None:
    env = ToolFailureInjection(AceEnv("course"), 1.0, failure_modes=("failed", "timeout", "empty"))
    env.reset(seed=3)
    seen = {env.step({"name": "get_current_grid_state", "arguments": {}})[0] for _ in range(60)}
    assert seen == set(FAILURE_ENVELOPES.values())
    assert json.loads(FAILURE_ENVELOPES["timeout"])["messages"].startswith("Timeout, ")


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("rate", {"rate": 1.5}),
        ("rate", {"rate": True}),
        ("failure_modes", {"rate": 0.1, "failure_modes": ("boom",)}),
        ("rng", {"rate": 0.1, "rng": "global"}),
    ],
)
def test_constructor__rejects_bad_config(field: str, kwargs: dict) -> None:
    with pytest.raises(ConfigError) as error:
        ToolFailureInjection(AceEnv("course"), **kwargs)
    assert error.value.field == field


HOSTILE_CALLS = [
    {"name": "set_slot", "arguments": {"row": nested_list()}},  # RecursionError for json and repr alike
    {"name": "set_slot", "arguments": nested_list()},
    {"name": "set_slot", "arguments": {"row": 10**5000, "col": 0}},  # ValueError for json and repr alike
    {"name": "set_slot", "arguments": "[" * 100_000},
    {"name": "set_slot", "arguments": '{"row": ' + "9" * 5000 + "}"},
    {"name": np.array([1, 2]), "arguments": {}},  # comparing it with the next call used to raise
    {"name": np.array([1, 2]), "arguments": np.array([3, 4])},
    {"name": {"set_slot"}, "arguments": {1: 2, "a": 3}},  # unsortable keys
    ToolCall("get_slot_id", {"row": 0, "col": 1}),
    None,
    "done",
]


@pytest.mark.parametrize("rate", [0.0, 0.5, 1.0])
def test_hostile_calls__never_raise_and_later_calls_still_work(rate: float) -> None:
    env = ToolFailureInjection(AceEnv("course"), rate)
    env.reset(seed=0, options={"instance_index": 0})
    for action in HOSTILE_CALLS * 3:
        observation, _, _, _, info = env.step(action)
        assert json.loads(observation)["status"] in ("success", "failed")
        assert isinstance(info["tool"], str) and isinstance(info["retried_failed_calls"], int)
    info = env.step({"name": "get_current_grid_state", "arguments": {}})[4]
    assert info["tool"] == "get_current_grid_state"


def test_injected_failure__reports_the_tool_as_the_env_would() -> None:
    env = ToolFailureInjection(AceEnv("course"), 1.0)
    env.reset(seed=0)
    labels = [env.step(action)[4]["tool"] for action in ({"name": 5}, {"name": True}, {"arguments": {}}, "x")]
    assert labels == ["5", "True", "None", "None"]
    env.unwrapped.reset(seed=0)
    assert [env.unwrapped.step(action)[4]["tool"] for action in ({"name": 5}, {"name": True}, "x")] == [
        "5",
        "True",
        "None",
    ]


def test_retry_count__an_array_name_is_compared_without_raising() -> None:
    env = ToolFailureInjection(AceEnv("course"), 1.0)
    env.reset(seed=0)
    env.step({"name": np.array(["set_slot", "done"]), "arguments": {}})
    info = env.step({"name": np.array(["set_slot", "done"]), "arguments": {}})[4]
    assert (info["injected_failures"], info["retried_failed_calls"]) == (2, 1)
    assert env.step({"name": "done", "arguments": {}})[4]["retried_failed_calls"] == 1

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
from ace_gym.tools import STOP, TOOL_CALL_FAILED, reply_in
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
    rate = trace["task_config"]["tool_failure_rate"]
    return ToolFailureInjection(trace_env(trace), rate, rng="python", draws="reset_seed")  # the release's draws


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


def _failures(env: ToolFailureInjection, calls: int, seed: int, options: dict) -> str:
    """The failure pattern of ``calls`` calls after a reset: F failed, . reached the env."""
    env.reset(seed=seed, options=options)
    unknown_tool = {"name": "no_such_tool", "arguments": {}}
    return "".join("F" if env.step(unknown_tool)[4]["failure_injected"] else "." for _ in range(calls))


@pytest.mark.parametrize("rng", ["numpy", "python"])
def test_failure_draws__are_independent_across_instances_of_one_seed_at_the_rate_asked(rng: str) -> None:
    # issue 40: every episode of a run (one seed) failed the same calls (FF...... at 0.1, seed 0)
    patterns = [
        _failures(ToolFailureInjection(AceEnv(domain), 0.1, rng=rng), 20, seed=0, options={"instance_index": index})
        for domain in DOMAIN_NAMES
        for index in range(10)
    ]
    draws = "".join(patterns)
    assert 0.07 <= draws.count("F") / len(draws) <= 0.13  # 1200 draws: 0.1 +- 3.5 standard deviations
    first_calls = [pattern[0] for pattern in patterns]
    assert 0.02 <= first_calls.count("F") / len(first_calls) <= 0.25  # not every episode's first call
    assert len(set(patterns)) >= 40  # 60 episodes: patterns repeat only by chance (all-pass ones)


def test_failure_draws__differ_by_trial_and_replay_for_the_same_seed_instance_and_trial() -> None:
    env = ToolFailureInjection(AceEnv("travel"), 0.5)
    trials = [_failures(env, 24, seed=11, options={"instance_index": 3, "trial": trial}) for trial in range(4)]
    assert len(set(trials)) == 4
    again = ToolFailureInjection(AceEnv("travel"), 0.5)
    assert [_failures(again, 24, seed=11, options={"instance_index": 3, "trial": t}) for t in range(4)] == trials
    assert _failures(again, 24, seed=11, options={"instance_index": 3}) == trials[0]  # trial 0 is the default
    with pytest.raises(ConfigError, match=r"options\['trial'\]"):
        again.reset(seed=11, options={"trial": -1})


def test_failure_draws__follow_the_instance_not_how_the_env_chose_it() -> None:
    env = ToolFailureInjection(AceEnv("travel"), 0.5)
    for seed in range(3):
        drawn = _failures(env, 24, seed=seed, options={})
        index = env.unwrapped.state.compiled.instance_id
        assert _failures(env, 24, seed=seed, options={"instance_id": index}) == drawn


def test_draws_reset_seed__every_instance_of_a_seed_fails_alike() -> None:
    # the release's pattern, and ace-gym's before issue 40: records played then replay with it
    patterns = {
        _failures(
            ToolFailureInjection(AceEnv(domain), 0.3, draws="reset_seed"), 16, seed=0, options={"instance_index": i}
        )
        for domain in ("course", "meal")
        for i in range(3)
    }
    assert len(patterns) == 1


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


def test_recovery__a_later_equivalent_call_that_succeeds_recovers_every_earlier_failure_of_it() -> None:
    env = ToolFailureInjection(
        AceEnv("course"), 0.5, rng="python", draws="reset_seed"
    )  # random.Random(0): ok ok F F ok F ok F F ok
    env.reset(seed=0)
    slot, same_slot = {"name": "get_slot_id", "arguments": {"row": 0, "col": 1}}, '{"col": 1, "row": 0}'
    invalid = {"name": "set_slot", "arguments": {"row": 9, "col": 9, "id": "X"}}
    infos = [
        env.step(action)[4]
        for action in (
            {"name": "get_current_grid_state", "arguments": {}},
            invalid,  # reaches the env and fails there: not an injected failure
            slot,
            {"name": "get_slot_id", "arguments": same_slot},  # same call, other spelling
            {"name": "get_slot_id", "arguments": {"row": 1, "col": 1}},  # other arguments: no recovery
            slot,
            {"name": "get_slot_id", "arguments": same_slot},
            invalid,
            invalid,
            invalid,  # not injected, but the env fails it: no recovery
        )
    ]
    assert [i["failure_injected"] for i in infos] == [False, False, True, True, False, True, False, True, True, False]
    assert [i.get("failure_id") for i in infos if i["failure_injected"]] == [1, 2, 3, 4, 5]
    assert [i.get("recovers") for i in infos] == [None] * 6 + [[1, 2, 3]] + [None] * 3
    assert [(i["injected_failures"], i["recovered_failures"]) for i in infos][-4:] == [(3, 3), (4, 3), (5, 3), (5, 3)]
    env.reset(seed=1)
    assert env.step(slot)[4]["recovered_failures"] == 0


def test_tool_rates__fail_only_the_named_tools_and_leave_parity_draws_alone() -> None:
    env = ToolFailureInjection(AceEnv("course"), 0.0, tool_rates={"slot_id": 1.0})
    env.reset(seed=0)
    assert env.step({"name": "get_slot_id", "arguments": {"row": 0, "col": 1}})[4]["failure_injected"]
    assert not env.step({"name": "get_current_grid_state", "arguments": {}})[4]["failure_injected"]
    published, per_tool = (
        ToolFailureInjection(AceEnv("course"), 0.3, rng="python", tool_rates=rates) for rates in (None, {"done": 0.3})
    )
    assert _run(published, seed=4) == _run(per_tool, seed=4)  # same draws when a tool's rate equals the rate


def test_extra_failure_modes__return_their_envelopes() -> None:
    env = ToolFailureInjection(AceEnv("course"), 1.0, failure_modes=tuple(FAILURE_ENVELOPES))
    env.reset(seed=3)
    seen = {env.step({"name": "get_current_grid_state", "arguments": {}})[0] for _ in range(100)}
    assert seen == set(FAILURE_ENVELOPES.values())
    assert json.loads(FAILURE_ENVELOPES["timeout"])["messages"].startswith("Timeout, ")
    assert json.loads(FAILURE_ENVELOPES["rate_limit"])["messages"].startswith("RateLimitError, ")
    with pytest.raises(ValueError):
        json.loads(FAILURE_ENVELOPES["truncated"])


@pytest.mark.parametrize("mode", sorted(set(FAILURE_ENVELOPES) - {"truncated"}))
def test_injected_failure__reply_carries_its_envelope_values_like_every_reply(mode: str) -> None:
    env = ToolFailureInjection(AceEnv("course"), 1.0, failure_modes=(mode,))
    env.reset(seed=3)
    observation, _, _, _, info = env.step({"name": "get_current_grid_state", "arguments": {}})
    reply = reply_in(info)
    assert reply is not None and not reply.ok and reply.text == observation
    assert reply.envelope == json.loads(observation)  # what wrappers above read instead of the text


def test_injected_truncated_reply__has_no_envelope_values() -> None:
    env = ToolFailureInjection(AceEnv("course"), 1.0, failure_modes=("truncated",))
    env.reset(seed=3)
    reply = reply_in(env.step({"name": "get_current_grid_state", "arguments": {}})[4])
    assert reply is not None and not reply.ok and reply.envelope is None and reply.data == {}


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("rate", {"rate": 1.5}),
        ("rate", {"rate": True}),
        ("failure_modes", {"rate": 0.1, "failure_modes": ("boom",)}),
        ("rng", {"rate": 0.1, "rng": "global"}),
        ("tool_rates", {"rate": 0.1, "tool_rates": {"qeury": 0.5}}),
        ("tool_rates['query']", {"rate": 0.1, "tool_rates": {"query": 2.0}}),
        ("tool_rates", {"rate": 0.1, "tool_rates": [0.5]}),
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
        assert isinstance(info["tool"], str) and isinstance(info["recovered_failures"], int)
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


def test_recovery__an_array_name_is_compared_without_raising() -> None:
    env = ToolFailureInjection(
        AceEnv("course"), 0.5, rng="python", draws="reset_seed"
    )  # random.Random(0): ok ok F F ...
    env.reset(seed=0)
    env.step({"name": "get_current_grid_state", "arguments": {}})
    env.step({"name": "get_current_grid_state", "arguments": {}})
    env.step({"name": np.array(["set_slot", "done"]), "arguments": {}})
    info = env.step({"name": np.array(["set_slot", "done"]), "arguments": {}})[4]
    assert (info["injected_failures"], info["recovered_failures"]) == (2, 0)
    info = env.step({"name": np.array(["set_slot", "done"]), "arguments": {}})[4]  # reaches the env, not ok
    assert (info["injected_failures"], info["recovered_failures"]) == (2, 0) and "recovers" not in info

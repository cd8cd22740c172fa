"""BrokenTool: a persistent failure worded apart from injected ones, a replacement that answers
exactly what the broken tool would, and APB's five categories for the agent's next action."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

from ace_gym.agents.solver import ExactSolver
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.planning import BrokenTool, ExtraneousTools
from ace_gym.planning.knowledge import real_tool_kinds
from ace_gym.planning.probes import AlternativeProbe, RefuseProbe, ReplaceProbe, RetryProbe
from ace_gym.planning.vocabulary import clashes, is_variant_name
from ace_gym.tools import TOOL_KEYS
from ace_gym.wrappers.failure_injection import FAILURE_ENVELOPES
from tests.core_helpers import H15_INDEX
from tests.planning.helpers import solver_steps

OPTIONS = {"instance_index": H15_INDEX}
TARGETS = TOOL_KEYS


def _every_tool_used(domain: str) -> list[dict[str, Any]]:
    """The exact solver's calls, with a call of every other tool before its final done."""
    bare = AceEnv(domain)
    observation, info = bare.reset(seed=0, options=OPTIONS)
    steps, _ = solver_steps(bare, observation, info)
    names = {kind: name for name, kind in real_tool_kinds(domain).items()}
    slot = bare.compiled.slots[0]
    cell = {"row": slot.row, "col": slot.col}
    visible = sorted(bare.compiled.visible_ids)[0]
    extras = [
        {"name": names["slot_check"], "arguments": cell},
        {"name": names["slot_query_budget"], "arguments": cell},
        {"name": names["global_check_budget"], "arguments": {}},
        {"name": names["slot_id"], "arguments": cell},
        {"name": names["grid_state"], "arguments": {}},
        {"name": names["item_info"], "arguments": {"id": visible}},
    ]
    return [*(action for action, _ in steps[:-1]), *extras, steps[-1][0]]


def _play(env: gym.Env, policy: Any, seed: int = 0) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
    observation, info = env.reset(seed=seed, options=OPTIONS)
    episode = policy.start(observation, info, seed)
    actions = []
    while True:
        action = episode.act(observation)
        actions.append(action)
        observation, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return float(reward), info, actions


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_replacement__answers_exactly_what_the_original_answers(domain: str, target: str) -> None:
    kinds = real_tool_kinds(domain)
    wrapped = BrokenTool(AceEnv(domain), target=target)
    twin = AceEnv(domain)
    _, wrapped_info = wrapped.reset(seed=7, options=OPTIONS)
    twin.reset(seed=7, options=OPTIONS)
    record = wrapped_info["apb"]["broken_tool"]
    assert kinds[record["tool"]] == target
    compared = 0
    for action in _every_tool_used(domain):
        if action["name"] == record["tool"]:
            renamed = {
                new: action["arguments"][old]
                for new, old in record["parameter_map"].items()
                if old in action["arguments"]
            }
            assert wrapped.step({"name": record["replacement"], "arguments": renamed})[0] == twin.step(action)[0]
            compared += 1
        else:
            assert wrapped.step(action)[0] == twin.step(action)[0]
    assert compared >= 1


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_reset__replacement_is_a_new_name_with_renamed_parameters_and_the_same_description(domain: str) -> None:
    env = BrokenTool(AceEnv(domain))
    for seed in range(5):
        _, info = env.reset(seed=seed, options=OPTIONS)
        record = info["apb"]["broken_tool"]
        functions = {schema["function"]["name"]: schema["function"] for schema in info["tools"]}
        real = list(real_tool_kinds(domain))
        assert set(functions) == {*real, record["replacement"]}
        assert not clashes(record["replacement"], real) and not is_variant_name(record["tool"], record["replacement"])
        original, replacement = functions[record["tool"]], functions[record["replacement"]]
        assert replacement["description"] == original["description"]
        assert set(replacement["parameters"]["properties"]) == set(record["parameter_map"])
        assert sorted(record["parameter_map"].values()) == sorted(original["parameters"]["properties"])
        assert not set(record["parameter_map"]) & set(record["parameter_map"].values())


def test_broken_tool__fails_persistently_in_wording_apart_from_injected_failures() -> None:
    env = BrokenTool(AceEnv("meal"), hint=True)
    _, info = env.reset(seed=0, options=OPTIONS)
    record = info["apb"]["broken_tool"]
    slot = env.unwrapped.compiled.slots[0]
    call = {
        "name": record["tool"],
        "arguments": {"row": slot.row, "col": slot.col, "field": "price", "operator": "<=", "value": 30},
    }
    replies = [env.step(call)[0] for _ in range(3)]
    assert len(set(replies)) == 1
    envelope = json.loads(replies[0])
    assert envelope["status"] == "failed" and envelope["messages"].startswith("Service error, ")
    assert record["replacement"] in envelope["messages"]  # the hint
    assert replies[0] not in FAILURE_ENVELOPES.values()
    assert env.unwrapped.state.query_calls == [0] * len(env.unwrapped.compiled.slots)
    final = env.step({"name": "get_current_grid_state", "arguments": {}})[4]["apb"]["broken_tool"]
    assert (final["failures"], final["retries"], final["category"]) == (3, 2, 3)


@pytest.mark.parametrize(
    ("probe", "category"), [(ReplaceProbe, 1), (AlternativeProbe, 2), (RetryProbe, 3), (RefuseProbe, 4)]
)
@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_probes__land_in_their_apb_category(domain: str, probe: type, category: int) -> None:
    _, info, _ = _play(BrokenTool(AceEnv(domain)), probe())
    assert info["apb"]["broken_tool"]["category"] == category


def test_distractor_after_the_failure__is_category_5() -> None:
    env = BrokenTool(ExtraneousTools(AceEnv("course"), n=2))
    _, info = env.reset(seed=0, options=OPTIONS)
    slot = env.unwrapped.compiled.slots[0]
    env.step({"name": info["apb"]["broken_tool"]["tool"], "arguments": {"row": slot.row, "col": slot.col}})
    distractor = info["apb"]["extraneous_tools"]["names"][0]
    step_info = env.step({"name": distractor, "arguments": {}})[4]
    assert step_info["apb"]["broken_tool"]["category"] == 5


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_oracle_using_the_replacement__earns_the_unwrapped_reward_and_grid(domain: str) -> None:
    reward, info, _ = _play(AceEnv(domain), ExactSolver())
    wrapped_reward, wrapped_info, _ = _play(BrokenTool(AceEnv(domain)), ReplaceProbe())
    assert wrapped_reward == reward == 1.0
    assert wrapped_info["grid"] == info["grid"]
    assert wrapped_info["apb"]["broken_tool"]["recovered"] is True
    assert wrapped_info["apb"]["broken_tool"]["failures"] == 1  # then only the replacement


def test_perturbation__is_a_function_of_the_seed() -> None:
    def drawn(seed: int) -> dict[str, Any]:
        _, info = BrokenTool(AceEnv("workforce")).reset(seed=seed, options=OPTIONS)
        return {**info["apb"]["broken_tool"], "tools": [s["function"]["name"] for s in info["tools"]]}

    assert drawn(11) == drawn(11)
    assert any(drawn(11) != drawn(seed) for seed in range(12, 20))


def test_constructor__rejects_bad_arguments_and_unknown_targets() -> None:
    with pytest.raises(ConfigError):
        BrokenTool(AceEnv("course"), hint="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        BrokenTool(AceEnv("course"), target="")
    with pytest.raises(ConfigError, match="offered"):
        BrokenTool(AceEnv("course"), target="teleport").reset(seed=0)

"""CostAnnotatedTools: costs add up per call, composites equal the composition of their atomic
calls, the cost-aware reference is no dearer than the exact solver, and lam=0 changes no reward."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

from ace_gym.agents.solver import ExactSolver
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.planning import CostAnnotatedTools
from ace_gym.planning.cost import DEFAULT_COSTS, SET_AND_CHECK_TOOL, call_cost, multi_query_name
from ace_gym.planning.cost_solver import CostAwareSolver
from ace_gym.tools import tool_name
from ace_gym.tools.readonly import ReadOnlyDict
from tests.core_helpers import H15_INDEX

OPTIONS = {"instance_index": H15_INDEX}


def _play(env: gym.Env, policy: Any, seed: int = 0) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
    observation, info = env.reset(seed=seed, options=OPTIONS)
    episode = policy.start(observation, info, seed)
    infos = []
    while True:
        observation, reward, terminated, truncated, step_info = env.step(episode.act(observation))
        infos.append(step_info)
        if terminated or truncated:
            return float(reward), step_info, infos


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_reference_solver__solves_and_costs_no_more_than_the_exact_solver(domain: str) -> None:
    env = CostAnnotatedTools(AceEnv(domain))
    _, reset_info = env.reset(seed=0, options=OPTIONS)
    reward, info, _ = _play(env, CostAwareSolver())
    naive_reward, naive_info, _ = _play(CostAnnotatedTools(AceEnv(domain), reference=False), ExactSolver())
    assert reward == naive_reward == 1.0 and info["grid"] == naive_info["grid"]
    assert info["cost"] == reset_info["apb"]["cost"]["reference"] <= naive_info["cost"]
    assert info["cost"] < naive_info["cost"]  # the composites pay off on an H=15 instance


def test_accumulated_cost__is_the_sum_of_the_call_costs() -> None:
    env = CostAnnotatedTools(AceEnv("meal"), reference=False)
    _, _, infos = _play(env, ExactSolver())
    assert infos[-1]["cost"] == pytest.approx(sum(i["call_cost"] for i in infos))
    attributes = {"ids": ["a", "b", "c"], "field": "price"}
    assert call_cost(DEFAULT_COSTS, "item_attributes", attributes) == pytest.approx(1.3)
    assert call_cost(DEFAULT_COSTS, "item_attributes", json.dumps(attributes)) == pytest.approx(1.3)


def test_schemas__carry_their_cost() -> None:
    _, info = CostAnnotatedTools(AceEnv("course"), reference=False).reset(seed=0, options=OPTIONS)
    functions = {s["function"]["name"]: s["function"] for s in info["tools"]}
    assert functions["set_slot"]["description"].endswith("Cost: 0.1 per call.")
    assert functions[multi_query_name("course")]["description"].endswith("Cost: 1.5 per call.")
    assert info["apb"]["cost"]["costs"][SET_AND_CHECK_TOOL] == 0.4


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_composites__equal_the_composition_of_their_atomic_calls(domain: str) -> None:
    env = CostAnnotatedTools(AceEnv(domain), reference=False)
    twin = AceEnv(domain)
    env.reset(seed=0, options=OPTIONS)
    twin.reset(seed=0, options=OPTIONS)
    slot = twin.compiled.slots[0]
    field = next(f for f in twin.compiled.domain.allowed_fields if f in twin.compiled.numeric)
    conditions = [
        {"field": field, "operator": ">=", "value": 0},
        {"field": "name", "operator": "not_in", "value": []},
    ]
    composite = json.loads(
        env.step(
            {
                "name": multi_query_name(domain),
                "arguments": {"row": slot.row, "col": slot.col, "conditions": conditions},
            }
        )[0]
    )["data"]
    atomic = [
        json.loads(
            twin.step({"name": tool_name("query", domain), "arguments": {"row": slot.row, "col": slot.col, **c}})[0]
        )["data"]
        for c in conditions
    ]
    by_id = {
        m["id"]: {**m, **next(n for n in atomic[1]["matches"] if n["id"] == m["id"])} for m in atomic[0]["matches"]
    }
    assert composite["matches"] == [by_id[m["id"]] for m in atomic[0]["matches"] if m["id"] in by_id]
    assert composite["remaining_budget"] == atomic[-1]["remaining_budget"]
    candidate = slot.candidate_ids[0]
    combined = json.loads(
        env.step({"name": SET_AND_CHECK_TOOL, "arguments": {"row": slot.row, "col": slot.col, "id": candidate}})[0]
    )["data"]
    placed = json.loads(
        twin.step({"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": candidate}})[0]
    )
    checked = json.loads(
        twin.step({"name": tool_name("slot_check", domain), "arguments": {"row": slot.row, "col": slot.col}})[0]
    )
    assert combined == {**placed["data"], **checked["data"]}


def test_lam_zero__leaves_base_rewards_unchanged_and_lam_charges_the_cost() -> None:
    bare_reward, _, _ = _play(AceEnv("travel"), ExactSolver())
    reward, _info, _infos = _play(CostAnnotatedTools(AceEnv("travel"), reference=False), ExactSolver())
    assert reward == bare_reward == 1.0
    env = CostAnnotatedTools(AceEnv("travel"), lam=0.01, reference=False)
    observation, reset_info = env.reset(seed=0, options=OPTIONS)
    episode = ExactSolver().start(observation, reset_info, 0)
    total = 0.0
    while True:
        observation, step_reward, terminated, truncated, step_info = env.step(episode.act(observation))
        total += step_reward
        if terminated or truncated:
            break
    assert total == pytest.approx(1.0 - 0.01 * step_info["cost"])


def test_efficiency_reward__is_score_times_reference_over_cost() -> None:
    reward, info, _ = _play(CostAnnotatedTools(AceEnv("pc_build"), reward="efficiency"), ExactSolver())
    record = info["apb"]["cost"]
    assert reward == pytest.approx(record["reference"] / info["cost"]) == pytest.approx(record["efficiency"])
    assert 0 < reward < 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"costs": {"querry": 1.0}}, "costs"),
        ({"costs": {"query": -1}}, "costs['query']"),
        ({"lam": -0.5}, "lam"),
        ({"reward": "bonus"}, "reward"),
        ({"reward": "efficiency", "reference": False}, "reference"),
        ({"composites": 1}, "composites"),
    ],
)
def test_constructor__rejects_bad_arguments(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        CostAnnotatedTools(AceEnv("course"), **kwargs)
    assert raised.value.field == field


def test_schemas__are_annotated_once_as_new_read_only_schemas_shared_by_episodes() -> None:
    base = AceEnv("course")
    env = CostAnnotatedTools(base, reference=False)
    first = env.reset(seed=0, options=OPTIONS)[1]["tools"]
    again = env.reset(seed=1, options=OPTIONS)[1]["tools"]
    assert all(a is b and isinstance(a, ReadOnlyDict) for a, b in zip(first, again, strict=True))
    assert all(s["function"]["description"].count("Cost:") == 1 for s in again)
    assert not any("Cost:" in s["function"]["description"] for s in base.reset(seed=0)[1]["tools"])

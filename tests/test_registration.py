"""Every registered id makes a Gymnasium-conformant env; ids are minted in one place."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import ace_gym
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.planning.benchmark import BENCHMARK as PLANNING
from ace_gym.registration import ENV_IDS, register_envs, registered_env_ids

# every id any ace-gym module registered on import (procedural variants included)
REGISTERED_IDS = registered_env_ids()
PROBE_IDS = {entry.env_id for entry in PLANNING.envs if not entry.per_domain}  # StepWise, Holistic


@pytest.mark.parametrize("env_id", REGISTERED_IDS)
def test_check_env__passes_without_warnings(env_id: str) -> None:
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.parametrize("env_id", [i for i in REGISTERED_IDS if gym.spec(i).additional_wrappers])
def test_check_env__the_registered_wrapper_stack_passes_too(env_id: str) -> None:
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*is different from the unwrapped version")  # it is: wrapped
        check_env(env, skip_render_check=False)
    assert gym.make(env.spec).spec == env.spec  # the stack rebuilds from its spec


@pytest.mark.parametrize("env_id", REGISTERED_IDS)
def test_make__spec_kwargs_are_plain_serialisable_values(env_id: str) -> None:
    spec = gym.spec(env_id)
    assert json.loads(json.dumps(spec.kwargs)) == spec.kwargs
    if env_id.startswith("ACE-") and env_id not in PROBE_IDS:  # ALB- ids: tests/longbench
        assert isinstance(gym.make(env_id).unwrapped, AceEnv)


def test_make__module_prefixed_id_works() -> None:
    env = gym.make("ace_gym:ACE-course-v0")
    observation, info = env.reset(seed=0, options={"instance_index": 9})
    assert info["instance_id"] == "course_r5_c5_h5_b4"
    observation, reward, terminated, truncated, info = env.step(
        {
            "name": "query_course_candidate_from_attribute",
            "arguments": {"row": 2, "col": 3, "field": "price", "operator": "<=", "value": 300},
        }
    )
    assert (reward, terminated, truncated) == (0.0, False, False)
    envelope = json.loads(observation)
    assert envelope["status"] == "success" and envelope["data"]["matches"]
    assert all(match["price"] <= 300 for match in envelope["data"]["matches"])


def test_registration__one_id_per_domain_and_idempotent() -> None:
    assert [f"ACE-{domain}-v0" for domain in DOMAIN_NAMES] == [i for i in ENV_IDS if i.count("-") == 2]
    before = dict(gym.registry)
    register_envs()
    assert dict(gym.registry) == before
    assert set(ENV_IDS) <= set(REGISTERED_IDS)
    assert all(gym.spec(i).entry_point == "ace_gym.envs.ace_env:AceEnv" for i in ENV_IDS)
    assert ace_gym.ENV_IDS == ENV_IDS


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make__keyword_arguments_reach_the_env(env_id: str) -> None:
    env = gym.make(env_id, extra_query_num=2, global_check_alpha=0.5, max_steps=7)
    _, info = env.reset(seed=1)
    budgets = info["budgets"]
    assert (budgets["extra_query_num"], budgets["global_check_alpha"], budgets["max_steps"]) == (2, 0.5, 7)

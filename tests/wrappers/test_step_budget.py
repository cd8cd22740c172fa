"""StepBudget: truncation scored like the env's own limit, remaining budget, notices, stacking."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.wrappers import ChatAdapter, StepBudget, ToolFailureInjection
from ace_gym.wrappers.step_budget import steps_left_notice


def _truth_actions(env: AceEnv) -> list[dict[str, Any]]:
    compiled = env.compiled
    return [
        {
            "name": "set_slot",
            "arguments": {"row": s.row, "col": s.col, "id": compiled.item_ids[int(compiled.truth[s.cell])]},
        }
        for s in compiled.slots
    ]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize("filled", ["all", "all_but_one"])
def test_truncation__scores_exactly_like_the_env_own_step_limit(domain: str, filled: str) -> None:
    index = 18  # H = 7
    probe = AceEnv(domain)
    probe.reset(options={"instance_index": index})
    actions = _truth_actions(probe)
    if filled == "all_but_one":
        actions[-1] = {"name": "get_current_grid_state", "arguments": {}}
    limited = AceEnv(domain, max_steps=len(actions))
    limited.reset(options={"instance_index": index})
    budget = StepBudget(AceEnv(domain), len(actions))
    budget.reset(options={"instance_index": index})
    for action in actions:
        expected = limited.step(action)
        got = budget.step(action)
    assert got[:4] == expected[:4]
    assert {k: got[4][k] for k in ("score", "reason", "grid")} == {
        k: expected[4][k] for k in ("score", "reason", "grid")
    }
    assert got[1] == (1.0 if filled == "all" else 0.0)


def test_turns_left__is_reported_on_reset_and_every_step() -> None:
    env = StepBudget(AceEnv("course"), 3)
    assert env.reset(seed=0)[1]["turns_left"] == 3
    lefts = [env.step({"name": "get_global_check_budget", "arguments": {}})[4]["turns_left"] for _ in range(3)]
    assert lefts == [2, 1, 0]


def test_steps_past_the_budget__are_not_executed() -> None:
    env = StepBudget(AceEnv("course"), 1)
    env.reset(seed=0, options={"instance_index": 0})
    last = env.step({"name": "get_current_grid_state", "arguments": {}})[0]
    grid = list(env.unwrapped.state.grid)
    action = _truth_actions(env.unwrapped)[0]
    observation, reward, terminated, truncated, info = env.step(action)
    assert (observation, reward, terminated, truncated, info["turns_left"]) == (last, 0.0, False, True, 0)
    assert env.unwrapped.state.grid == grid
    env.reset(seed=0, options={"instance_index": 0})
    assert json.loads(env.step(action)[0])["status"] == "success"


def test_env_ending_first__passes_through_untouched() -> None:
    env = StepBudget(AceEnv("course"), 5)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step({"name": "done", "arguments": {}})
    assert terminated and not truncated and "budget_exhausted" not in info


def test_notice__appended_to_text_observations() -> None:
    env = StepBudget(AceEnv("course"), 2, notice=True)
    observation = env.reset(seed=0)[0]
    assert observation.endswith("\n\n" + steps_left_notice(2))
    observation = env.step({"name": "get_global_check_budget", "arguments": {}})[0]
    assert observation.endswith("(1 step left)")


def test_under_chat_adapter__counts_assistant_turns_and_notices_reach_the_history() -> None:
    env = StepBudget(ChatAdapter(ToolFailureInjection(AceEnv("travel"), 0.0)), 2, notice=True)
    messages, info = env.reset(seed=0)
    assert messages[-1]["content"].endswith("(2 steps left)") and info["messages"] == messages
    three_calls = '<tool_call>{"name": "get_global_check_budget", "arguments": {}}</tool_call>' * 3
    replies, _, _, truncated, info = env.step(three_calls)
    assert not truncated and info["turns_left"] == 1 and len(replies) == 3
    assert replies[-1]["content"].endswith("(1 step left)") and info["messages"][-1] == replies[-1]
    assert env.get_wrapper_attr("messages")[-1] == replies[-1]
    _, reward, terminated, truncated, info = env.step(three_calls)
    assert truncated and not terminated and info["turns_left"] == 0 and (reward, info["score"]) == (0.0, False)


@pytest.mark.parametrize("max_turns", [0, -1, 2.5, True])
def test_bad_max_turns__is_a_config_error(max_turns: Any) -> None:
    with pytest.raises(ConfigError) as error:
        StepBudget(AceEnv("course"), max_turns)
    assert error.value.field == "max_turns"


def test_non_ace_env__is_a_config_error() -> None:
    with pytest.raises(ConfigError) as error:
        StepBudget(gym.make("CartPole-v1"), 5)
    assert error.value.field == "env"


def test_under_chat_adapter__the_adapter_owns_the_turn_and_the_limit() -> None:
    turns = [
        '<tool_call>{"name": "get_global_check_budget", "arguments": {}}</tool_call>',
        "thinking, no call",
        '<tool_call>{"name": "get_current_grid_state", "arguments": {}}</tool_call>' * 2,
        "after the limit",
    ]
    budget = StepBudget(ChatAdapter(AceEnv("meal")), 3, notice=True)
    limited = ChatAdapter(AceEnv("meal"), max_turns=3, notice=True)
    for env in (budget, limited):
        env.reset(seed=1)
    assert budget.get_wrapper_attr("turn") == 0
    for turn in turns:
        got, expected = budget.step(turn), limited.step(turn)
        assert got[:4] == expected[:4] and got[4].keys() == expected[4].keys()
    assert budget.get_wrapper_attr("turn") == 3  # the adapter counted; the fourth step was not run
    assert budget.get_wrapper_attr("messages") == limited.messages


def test_under_chat_adapter__a_second_limit_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as error:
        StepBudget(ChatAdapter(AceEnv("course"), max_turns=4), 2)
    assert error.value.field == "max_turns"


@pytest.mark.parametrize("max_turns", [np.int64(2), np.int8(2)])
def test_max_turns__numpy_integers_are_integers(max_turns: Any) -> None:
    env = StepBudget(AceEnv("course"), max_turns)
    assert env.max_turns == 2 and type(env.max_turns) is int

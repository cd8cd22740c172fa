"""No degenerate policy scores above its documented floor (issue 29 point 4).

For every registered ``ACE-`` / ``ALB-`` id and for FeedbackRounds, Curriculum and the planning
settings of the wrapper registry (:data:`ace_gym.stacks.WRAPPERS`) over ACE, a bank of policies
that do not do the task is played: empty text, unparseable text, a garbage answer or call,
``done`` at once, always refuse, never refuse (do nothing and end), repeat one call until the
budget runs out, answer "no" / "false" to everything. Each scores at most its floor:

* ACE (every tool-call env, wrapper and planning probe): 0, in every step's reward and in
  ``info["score"]``. A refusal may score on a task that *is* unsolvable (that is the task), so
  refusals are held to 0 on solvable tasks only.
* ALB-QA-v0: 0, except that an answer that does say no may score on questions whose truth is no
  (chance level: docs/longbench.md).
* ALB-Puzzle-v0: 0 (a guess is a name; none of these is one).
* AgencyBench's rounds (FeedbackRounds and the scenarios, their default reward): 0. Their reward
  is the verdict (``gamma ** (j - 1)`` for a pass at attempt j, else 0; issue 38), and none of
  these episodes passes a round. Until issue 29 it was AgencyBench's rubric score, which pays the
  upper bounds an empty grid meets (up to 1/6 of a scenario stage, 4/7 on the small stack below);
  that score stays in ``info`` for the paper's metrics.
* ACE-StepWise-v0: 0 here, and over many seeds each policy's chance level
  (:data:`STEPWISE_CHANCE_FLOOR`): its reward pays APB's grade only to a prediction whose calls
  are the reference's, by tool and by target (cell, item ids, attribute; issue 38). Until issue 29 it paid APB's grade alone, which gave a bare
  ``get_current_grid_state`` 1.0 and an empty prediction 0.4 anywhere.

Ids come from the registry, so a new one is covered without anyone remembering to; small
instances and few seeds keep the file fast and deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

import ace_gym
from ace_gym import feedback, wrappers
from ace_gym.envs import AceEnv
from ace_gym.envs.procedural import ProceduralAceEnv
from ace_gym.longbench.question_types import FIND_DUPLICATES
from ace_gym.registration import registered_env_ids
from ace_gym.spaces import ToolCallSpace
from ace_gym.stacks import WRAPPERS, wrap

assert ace_gym.ENV_IDS  # importing ace_gym registered its ids
ENV_IDS = sorted(i for i in registered_env_ids() if i.startswith(("ACE-", "ALB-")))
MAKE_KWARGS: dict[str, dict[str, Any]] = {"ALB-QA-v0": {"target_tokens": 4096}}
"""Smaller than the defaults where a default would be slow (a 32k-token history per reset)."""
SEEDS = (1,)
"""One seed per stack keeps the file fast; ALB-QA-v0's garbage answer is played over many seeds in
tests/longbench/test_qa_env.py."""
REPEATS = 40
"""Steps of the repeat-one-call policy: past every budget of the small stacks below; a registered
id's own step limit (1000) is cut here, and an episode cut short of its end scores nothing."""
REFUSAL = {"status": "REJECT", "reason_code": "contradictory_constraints", "reason": "cannot be done"}
GARBAGE = "<answer>definitely not the answer 987654321</answer>"


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


# A policy: (tool names offered, step index) -> the action, as text (chat / answer envs) or a
# tool call (tool-call envs); the same bank is sent to both kinds, each in its own form.
POLICIES: dict[str, Callable[[list[str], int, bool], Any]] = {
    "empty": lambda tools, step, calls: {} if calls else "",
    "unparseable": lambda tools, step, calls: "{{not json" if not calls else {"name": 7, "arguments": "x"},
    "garbage": lambda tools, step, calls: _call("definitely_not_a_tool", x=987654321) if calls else GARBAGE,
    "done_at_once": lambda tools, step, calls: (
        _call("done") if calls else json.dumps({"plan": "finish", "tool_chain": [_call("done")]})
    ),
    "always_refuse": lambda tools, step, calls: (
        _call("report_infeasible", reason_code="contradictory_constraints", explanation="cannot be done")
        if calls and "report_infeasible" in tools
        else _call("done")
        if calls
        else json.dumps(REFUSAL)
    ),
    "never_refuse": lambda tools, step, calls: (
        _call("get_current_grid_state") if calls and step == 0 else (_call("done") if calls else "<answer>yes</answer>")
    ),
    "repeat_one_call": lambda tools, step, calls: (
        _call("get_current_grid_state")
        if calls
        else ('<tool_call>{"name": "get_current_grid_state", "arguments": {}}</tool_call>')
    ),
    "no_to_everything": lambda tools, step, calls: "<answer>no</answer>" if step % 2 else "false",
}
REFUSING = {"always_refuse"}
SAYS_NO = {"no_to_everything"}


def _tools(info: dict[str, Any]) -> list[str]:
    return [schema["function"]["name"] for schema in info.get("tools", ())]


def _unsolvable(info: dict[str, Any]) -> bool:
    return bool(((info.get("apb") or {}).get("unsolvable") or {}).get("unsolvable"))


def _play(env: gym.Env, policy: str, seed: int) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """One episode (at most REPEATS steps): the best reward or score seen, the reset info, the
    last info. Under feedback rounds no round may pass."""
    _, reset_info = env.reset(seed=seed)
    calls = isinstance(env.action_space, ToolCallSpace)
    tools, best, info = _tools(reset_info), 0.0, reset_info
    for step in range(REPEATS):
        _, reward, terminated, truncated, info = env.step(POLICIES[policy](tools, step, calls))
        best = max(best, float(reward), float(info.get("score") or 0.0))
        assert not (info.get("feedback_rounds") or {}).get("passed"), (policy, seed)
        if terminated or truncated:
            break
    return best, reset_info, info


def _floor(policy: str, reset_info: dict[str, Any], info: dict[str, Any]) -> float:
    """The most ``policy`` may score on this episode (module docstring)."""
    if policy in REFUSING and _unsolvable(info):  # the outcome the last step records
        return 1.0  # refusing an unsolvable task is doing it
    if policy in SAYS_NO and info.get("question_type") == FIND_DUPLICATES and info.get("gt") is False:
        return 1.0  # a "no" on a question whose truth is no: chance level
    return 0.0


def _above_floor(make: Callable[[], gym.Env], name: str) -> list[str]:
    env = make()
    found = []
    for policy in POLICIES:
        for seed in SEEDS:
            score, reset_info, info = _play(env, policy, seed)
            floor = _floor(policy, reset_info, info)
            if score > floor + 1e-9:
                found.append(f"{policy} seed {seed}: {score:g}")
    return found


def test_the_registry_holds_every_kind_this_test_must_cover() -> None:
    # so that the parametrised tests below cannot pass by covering nothing
    assert {"ACE-course-v0", "ACE-Holistic-v0", "ACE-StepWise-v0", "ALB-QA-v0", "ALB-Puzzle-v0"} <= set(ENV_IDS)
    assert {"ACE-course-unsolvable-v0", "ACE-Scenario-v0", "ACE-course-procedural-v0"} <= set(ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_registered_id__no_degenerate_policy_scores_above_its_floor(env_id: str) -> None:
    kwargs = MAKE_KWARGS.get(env_id, {})
    assert _above_floor(lambda: gym.make(env_id, disable_env_checker=True, **kwargs), env_id) == []


def _small_core() -> AceEnv:
    return ProceduralAceEnv("course", rows=3, cols=4, hidden_slots=[2], decoy_budget=[1], max_steps=REPEATS // 2)


STACKS: dict[str, Callable[[], gym.Env]] = {
    "feedback_rounds": lambda: feedback.FeedbackRounds(_small_core(), max_attempts=2),
    "feedback_rounds_chat": lambda: feedback.FeedbackRounds(
        wrappers.StepBudget(wrappers.ChatAdapter(_small_core()), 8), max_attempts=2
    ),
    "curriculum": lambda: wrappers.Curriculum(
        wrappers.StepBudget(wrappers.ChatAdapter(_small_core()), 8), levels=[[2, 1], [3, 0]], window=1
    ),
    **{
        f"setting_{name}": (
            lambda name=name, entry=entry: wrap(
                AceEnv("course", max_steps=REPEATS // 2), [(name, dict(entry.defaults))]
            )
        )
        for name, entry in WRAPPERS.items()
        if entry.setting
    },
}
"""FeedbackRounds, Curriculum and every planning setting of the registry over a small ACE stack."""


def test_every_planning_setting_of_the_registry__is_played_here() -> None:
    assert {name for name, entry in WRAPPERS.items() if entry.setting} == {
        key.removeprefix("setting_") for key in STACKS if key.startswith("setting_")
    }


@pytest.mark.parametrize("name", sorted(STACKS))
def test_every_wrapper_stack__no_degenerate_policy_scores_above_its_floor(name: str) -> None:
    assert _above_floor(STACKS[name], name) == []


@pytest.mark.parametrize("threshold", [None, "paper"])
def test_feedback_rounds__done_at_once_never_passes(threshold: str | None) -> None:
    """An empty grid earns 0 and never passes, at either threshold; AgencyBench's rubric score of
    it (the upper bounds it meets) stays in ``scores`` for the paper's metrics (docs/feedback_rounds.md)."""
    env = feedback.FeedbackRounds(AceEnv("course"), **({} if threshold is None else {"threshold": threshold}))
    for seed in SEEDS:
        env.reset(seed=seed)
        terminated = False
        while not terminated:
            _, reward, terminated, truncated, info = env.step(_call("done"))
            terminated = terminated or truncated
        assert not info["feedback_rounds"]["passed"] and info["score"] == 0.0 and reward == 0.0
        assert env.rounds.strict_scores == [0.0, 0.0]
        assert info["feedback_rounds"]["scores"][-1] > 0.0  # the paper's score pays the upper bounds


STEPWISE_SEEDS = range(40)
STEPWISE_CHANCE_FLOOR: dict[str, float] = dict.fromkeys(POLICIES, 0.0)
"""The most each policy may earn on ACE-StepWise-v0 (default: middle cut, horizon 1), as a mean
over :data:`STEPWISE_SEEDS`: its chance level, the share of tasks whose reference call is the one
tool it predicts. A prediction naming no tool (empty, unparseable, a refusal, an answer) has none;
the solver's next call at these cuts is a candidate query, an attribute lookup or ``set_slot``,
never ``get_current_grid_state`` or ``done`` (checked below), so every policy's floor is 0. APB's
grade, which the reward used to be, pays a bare ``get_current_grid_state`` 1.0 and an empty
prediction 0.4 on every one of these tasks (docs/planning.md)."""


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_stepwise__each_degenerate_policy_earns_at_most_its_chance_level_over_many_seeds(policy: str) -> None:
    env = gym.make("ACE-StepWise-v0", disable_env_checker=True)
    rewards, references = [], set()
    for seed in STEPWISE_SEEDS:
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(POLICIES[policy]([], 0, False))
        named = [call["name"] for call in info["predicted"]] == [call["name"] for call in info["reference"]]
        assert named or reward == 0.0, (seed, info["predicted"], info["reference"])  # the reward's rule
        assert reward == info["score"] and 0.0 <= reward <= info["step_grade"]
        rewards.append(float(reward))
        references.add(info["reference"][0]["name"])
    assert not references & {"get_current_grid_state", "done", "report_infeasible"}  # the floor's premise
    assert sum(rewards) / len(rewards) <= STEPWISE_CHANCE_FLOOR[policy]

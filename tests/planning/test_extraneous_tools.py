"""ExtraneousTools: distractors that never clash with real tools, change nothing, never depend on
the truth, and leave an oracle's reward and grid as they were."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.planning import ExtraneousTools
from ace_gym.planning.knowledge import real_tool_kinds
from ace_gym.planning.vocabulary import clashes
from ace_gym.scoring import grid_of_ids
from tests.core_helpers import H15_INDEX
from tests.planning.helpers import solver_steps

OPTIONS = {"instance_index": H15_INDEX}


def _names(info: dict[str, Any]) -> list[str]:
    return [schema["function"]["name"] for schema in info["tools"]]


@pytest.mark.parametrize("style", ["related", "unrelated"])
@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_reset__adds_n_distractors_that_never_clash_with_real_tools(domain: str, style: str) -> None:
    env = ExtraneousTools(AceEnv(domain), n=6, style=style)
    real = list(real_tool_kinds(domain))
    seen = set()
    for seed in range(5):
        _, info = env.reset(seed=seed, options=OPTIONS)
        drawn = info["apb"]["extraneous_tools"]["names"]
        assert len(drawn) == len(set(drawn)) == 6
        assert sorted(_names(info)) == sorted([*real, *drawn])
        assert not any(clashes(name, real) for name in drawn)
        seen.add(tuple(drawn))
    assert len(seen) > 1  # re-drawn every episode


def test_reset__same_seed_same_names_order_and_outputs() -> None:
    def episode(seed: int) -> tuple[list[str], list[str]]:
        env = ExtraneousTools(AceEnv("shopping"), n=4, behaviour="misleading")
        _, info = env.reset(seed=seed, options=OPTIONS)
        slot = env.unwrapped.compiled.slots[0]
        arguments = {"row": slot.row, "col": slot.col, "ids": ["x"], "query": "q"}
        outputs = [env.step({"name": n, "arguments": arguments})[0] for n in info["apb"]["extraneous_tools"]["names"]]
        return _names(info), outputs

    assert episode(3) == episode(3)
    assert episode(3) != episode(4)


def test_oracle__earns_the_unwrapped_reward_and_leaves_the_same_grid() -> None:
    for domain in DOMAIN_NAMES:
        bare = AceEnv(domain)
        observation, info = bare.reset(seed=0, options=OPTIONS)
        steps, reward = solver_steps(bare, observation, info)
        env = ExtraneousTools(AceEnv(domain), n=4)
        env.reset(seed=0, options=OPTIONS)
        replies = [env.step(action) for action, _ in steps]
        assert [r[0] for r in replies] == [reply.text for _, reply in steps]
        assert replies[-1][1] == reward == 1.0
        assert replies[-1][4]["grid"] == _grid(bare)
        assert replies[-1][4]["apb"]["extraneous_tools"]["strict_success"] is True


def _grid(env: AceEnv) -> list[list[str | None]]:
    return grid_of_ids(env.compiled, env.state.grid)


@pytest.mark.parametrize("behaviour", ["inert", "error", "misleading"])
def test_distractor_call__changes_no_state_and_counts_against_strict_success(behaviour: str) -> None:
    env = ExtraneousTools(AceEnv("course"), n=3, behaviour=behaviour, penalty=0.25)
    _, info = env.reset(seed=1, options=OPTIONS)
    core = env.unwrapped
    before = (list(core.state.grid), list(core.state.query_calls), core.state.global_calls)
    for name in info["apb"]["extraneous_tools"]["names"]:
        observation, reward, terminated, truncated, step_info = env.step({"name": name, "arguments": {"row": 0}})
        envelope = json.loads(observation)
        assert envelope["status"] == ("failed" if behaviour == "error" else "success")
        assert (reward, terminated, truncated) == (-0.25, False, False)
        assert step_info["apb"]["extraneous_tools"]["called"] is True
    assert (list(core.state.grid), list(core.state.query_calls), core.state.global_calls) == before
    final = env.step({"name": "done", "arguments": {}})[4]
    assert final["apb"]["extraneous_tools"] == {"calls": 3, "called": False, "strict_success": False}


def test_misleading_outputs__do_not_depend_on_which_candidate_is_the_truth() -> None:
    env = AceEnv("travel")
    env.reset(options=OPTIONS)
    instance = env.compiled.instance
    swapped = _with_truth_swapped(instance)
    outputs = []
    for served in (instance, swapped):
        wrapped = ExtraneousTools(AceEnv("travel"), n=8, style="related", behaviour="misleading")
        _, info = wrapped.reset(seed=5, options={"instance": served})
        assert wrapped.unwrapped.compiled.instance.truth_solution == served.truth_solution
        calls = [
            {"name": name, "arguments": {"row": s.row, "col": s.col, "ids": [s.truth_id]}}
            for name in info["apb"]["extraneous_tools"]["names"]
            for s in instance.slots
        ]
        outputs.append([wrapped.step(call)[0] for call in calls])
    assert outputs[0] == outputs[1]
    assert any('"recommended"' in output for output in outputs[0])


def _with_truth_swapped(instance: Any) -> Any:
    """The instance with each branch slot's truth exchanged for one of its decoys (the candidate
    lists, and so everything an agent can see, unchanged)."""
    data = instance.model_dump()
    for slot in data["slots"]:
        if slot["decoy_ids"]:
            decoy = slot["decoy_ids"][0]
            slot["decoy_ids"][0] = slot["truth_id"]
            slot["truth_id"] = decoy
            data["truth_solution"][slot["row"]][slot["col"]] = decoy
    return type(instance).model_validate(data)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n": -1}, "n"),
        ({"n": 33}, "n"),
        ({"n": True}, "n"),
        ({"style": "weird"}, "style"),
        ({"behaviour": "loud"}, "behaviour"),
        ({"penalty": -0.1}, "penalty"),
        ({"penalty": float("nan")}, "penalty"),
    ],
)
def test_constructor__rejects_bad_arguments(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ExtraneousTools(AceEnv("course"), **kwargs)
    assert raised.value.field == field


def test_spec__rebuilds_the_stack() -> None:
    env = gym.make("ACE-course-v0")
    wrapped = ExtraneousTools(env, n=2, style="unrelated", behaviour="error", penalty=0.5)
    rebuilt = gym.make(wrapped.spec)
    assert isinstance(rebuilt, ExtraneousTools)
    assert (rebuilt.n, rebuilt.style, rebuilt.behaviour, rebuilt.penalty) == (2, "unrelated", "error", 0.5)

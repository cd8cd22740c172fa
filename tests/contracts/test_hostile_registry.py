"""Every registered env id and every exported wrapper takes the shared hostile corpus
(``tests/hostile_corpus.py``) without an exception escaping ``step()`` and without emitting a
string that does not encode as UTF-8 (issue 27).

The ids come from Gymnasium's registry and the wrappers from the wrapper registry
(:data:`ace_gym.stacks.WRAPPERS`), so an env or wrapper added later is covered without anyone
remembering to: a new id is built with its registered defaults (:data:`MAKE_KWARGS` may shrink a
slow one), and a new registry entry fails
:func:`test_every_registered_wrapper__has_a_way_to_build_it_here` until :data:`WRAPPER_STACKS` says
how to build it. A wrapper class exported by ``ace_gym.wrappers`` or a benchmark home but missing
from the registry fails :func:`test_every_exported_wrapper__is_in_the_registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

import ace_gym
from ace_gym import feedback, planning, stacks, wrappers
from ace_gym.envs import AceEnv
from ace_gym.envs.procedural import ProceduralAceEnv
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.registration import registered_env_ids
from ace_gym.spaces import ToolCallSpace
from tests.hostile_corpus import (
    CHAT_REPRODUCERS,
    DONE_TEXT,
    HOSTILE_ARGUMENTS,
    PLAN_REPRODUCERS,
    TOOL_CALL_REPRODUCERS,
    unencodable_strings,
)

assert ace_gym.ENV_IDS  # importing ace_gym registered its ids
ENV_IDS = sorted({i for i in gym.registry if i.startswith(("ACE-", "ALB-"))} | set(registered_env_ids()))
MAKE_KWARGS: dict[str, dict[str, Any]] = {"ALB-QA-v0": {"target_tokens": 4096}}
"""Keyword arguments for ids whose defaults make the test slow (ALB-QA-v0 builds a 32k-token history
per reset, and it resets after every action)."""
EVERY_ACTION: list[Any] = [*TOOL_CALL_REPRODUCERS, *CHAT_REPRODUCERS, *PLAN_REPRODUCERS]
SEED = 1
"""Every env's first reset (seed 0 would make ACE-travel-procedural-10x10-v0 generate a slow instance)."""
PAST_THE_END: list[Any] = [{"name": "done", "arguments": {}}, DONE_TEXT, *CHAT_REPRODUCERS[:6], None]
"""Stepped without a reset: a done (which may end the episode), then hostile actions after the end."""


def _escapes(env: gym.Env, actions: list[Any], reset: bool) -> list[str]:
    """Step every action (``reset`` after an episode ends); what went wrong, per action: an
    exception out of ``step()``, a non-float reward, an unencodable string in the observation or info."""
    problems: list[str] = []
    for index, action in enumerate(actions):
        label = f"action {index} ({type(action).__name__})"  # its str() may itself raise
        try:
            observation, reward, terminated, truncated, info = env.step(action)
        except Exception as error:  # counted, not raised: the test reports every escape at once
            problems.append(f"{label}: {type(error).__name__}: {str(error)[:160]}")
            continue
        if not isinstance(reward, float):
            problems.append(f"{label}: reward {reward!r} is no float")
        problems += [f"{label}: observation{where}" for where in unencodable_strings(observation)]
        problems += [f"{label}: info{where}" for where in unencodable_strings(info)]
        if reset and (terminated or truncated):
            env.reset()  # the seeded generator goes on: deterministic, and no instance generated twice
    return problems


def _takes_tool_calls(env: gym.Env) -> bool:
    """Whether ``env`` takes one tool call a step (text reaches it through a ChatAdapter)."""
    return isinstance(env.action_space, ToolCallSpace)


def _offered_tools(info: dict[str, Any]) -> list[str]:
    return [schema["function"]["name"] for schema in info.get("tools", ())]


def _run_corpus(make: Callable[[], gym.Env], actions: list[Any]) -> list[str]:
    """The shared corpus through ``make()``: ``actions`` (text and dict actions alike) and the
    hostile arguments to every tool it offers; a tool-call env also under a ChatAdapter, the way
    text reaches it."""
    env = make()
    _, info = env.reset(seed=SEED)
    tools = _offered_tools(info)
    problems = _escapes(env, actions, reset=True)
    problems += _escapes(env, [{"name": t, "arguments": a} for t in tools for a in HOSTILE_ARGUMENTS], reset=True)
    problems += _escapes(env, PAST_THE_END, reset=False)
    if _takes_tool_calls(env):
        chat = wrappers.ChatAdapter(make())
        chat.reset(seed=SEED)
        problems += [f"ChatAdapter: {p}" for p in _escapes(chat, actions, reset=True)]
        problems += [f"ChatAdapter: {p}" for p in _escapes(chat, PAST_THE_END, reset=False)]
    return problems


def test_the_registry_holds_the_ids_this_test_must_cover() -> None:
    # so that the parametrised test below cannot pass by covering nothing
    assert {"ACE-course-v0", "ACE-Scenario-v0", "ACE-StepWise-v0", "ALB-QA-v0", "ALB-Puzzle-v0"} <= set(ENV_IDS)
    assert set(MAKE_KWARGS) <= set(ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_registered_id__takes_the_hostile_corpus(env_id: str) -> None:
    kwargs = MAKE_KWARGS.get(env_id, {})
    assert _run_corpus(lambda: gym.make(env_id, disable_env_checker=True, **kwargs), EVERY_ACTION) == []


def _core() -> AceEnv:
    return AceEnv("course", max_steps=10**6)


def _chat() -> gym.Env:
    return wrappers.StepBudget(wrappers.ChatAdapter(wrappers.ToolFailureInjection(_core(), 0.5)), 9, notice=True)


def _curriculum() -> gym.Env:
    core = ProceduralAceEnv("course", rows=3, cols=4, hidden_slots=[2], decoy_budget=[1], max_steps=10**6)
    return wrappers.Curriculum(
        wrappers.StepBudget(wrappers.ChatAdapter(core), 9, notice=True), levels=[[2, 1], [3, 0]], window=1
    )


WRAPPER_STACKS: dict[str, list[Callable[[], gym.Env]]] = {
    "BrokenTool": [lambda: planning.BrokenTool(_core(), hint=True)],
    "ChatAdapter": [
        lambda: wrappers.ChatAdapter(_core()),
        lambda: wrappers.ChatAdapter(_core(), "pythonic", max_turns=5, notice=True),
    ],
    "CostAnnotatedTools": [lambda: planning.CostAnnotatedTools(_core(), lam=0.1)],
    "ContextWindow": [
        lambda: wrappers.ContextWindow(wrappers.ChatAdapter(_core()), last_turns=1),
        lambda: wrappers.StepBudget(wrappers.ContextWindow(wrappers.ChatAdapter(_core()), 2), 9, notice=True),
    ],
    "Curriculum": [_curriculum],
    "ExtraneousTools": [lambda: planning.ExtraneousTools(_core(), n=4, behaviour="misleading", penalty=0.1)],
    "FeedbackRounds": [
        lambda: feedback.FeedbackRounds(wrappers.ToolFailureInjection(_core(), 0.5), max_attempts=3, threshold=1.0),
        lambda: feedback.FeedbackRounds(_chat(), max_attempts=3, threshold=1.0, feedback="directive"),
    ],
    "Refine": [lambda: planning.Refine(_core())],
    "StepBudget": [lambda: wrappers.StepBudget(_core(), 9, notice=True), _chat],
    "ToolFailureInjection": [lambda: wrappers.ToolFailureInjection(_core(), 0.5)],
    "UnsolvableMix": [lambda: planning.UnsolvableMix(_core(), 1.0, kinds=list(UNSOLVABLE_KINDS))],
}
"""How to build each wrapper of the registry (by class name): one or more stacks holding it."""
STACKS = [(name, index, make) for name, makes in WRAPPER_STACKS.items() for index, make in enumerate(makes)]


def _registered() -> dict[str, type]:
    """Every wrapper of the registry, by class name."""
    return {entry.class_name: entry.wrapper for entry in stacks.WRAPPERS.values()}


def test_every_registered_wrapper__has_a_way_to_build_it_here() -> None:
    registered = set(_registered())
    unknown = registered - set(WRAPPER_STACKS)
    assert not unknown, f"add a stack building {sorted(unknown)} to WRAPPER_STACKS"
    assert set(WRAPPER_STACKS) == registered  # no stale entry


def test_every_exported_wrapper__is_in_the_registry() -> None:
    classes = set(_registered().values())
    for home in (wrappers, planning, feedback):
        for name in home.__all__:
            value = getattr(home, name)
            if isinstance(value, type) and issubclass(value, gym.Wrapper):
                assert value in classes, f"{home.__name__}.{name} is a wrapper: add its entry to the wrapper registry"


@pytest.mark.parametrize(("name", "index", "make"), STACKS, ids=[f"{n}-{i}" for n, i, _ in STACKS])
def test_every_registered_wrapper__takes_the_hostile_corpus(name: str, index: int, make: Callable[[], gym.Env]) -> None:
    env = make()
    layers = []
    while isinstance(env, gym.Wrapper):
        layers.append(type(env))
        env = env.env
    assert _registered()[name] in layers  # the stack holds the wrapper it stands for
    assert _run_corpus(make, EVERY_ACTION) == []

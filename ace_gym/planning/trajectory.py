"""Trajectories for the planning probes: where APB cuts a prefix, and a trajectory as a plan.

A trajectory here is the list of executed ``(action, reply)`` steps of one episode (one tool call
per assistant turn, as the scripted solver plays); a reply is the step's typed
:class:`~ace_gym.tools.ToolReply` (``info["reply"]``), whose ``text`` the agent saw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from ace_gym.agents.base import ScriptedPolicy
from ace_gym.errors import ConfigError
from ace_gym.planning.knowledge import TaskFacts, decode_arguments, split_action
from ace_gym.spaces import arguments_json
from ace_gym.tools import REPLY_INFO, ToolReply

Step = tuple[Mapping[str, Any], ToolReply]
POSITIONS: dict[str, float] = {"early": 0.25, "middle": 0.5, "late": 0.75}
"""APB's named cut positions, as ratios of the tool-result positions."""


def scripted_trajectory(
    env: gym.Env, policy: ScriptedPolicy, observation: Any, info: Mapping[str, Any], seed: int = 0
) -> tuple[list[Step], float]:
    """Play ``policy`` on an env just reset to ``(observation, info)`` until the episode ends:
    the executed ``(action, reply)`` steps and the last reward. The env is a tool-call stack over
    :class:`~ace_gym.envs.AceEnv`, whose steps carry their reply in ``info["reply"]``."""
    episode = policy.start(observation, info, seed)
    steps: list[Step] = []
    while True:
        action = episode.act(observation)
        if isinstance(action, list):
            raise ConfigError("policy", policy.name, "makes several calls in one turn; a trajectory takes one a step")
        observation, reward, terminated, truncated, step_info = env.step(action)
        steps.append((action, step_info[REPLY_INFO]))
        if terminated or truncated:
            return steps, float(reward)


def cut_point(step_count: int, ratio: float) -> int | None:
    """How many steps the prefix keeps when cutting a ``step_count``-step trajectory at ``ratio``.

    The tool results are positions 1..N; the cut lands right after result ``t`` whose next
    message is an assistant action, i.e. ``1 <= t < N``. The target ``round(ratio * N)``
    (at least 1) is used when it qualifies; otherwise the nearest qualifying position searching
    forward, then backward (APB's rule). None when no position qualifies (N < 2).
    """
    last = step_count - 1
    if last < 1:
        return None
    target = max(1, round(ratio * step_count))
    if target <= last:
        return target
    return last  # forward search finds nothing past N - 1; the backward search starts at N - 1


def call_message(action: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """An assistant message carrying one tool call, as OpenAI chat messages write it."""
    name, arguments = split_action(action)
    decoded = decode_arguments(arguments)
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments_json(decoded if decoded is not None else {})},
            }
        ],
    }


def prefix_messages(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """The chat messages of executed steps: per step an assistant call and the tool's reply."""
    messages: list[dict[str, Any]] = []
    for number, (action, reply) in enumerate(steps, start=1):
        call_id = f"call_{number}_0"
        messages.append(call_message(action, call_id))
        messages.append({"role": "tool", "tool_call_id": call_id, "name": str(action["name"]), "content": reply.text})
    return messages


def plan_from_steps(facts: TaskFacts, steps: Sequence[Step]) -> dict[str, Any]:
    """A trajectory written as a holistic plan: its calls in order, each ``set_slot`` id replaced
    by a reference to the last query on that cell (the value a plan cannot know in advance)."""
    chain: list[dict[str, Any]] = []
    last_query: dict[tuple[int, int], int] = {}
    for number, (action, _) in enumerate(steps, start=1):
        name, raw = split_action(action)
        arguments = dict(decode_arguments(raw) or {})
        kind = facts.tools[name].kind if name in facts.tools else ""
        cell = (arguments.get("row"), arguments.get("col"))
        if kind in ("query", "multi_query"):
            last_query[cell] = number  # type: ignore[index]
        if kind in ("set_slot", "set_and_check") and cell in last_query:
            arguments["id"] = f"the candidate chosen from the results of step {last_query[cell]}"  # type: ignore[index]
        chain.append({"name": name, "arguments": arguments, "reason": f"step {number} of the reference solution"})
    return {
        "plan": "Query every hidden cell, gather the attributes the global rules need, search, fill, verify.",
        "tool_chain": chain,
    }

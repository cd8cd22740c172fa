"""Shared pieces of the wrappers that change the tool surface an agent sees (planning wrappers).

Such a wrapper adds, removes or answers tools: it replaces the reset ``info["tools"]`` (the OpenAI
schemas the agent is shown) with a new list of read-only schemas (:mod:`ace_gym.tools.readonly`:
a changed schema is a new one, never one edited in place), answers some calls itself without the
env below seeing them (its reply, a :class:`~ace_gym.tools.ToolReply`, in ``info["reply"]`` as the
env puts its own: wrappers read replies from there, never from the observation text), and records its perturbation under ``info["apb"][<its key>]`` so an episode can be replayed from its
log. Each draws its randomness from its own generator, seeded from the ``reset`` seed, a tag of
its own and the episode's instance id (:func:`episode_rng`), continued by a ``reset`` without a seed.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ace_gym.envs.ace_env import EPISODE_ENDED_REPLY, tool_label
from ace_gym.planning.knowledge import split_action
from ace_gym.planning.settings import APB_INFO
from ace_gym.tools import REPLY_INFO, ToolReply

EPISODE_ENDED = EPISODE_ENDED_REPLY.text


def episode_rng(
    seed: int | None, tag: int, current: np.random.Generator | None, instance_id: str
) -> np.random.Generator:
    """The wrapper's generator for the next episode: fresh from ``(seed, tag, instance_id)`` when
    ``reset`` gets a seed (so an evaluation that resets every instance with one seed still draws
    per instance), else the current one continued (a fresh unseeded one before any)."""
    if seed is not None:
        return np.random.default_rng([seed, tag, zlib.crc32(instance_id.encode("utf-8", "replace"))])
    return current if current is not None else np.random.default_rng()


def schema_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of OpenAI function schemas, in order."""
    return [schema["function"]["name"] for schema in tools]


def record(info: dict[str, Any], key: str, values: Mapping[str, Any]) -> None:
    """Merge ``values`` into ``info["apb"][key]``."""
    info.setdefault(APB_INFO, {}).setdefault(key, {}).update(values)


def called_name(action: Any) -> str | None:
    """The tool name an action calls, when it is a call with a string name."""
    name = split_action(action)[0]
    return name if isinstance(name, str) else None


def answered(action: Any, reply: ToolReply) -> dict[str, Any]:
    """The ``info`` of a call a wrapper answered itself with ``reply`` (the env below never saw
    it): ``tool``, ``ok`` and the reply under ``info["reply"]``, as the env's step info has them."""
    return {"tool": tool_label(split_action(action)[0]), "ok": reply.ok, REPLY_INFO: reply}

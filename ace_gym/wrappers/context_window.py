"""A context policy for long horizons: the model is shown the opening, the current grid and the last turns."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, integer
from ace_gym.wrappers.chat_adapter import AssistantAction, Messages

GRID_STATE_NOTE = (
    "The conversation is shortened: your first {left_out} turns are not shown, the last {shown} follow. "
    "The grid as it stands now (get_current_grid_state's slots, row by row; null = empty):\n{slots}"
)
"""The grid-state message the model is shown in place of the turns left out."""


def context_messages(conversation: Sequence[Mapping[str, Any]], context: Mapping[str, Any]) -> Messages:
    """The messages a model is shown under ``context`` (an ``info["context"]`` of
    :class:`ContextWindow`): the conversation's first ``head`` messages, then, when turns were
    left out, the ``grid_state`` message, then the conversation from ``kept_from`` on.
    ``conversation`` is the conversation up to the turn the context prompts (the whole one so far,
    live; in a record, the messages before that turn's assistant message)."""
    head, kept_from, grid_state = context["head"], context["kept_from"], context["grid_state"]
    shown = [dict(message) for message in conversation[:head]]
    if grid_state is not None:
        shown.append({"role": "user", "content": grid_state})
    shown += (dict(message) for message in conversation[kept_from:])
    return shown


class ContextWindow(gym.Wrapper[Messages, AssistantAction, Messages, AssistantAction], gym.utils.RecordConstructorArgs):
    """Show the model a bounded context each turn: the opening messages (system prompt and task),
    a fresh grid-state message, and the last ``last_turns`` turns.

    For episodes longer than a trainer's context (docs/training.md, "Context policy"). It wraps a
    :class:`~ace_gym.wrappers.ChatAdapter` over an ace-gym env and changes nothing the adapter
    does: the conversation, the observation (this turn's new messages), rewards and episode end are
    the adapter's, and ``info["messages"]`` stays the whole conversation, for records and logs.

    ## Information
    ``context`` (at reset and after every step): what the model is shown for its next turn, as
    plain JSON data: ``head`` (how many opening messages), ``kept_from`` (the index in the
    conversation of the first turn shown) and ``grid_state`` (the grid-state message's text, or
    None while no turn is left out, when the model sees the whole conversation).
    :func:`context_messages` builds the messages from it, and :attr:`context` does so live. A turn
    is an assistant message with the messages after it (tool replies, corrections, a feedback
    round's message). The grid state is :attr:`AceEnv.grid` after the step, as
    ``get_current_grid_state`` reports it; no turn is cut in half, so every tool reply shown follows
    its call. Deterministic: the same turns give the same contexts.
    """

    def __init__(self, env: gym.Env[Messages, AssistantAction], last_turns: int = 4) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, last_turns=last_turns, _disable_deepcopy=True)
        self.last_turns = integer("last_turns", last_turns, minimum=1)
        core = env.unwrapped
        if not isinstance(core, AceEnv) or not env.has_wrapper_attr("conversation"):
            raise ConfigError("env", env, "ContextWindow wraps a ChatAdapter over an ace-gym env (an AceEnv)")
        gym.Wrapper.__init__(self, env)
        self._core: AceEnv = core
        self._turn_starts: list[int] = []  # the conversation index of each turn's assistant message
        self._scanned: int = 0
        self._context: dict[str, Any] = {"head": 0, "kept_from": 0, "grid_state": None}

    @property
    def context(self) -> Messages:
        """The messages the model is shown for its next turn."""
        return context_messages(self.env.get_wrapper_attr("conversation"), self._context)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Messages, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        head = len(info["messages"])
        self._turn_starts, self._scanned = [], head
        self._context = {"head": head, "kept_from": head, "grid_state": None}
        info["context"] = dict(self._context)
        return observation, info

    def step(self, action: AssistantAction) -> tuple[Messages, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        conversation = info.get("messages")
        if conversation is not None:  # a turn was played (a spent budget repeats the last answer)
            self._update(conversation)
        info["context"] = dict(self._context)
        return observation, float(reward), terminated, truncated, info

    def _update(self, conversation: Sequence[Mapping[str, Any]]) -> None:
        for index in range(self._scanned, len(conversation)):
            if conversation[index].get("role") == "assistant":
                self._turn_starts.append(index)
        self._scanned = len(conversation)
        turns = len(self._turn_starts)
        if turns <= self.last_turns:
            return
        left_out = turns - self.last_turns
        slots = json.dumps(self._core.grid, ensure_ascii=False, separators=(",", ":"))
        note = GRID_STATE_NOTE.format(left_out=left_out, shown=self.last_turns, slots=slots)
        self._context = {**self._context, "kept_from": self._turn_starts[left_out], "grid_state": note}

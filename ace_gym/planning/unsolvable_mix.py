"""A mix of solvable and certified-unsolvable tasks, and a tool to report infeasibility (APB's unsolvable setting)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ace_gym.envs.ace_env import ActionType
from ace_gym.errors import ConfigError, did_you_mean, number, probability
from ace_gym.planning import replies
from ace_gym.planning.knowledge import decode_arguments, split_action
from ace_gym.planning.replies import success
from ace_gym.planning.surface import EPISODE_ENDED_REPLY, answered, called_name, episode_rng, record
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.planning.unsolvable import (
    APPROVAL_TOOL,
    ATTACHMENT_TOOL,
    REFUSAL_TOOL,
    UnsolvableVariant,
    make_variant,
)
from ace_gym.planning.vocabulary import tool_schema
from ace_gym.tools import REPLY_INFO, ToolReply, reply_in, tool_name
from ace_gym.tools.readonly import ReadOnlyDict
from ace_gym.tools.replies import unknown_tool

INFO_KEY = "unsolvable"
DEFAULT_REWARDS: dict[str, float] = {
    "refuse_right_code": 1.0,
    "refuse_wrong_code": 0.5,
    "complete_unsolvable": 0.0,
    "refuse_solvable": 0.0,
}
"""The reward matrix: refusing an unsolvable task with its kind as the reason code, with another
code; ending an unsolvable task any other way (``done``, the step limit); refusing a solvable
one. Solving a solvable task earns the env's reward."""
REFUSAL_LINE = (
    "If the task cannot be completed as specified (contradictory constraints, a required tool that is "
    "unavailable or missing, or information the task refers to but does not give), do not finish it: "
    f"call `{REFUSAL_TOOL}` with the reason code and a short explanation."
)
_STREAM_TAG = 0x1DEA
_UNVERIFIABLE_RULE = "a global constraint refers to a limit that is not on file, so the grid cannot be fully verified"
_UNVERIFIABLE_SLOT = "the rules of this slot are in an attached sheet that is not available"


@functools.cache
def _refusal_schema() -> ReadOnlyDict:
    """The refusal tool's schema (built once, like every schema below)."""
    return tool_schema(
        REFUSAL_TOOL,
        "Report that the task cannot be completed as specified, instead of finishing it. Ends the episode.",
        {
            "reason_code": {
                "type": "string",
                "enum": list(UNSOLVABLE_KINDS),
                "description": "Why the task cannot be completed.",
            },
            "explanation": {"type": "string", "description": "What makes the task infeasible, in a sentence."},
        },
        ["reason_code"],
    )


@functools.cache
def _approval_schema() -> ReadOnlyDict:
    cell = {"type": "integer"}
    return tool_schema(
        APPROVAL_TOOL,
        "Request compliance approval for assigning an id to a hidden slot.",
        {
            "row": {**cell, "description": "Row index as an integer."},
            "col": {**cell, "description": "Column index as an integer."},
            "id": {"type": "string", "description": "Item id as a string."},
        },
        ["row", "col", "id"],
    )


@functools.cache
def _attachment_schema() -> ReadOnlyDict:
    return tool_schema(ATTACHMENT_TOOL, "Return the file attached to this task.", {}, [])


class UnsolvableMix(gym.Wrapper[str, ActionType, str, ActionType], gym.utils.RecordConstructorArgs):
    """Serve a certified-unsolvable variant of the task with probability ``p_unsolvable``, and
    offer ``report_infeasible(reason_code, explanation)`` in every episode.

    ## Reset
    The env below draws its instance as usual; with probability ``p_unsolvable`` (the wrapper's
    own generator, seeded from the reset seed) one of ``kinds`` that applies to it is drawn, the
    variant built by :func:`ace_gym.planning.unsolvable.make_variant`, and the env reset again
    with the same seed onto the variant (reset option ``instance``). When no drawn kind applies
    the episode stays solvable. A line in the system prompt says when to report infeasibility.

    ## Tools
    ``report_infeasible`` ends the episode (a missing or unknown reason code counts as a wrong code). Per kind: ``tool_outage`` adds ``approve_assignment``,
    which always answers ``Outage, ...``; ``missing_tool`` removes ``set_slot`` (a call gets the
    env's unknown-tool reply); ``missing_information`` makes the global check answer
    ``"is_valid": null`` with a note where it would say valid; ``missing_attachment`` adds
    ``get_attachment`` (no file) and makes the slot check of the withheld cells answer
    ``"is_valid": null``.

    ## Reward
    The matrix :data:`DEFAULT_REWARDS` (``rewards`` overrides entries) on the step that ends an
    unsolvable episode or a refusal; a solvable episode otherwise keeps the env's reward. On that
    step ``info["score"]`` holds the matrix value (the grid's own score moves to
    ``info["grid_score"]``), so a summary's score is "behaved as APB expects".

    ## Information
    ``info["apb"]["unsolvable"]``: at reset ``unsolvable`` (bool), ``kind`` ("" when solvable),
    ``certificate``, ``removed_tools``, ``approval_required``, ``unverifiable_rule``,
    ``attachment_cells`` and ``tools`` (added tool -> kind); on every step ``unsolvable`` and
    ``kind``; on the last step also ``refused``, ``reason_code`` ("" when none) and ``code_correct``.
    """

    def __init__(
        self,
        env: gym.Env,
        p_unsolvable: float = 0.5,
        kinds: Sequence[str] = UNSOLVABLE_KINDS,
        rewards: Mapping[str, float] | None = None,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, p_unsolvable=p_unsolvable, kinds=kinds, rewards=rewards)
        p_unsolvable = probability("p_unsolvable", p_unsolvable)
        kinds = _kinds(kinds)
        matrix = _rewards(rewards)
        gym.Wrapper.__init__(self, env)
        self.p_unsolvable, self.kinds, self.rewards = p_unsolvable, kinds, matrix
        self._rng: np.random.Generator | None = None
        self._variant: UnsolvableVariant | None = None
        self._global_check = self._slot_check = ""
        self._domain = ""
        self._state = "open"  # "open", "ended below", "ended here"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        rng = self._rng = episode_rng(seed, _STREAM_TAG, self._rng, info["instance_id"])
        self._variant = None
        if rng.random() < self.p_unsolvable:
            instance = self.env.get_wrapper_attr("compiled").instance
            for kind in rng.permutation(len(self.kinds)).tolist():
                self._variant = make_variant(instance, self.kinds[kind], rng)
                if self._variant is not None:
                    break
        if self._variant is not None:
            index = info["instance_index"]
            observation, info = self.env.reset(
                seed=seed, options={**(options or {}), "instance": self._variant.instance}
            )
            info["instance_index"] = index  # the instance the variant was made from
        self._domain = info["domain"]
        self._global_check = tool_name("global_check", self._domain)
        self._slot_check = tool_name("slot_check", self._domain)
        self._state = "open"
        added = {REFUSAL_TOOL: "refusal"}
        tools = [*info["tools"], _refusal_schema()]
        variant = self._variant
        if variant is not None and variant.approval_required:
            tools.append(_approval_schema())
            added[APPROVAL_TOOL] = "approval"
        if variant is not None and variant.attachment_cells:
            tools.append(_attachment_schema())
            added[ATTACHMENT_TOOL] = "attachment"
        removed = set(variant.removed_tools) if variant is not None else set()
        info["tools"] = [t for t in tools if t["function"]["name"] not in removed]
        info["system_prompt"] = f"{info['system_prompt']}\n{REFUSAL_LINE}"
        perturbation = (
            variant.record()
            if variant is not None
            else {
                "kind": "",
                "certificate": {},
                "removed_tools": [],
                "approval_required": False,
                "unverifiable_rule": "",
                "attachment_cells": [],
            }
        )
        record(info, INFO_KEY, {"unsolvable": variant is not None, **perturbation, "tools": added})
        return observation, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self._step(action)
        variant = self._variant
        record(info, INFO_KEY, {"unsolvable": variant is not None, "kind": variant.kind if variant else ""})
        return observation, reward, terminated, truncated, info

    def _step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._state == "ended here":
            return EPISODE_ENDED_REPLY.text, 0.0, True, False, answered(action, EPISODE_ENDED_REPLY)
        if self._state == "ended below":
            return self.env.step(action)
        name = called_name(action)
        variant = self._variant
        if name == REFUSAL_TOOL:
            return self._refusal(action)
        reply: ToolReply | None = None
        if variant is not None and name in variant.removed_tools:
            reply = unknown_tool(name, self._domain)
        elif variant is not None and variant.approval_required and name == APPROVAL_TOOL:
            reply = replies.outage(APPROVAL_TOOL)
        elif variant is not None and variant.attachment_cells and name == ATTACHMENT_TOOL:
            reply = replies.no_attachment()
        if reply is not None:
            return reply.text, 0.0, False, False, answered(action, reply)
        observation, reward, terminated, truncated, info = self.env.step(action)
        if variant is not None:
            unverifiable = self._unverifiable(name, reply_in(info))
            if unverifiable is not None:
                observation, info[REPLY_INFO] = unverifiable.text, unverifiable
        if terminated or truncated:
            self._state = "ended below"
            if variant is not None:
                reward = self._final(info, self.rewards["complete_unsolvable"], refused=False, code="")
            else:
                self._outcome(info, refused=False, code="")
        return observation, reward, terminated, truncated, info

    def _refusal(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        arguments = decode_arguments(split_action(action)[1])
        given = arguments.get("reason_code") if arguments is not None else None
        code = given if isinstance(given, str) and given in UNSOLVABLE_KINDS else ""  # any other: a wrong code
        self._state = "ended here"
        shown = code or None
        reply = success({"reported": True, "reason_code": shown})
        info = answered(action, reply)
        final = self.env.get_wrapper_attr("score")()
        info.update(reason=f"reported infeasible: {code}", grid=final.grid)
        if self._variant is None:
            reward = self._final(info, self.rewards["refuse_solvable"], refused=True, code=code, grid_score=final.score)
        else:
            right = code == self._variant.kind
            matrix = self.rewards["refuse_right_code" if right else "refuse_wrong_code"]
            reward = self._final(info, matrix, refused=True, code=code, grid_score=final.score)
        return reply.text, reward, True, False, info

    def _final(
        self, info: dict[str, Any], reward: float, *, refused: bool, code: str, grid_score: float | None = None
    ) -> float:
        """Put the matrix ``reward`` in ``info["score"]`` (the grid's score in ``grid_score``),
        record the outcome, and return the reward."""
        info["grid_score"] = float(info.get("score") or 0.0) if grid_score is None else grid_score
        info["score"] = reward
        self._outcome(info, refused=refused, code=code)
        return reward

    def _outcome(self, info: dict[str, Any], *, refused: bool, code: str) -> None:
        variant = self._variant
        record(
            info,
            INFO_KEY,
            {
                "unsolvable": variant is not None,
                "kind": variant.kind if variant is not None else "",
                "refused": refused,
                "reason_code": code,
                "code_correct": variant is not None and code == variant.kind,
            },
        )

    def _unverifiable(self, name: str | None, reply: ToolReply | None) -> ToolReply | None:
        """The reply to a check that would say "valid" about something the agent was never
        told, answered as unverifiable instead (None: the env's ``reply`` stands)."""
        variant = self._variant
        assert variant is not None
        if name not in (self._global_check, self._slot_check) or reply is None or not reply.ok:
            return None
        data = reply.data
        if data.get("is_valid") is not True:
            return None
        if name == self._global_check and variant.unverifiable_rule:
            return success({"is_valid": None, "unverifiable": _UNVERIFIABLE_RULE})
        if name == self._slot_check and (data.get("row"), data.get("col")) in variant.attachment_cells:
            return success(
                {"is_valid": None, "row": data["row"], "col": data["col"], "unverifiable": _UNVERIFIABLE_SLOT}
            )
        return None


def _kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    listed = (kinds,) if isinstance(kinds, str) else tuple(kinds) if isinstance(kinds, Sequence) else ()
    unknown = [k for k in listed if k not in UNSOLVABLE_KINDS]
    if not listed or unknown:
        hint = did_you_mean(unknown[0], UNSOLVABLE_KINDS) if unknown and isinstance(unknown[0], str) else ""
        raise ConfigError("kinds", kinds, f"must be a non-empty list of {list(UNSOLVABLE_KINDS)}{hint}")
    return tuple(dict.fromkeys(listed))


def _rewards(rewards: Mapping[str, float] | None) -> dict[str, float]:
    if rewards is None:
        return dict(DEFAULT_REWARDS)
    if not isinstance(rewards, Mapping):
        raise ConfigError("rewards", rewards, f"must be a mapping with keys among {list(DEFAULT_REWARDS)}")
    for key in rewards:
        if key not in DEFAULT_REWARDS:
            raise ConfigError(
                "rewards", key, f"unknown entry; known: {list(DEFAULT_REWARDS)}{did_you_mean(key, DEFAULT_REWARDS)}"
            )
    return {**DEFAULT_REWARDS, **{k: float(number(f"rewards[{k!r}]", v, finite=True)) for k, v in rewards.items()}}

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
    add_markers,
    make_variant,
    needs_approval,
)
from ace_gym.planning.vocabulary import tool_schema
from ace_gym.spaces import arguments_json
from ace_gym.tools import REPLY_INFO, ToolReply, reply_in, tool_name
from ace_gym.tools.readonly import ReadOnlyDict
from ace_gym.tools.replies import echo, invalid, unknown_tool

INFO_KEY = "unsolvable"
DEFAULT_REWARDS: dict[str, float] = {
    "refuse_right_code": 1.0,
    "refuse_wrong_code": 0.25,
    "complete_unsolvable": 0.0,
    "refuse_solvable": 0.0,
}
"""The reward matrix: refusing an unsolvable task with its kind as the reason code, with another
code; ending an unsolvable task any other way (``done``, the step limit); refusing a solvable
one. Solving a solvable task earns the env's reward. Refusing with a wrong code earns 0.25 (0.5
until issue 38), so that refusing every task with the most frequent code earns less than never
refusing and solving what can be solved (docs/planning.md has the numbers)."""
DEFAULT_MARKER_RATE = 0.5
"""How often each marker of an unsolvable kind appears, in its working form, in a task that is
not of that kind (:func:`ace_gym.planning.unsolvable.add_markers`)."""
REFUSAL_LINE = (
    "If the task cannot be completed as specified (contradictory constraints, a required tool that is "
    "unavailable or missing, or information the task needs but does not give), do not finish it: "
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

    Every marker of a kind (the approval policy and its tool, a phone-agreed limit, rules in an
    attached sheet) also appears, with probability ``marker_rate`` each, in tasks not of that
    kind, solvable ones included, in a form that keeps them solvable (an approval tool that works,
    or one in outage or not offered while the truth needs no approval; a piece given, or one
    withheld that the other rules make irrelevant;
    :func:`~ace_gym.planning.unsolvable.add_markers`): no phrase or tool tells an unsolvable task
    apart, only the instance does. Checks that cannot confirm a withheld rule answer
    ``"is_valid": null`` where they would say valid, in solvable and unsolvable tasks alike.

    ## Tools
    ``report_infeasible`` ends the episode (a missing or unknown reason code counts as a wrong
    code). Under the approval policy a ``set_slot`` (or a set-and-check composite) of an item the
    policy covers (its attribute above the threshold) without an approval of the same row, col and
    id is answered ``Not approved, ...`` and sets nothing;
    ``approve_assignment`` approves (working), always answers ``Outage, ...`` (``tool_outage``),
    or is not offered (``missing_tool``: a call gets the env's unknown-tool reply).
    ``get_attachment`` returns the sheet, or no file (``missing_attachment``, whose withheld
    cells' slot checks answer ``"is_valid": null`` where they would say valid);
    ``missing_information`` makes the global check answer ``"is_valid": null`` with a note where
    it would say valid.

    ## Reward
    The matrix :data:`DEFAULT_REWARDS` (``rewards`` overrides entries) on the step that ends an
    unsolvable episode or a refusal; a solvable episode otherwise keeps the env's reward. On that
    step ``info["score"]`` holds the matrix value (the grid's own score moves to
    ``info["grid_score"]``), so a summary's score is "behaved as APB expects".

    ## Information
    No answer key while the episode runs (issue 38): ``info["apb"]["unsolvable"]`` holds at reset
    only ``tools`` (added tool -> role, what the tool list shows). On the step that ends the
    episode, with the reward that already tells it, the outcome: ``unsolvable`` (bool), ``kind``
    ("" when solvable), ``refused``, ``reason_code`` ("" when none) and ``code_correct``. A grader
    asks for the answer key by name: :meth:`answer_key` (kind, certificate and surface).
    """

    def __init__(
        self,
        env: gym.Env,
        p_unsolvable: float = 0.5,
        kinds: Sequence[str] = UNSOLVABLE_KINDS,
        rewards: Mapping[str, float] | None = None,
        marker_rate: float = DEFAULT_MARKER_RATE,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, p_unsolvable=p_unsolvable, kinds=kinds, rewards=rewards, marker_rate=marker_rate
        )
        p_unsolvable = probability("p_unsolvable", p_unsolvable)
        marker_rate = probability("marker_rate", marker_rate)
        kinds = _kinds(kinds)
        matrix = _rewards(rewards)
        gym.Wrapper.__init__(self, env)
        self.p_unsolvable, self.kinds, self.rewards, self.marker_rate = p_unsolvable, kinds, matrix, marker_rate
        self._rng: np.random.Generator | None = None
        self._variant: UnsolvableVariant | None = None
        self._task: UnsolvableVariant | None = None
        self._approved: set[str] = set()
        self._needs_approval: frozenset[str] = frozenset()
        self._setters: set[str] = set()
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
        instance = self.env.get_wrapper_attr("compiled").instance
        task = self._task = add_markers(self._variant, instance, rng, self.marker_rate)
        if task.instance is not instance:
            index = info["instance_index"]
            observation, info = self.env.reset(seed=seed, options={**(options or {}), "instance": task.instance})
            info["instance_index"] = index  # the instance the variant was made from
        self._domain = info["domain"]
        self._global_check = tool_name("global_check", self._domain)
        self._slot_check = tool_name("slot_check", self._domain)
        composites = info.get("apb", {}).get("cost", {}).get("composites", {})
        self._setters = {
            tool_name("set_slot", self._domain),
            *(n for n, k in composites.items() if k == "set_and_check"),
        }
        self._approved = set()
        compiled = self.env.get_wrapper_attr("compiled")
        self._needs_approval = needs_approval(compiled, task.approval_rule) if task.approval_rule else frozenset()
        self._state = "open"
        added = {REFUSAL_TOOL: "refusal"}
        tools = [*info["tools"], _refusal_schema()]
        if task.approval in ("working", "outage"):
            tools.append(_approval_schema())
            added[APPROVAL_TOOL] = "approval"
        if task.attachment_offered:
            tools.append(_attachment_schema())
            added[ATTACHMENT_TOOL] = "attachment"
        info["tools"] = tools
        info["system_prompt"] = f"{info['system_prompt']}\n{REFUSAL_LINE}"
        record(info, INFO_KEY, {"tools": added})
        return observation, info

    def answer_key(self) -> dict[str, Any]:
        """The grader channel: the served task's record (``unsolvable``, ``kind``, ``certificate``,
        ``approval``, ``unverifiable_rule``, ``attachment_cells``, ``sheet_cells``); never in
        ``info`` while the episode runs. RuntimeError before the first reset."""
        if self._task is None:
            raise RuntimeError("UnsolvableMix.answer_key() needs a reset first")
        return self._task.record()

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._state == "ended here":
            return EPISODE_ENDED_REPLY.text, 0.0, True, False, answered(action, EPISODE_ENDED_REPLY)
        if self._state == "ended below":
            return self.env.step(action)
        name = called_name(action)
        variant = self._variant
        if name == REFUSAL_TOOL:
            return self._refusal(action)
        reply = self._answered_here(name, action)
        if reply is not None:
            return reply.text, 0.0, False, False, answered(action, reply)
        observation, reward, terminated, truncated, info = self.env.step(action)
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

    def _answered_here(self, name: str | None, action: Any) -> ToolReply | None:
        """The reply to a call this wrapper answers itself (None: it goes to the env below)."""
        task = self._task
        assert task is not None
        if name == APPROVAL_TOOL and task.approval:
            if task.approval == "working":
                arguments = decode_arguments(split_action(action)[1]) or {}
                row, col, item = arguments.get("row"), arguments.get("col"), arguments.get("id")
                if not (_plain_int(row) and _plain_int(col) and isinstance(item, str)):
                    return invalid("approve_assignment takes row and col (integers) and id (a string)")
                self._approved.add(_approval_key(arguments))
                return replies.approved(row, col, echo(item))
            return replies.outage(APPROVAL_TOOL) if task.approval == "outage" else unknown_tool(name, self._domain)
        if name == ATTACHMENT_TOOL and task.attachment_offered:
            return replies.attachment(task.sheet) if task.sheet is not None else replies.no_attachment()
        if name in self._setters and task.approval:
            arguments = decode_arguments(split_action(action)[1]) or {}
            item = arguments.get("id")
            if (
                isinstance(item, str)
                and item in self._needs_approval
                and _approval_key(arguments) not in self._approved
            ):  # else: the env says
                return replies.not_approved(name, APPROVAL_TOOL)
        return None

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
        variant = self._task
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


def answer_key_of(env: gym.Env) -> dict[str, Any] | None:
    """The answer key of the episode an env stack just reset, when an :class:`UnsolvableMix` is
    in it (None otherwise): what graders (the planning detectors) read by name."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, UnsolvableMix):
            return env.answer_key()
        env = env.env
    return None


def _approval_key(arguments: Mapping[str, Any]) -> str:
    """What an approval is for: the row, col and id as sent (any value: canonical JSON text)."""
    return arguments_json([arguments.get("row"), arguments.get("col"), arguments.get("id")])


def _plain_int(value: Any) -> bool:
    """A row or column an approval can name: an int of at most 64 bits (not a bool)."""
    return type(value) is int and value.bit_length() <= 64


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

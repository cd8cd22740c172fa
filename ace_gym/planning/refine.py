"""Plan-guided refinement: hold each proposed call back for one round of critique (APB's refinement setting)."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from ace_gym.envs.ace_env import ActionType
from ace_gym.errors import choice
from ace_gym.planning import replies
from ace_gym.planning.detector import ErrorTracker
from ace_gym.planning.knowledge import facts_from_reset
from ace_gym.planning.surface import answered, record
from ace_gym.planning.taxonomy import CODES, DEFINITIONS, STEP_NAMES, Flag
from ace_gym.spaces import arguments_json
from ace_gym.tools import reply_in

INFO_KEY = "refine"
CRITICS = ("rules", "none")
MODES = ("metric", "generic")
GENERIC_INVITATION = (
    "Reflect on whether this call is the right next step given the task and what you have observed so far, "
    "then send the call to execute: the same one, or a corrected one."
)


def critique(flags: tuple[Flag, ...] | None, mode: str) -> str:
    """The critique text: the rule critic's findings (``flags``; None when there is no critic)
    and, in ``metric`` mode, the E1-E6 definitions with APB's warnings against over-correcting."""
    parts = []
    if flags is not None:
        found = "; ".join(f"{f.code} ({STEP_NAMES[f.code]}): {f.detail}" for f in flags)
        parts.append(f"The rule checker found: {found}." if flags else "The rule checker found no error.")
    if mode == "metric":
        definitions = " ".join(f"{code} {STEP_NAMES[code]}: {DEFINITIONS[code]}." for code in CODES)
        parts.append(
            f"Check the call against these error types. {definitions} Do not skip necessary steps, do not invent "
            "prerequisites, and do not change a call that is already correct."
        )
    parts.append(GENERIC_INVITATION)
    return " ".join(parts)


class Refine(gym.Wrapper[str, ActionType, str, ActionType], gym.utils.RecordConstructorArgs):
    """Hold every proposed call back for one critique, then execute the agent's next call.

    ## Steps
    Steps alternate. A *proposal* is not executed: the observation is a failed envelope
    ``Not executed, your proposed call was held back for review. <critique>``, reward 0. The
    next step is the *revision*, executed as the env below would execute it. The critique
    (:func:`critique`): ``critic="rules"`` shows the E1-E6 detector's flags of the proposal
    (``"none"``: no flags); ``mode="metric"`` adds the E1-E6 definitions and APB's warnings,
    ``"generic"`` only invites reflection. Proposal and revision are both judged by the detector
    on what the agent had observed (the revision's flags decide ``correct_after``).

    ## Information
    ``info["apb"]["refine"]`` on every step: ``phase`` ("proposal" or "revision"),
    ``proposals`` (revisions executed so far), ``correct_before`` / ``correct_after`` (how many
    proposals / revisions had no flag), ``improved`` (flagged proposal, clean revision),
    ``degraded`` (clean proposal, flagged revision), ``changed`` (revision differs from the
    proposal) and this step's ``flags`` (dicts of code, cause, detail).
    """

    def __init__(self, env: gym.Env, critic: str = "rules", mode: str = "metric") -> None:
        critic = choice("critic", critic, CRITICS)
        mode = choice("mode", mode, MODES)
        gym.utils.RecordConstructorArgs.__init__(self, critic=critic, mode=mode)
        gym.Wrapper.__init__(self, env)
        self.critic, self.mode = critic, mode
        self._tracker: ErrorTracker | None = None
        self._proposal: tuple[Any, tuple[Flag, ...]] | None = None
        self._counts = dict.fromkeys(
            ("proposals", "correct_before", "correct_after", "improved", "degraded", "changed"), 0
        )
        self._ended = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        # no answer key: the critique is shown to the agent, so it never judges solvability (issue 38)
        self._tracker = ErrorTracker(facts_from_reset(self.env.get_wrapper_attr("compiled"), info))
        self._proposal = None
        self._counts = dict.fromkeys(self._counts, 0)
        self._ended = False
        return observation, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._tracker is None or self._ended:
            return self.env.step(action)
        flags = self._tracker.judge(action)
        if self._proposal is None:
            self._proposal = (action, flags)
            reply = replies.review(critique(flags if self.critic == "rules" else None, self.mode))
            info = answered(action, reply)
            self._record(info, "proposal", flags)
            return reply.text, 0.0, False, False, info
        proposed, before = self._proposal
        self._proposal = None
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._tracker.observe(action, reply_in(info))
        counts = self._counts
        counts["proposals"] += 1
        counts["correct_before"] += not before
        counts["correct_after"] += not flags
        counts["improved"] += bool(before) and not flags
        counts["degraded"] += not before and bool(flags)
        counts["changed"] += _differs(proposed, action)
        self._record(info, "revision", flags)
        self._ended = terminated or truncated
        return observation, reward, terminated, truncated, info

    def _record(self, info: dict[str, Any], phase: str, flags: tuple[Flag, ...]) -> None:
        record(info, INFO_KEY, {"phase": phase, **self._counts, "flags": [flag.as_dict() for flag in flags]})


def _differs(first: Any, second: Any) -> bool:
    """Whether two actions differ (compared as canonical JSON, which never raises)."""
    return arguments_json(first, sort_keys=True) != arguments_json(second, sort_keys=True)

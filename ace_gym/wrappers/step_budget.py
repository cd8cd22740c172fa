"""A turn limit with final scoring, like the published agent loop's ``max_steps`` (docs/compatibility.md §4.2).

:class:`TurnLimit` is the rule (how many turns, what the last one reports, the notice); it counts
nothing: the layer that owns the turn runs it. :class:`StepBudget` is that layer for a tool-call
env, where one turn is one call; on a chat stack the turn belongs to
:class:`~ace_gym.wrappers.ChatAdapter`, which runs the limit itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, SupportsFloat, TypeVar

import gymnasium as gym

from ace_gym.envs import AceEnv, FinalScore
from ace_gym.errors import ConfigError, flag, integer

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")

DEFAULT_MAX_TURNS = 1000
"""Turn limit of a :class:`StepBudget` given none (the published loop's ``max_steps``)."""


def steps_left_notice(turns_left: int) -> str:
    """The short budget notice appended to observations, e.g. ``(3 steps left)``."""
    return f"({turns_left} step{'' if turns_left == 1 else 's'} left)"


class TurnLimit:
    """At most ``max_turns`` turns, the last one scored (``score`` is the core env's
    :meth:`~ace_gym.envs.AceEnv.score`); with ``notice``, the remaining budget as text.

    The owner of the turn calls :meth:`start` at reset and :meth:`end_turn` after each turn, and
    once :attr:`exhausted` answers further steps with :meth:`repeat`. Info keys:
    ``turns_left`` on reset and every step; the limit's last turn adds ``score``, ``reason``,
    ``grid`` and ``budget_exhausted``.
    """

    def __init__(self, max_turns: int, notice: bool, score: Callable[[], FinalScore]) -> None:
        self.max_turns = integer("max_turns", max_turns, minimum=1)
        self.notice = flag("notice", notice)
        self._score = score
        self.exhausted = False
        self.last_observation: Any = None

    def start(self, info: dict[str, Any]) -> str | None:
        """A new episode: sets ``info["turns_left"]``; returns the notice to show, if any."""
        self.exhausted = False
        info["turns_left"] = self.max_turns
        return steps_left_notice(self.max_turns) if self.notice else None

    def end_turn(self, turn: int, ended: bool, info: dict[str, Any]) -> tuple[float | None, str | None]:
        """After turn ``turn`` (``ended``: the env ended the episode itself): ``(reward, None)``
        when the limit ends the episode here (truncate it; the final score is in ``info``), else
        ``(None, notice to show or None)``."""
        turns_left = max(0, self.max_turns - turn)
        info["turns_left"] = turns_left
        if ended:
            return None, None
        if turns_left == 0:
            self.exhausted = True
            final = self._score()
            info.update(final._asdict(), budget_exhausted=True)
            return final.score, None
        return None, steps_left_notice(turns_left) if self.notice else None

    def repeat(self) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """A step after the limit: not executed; the last observation again, truncated."""
        return self.last_observation, 0.0, False, True, {"turns_left": 0, "budget_exhausted": True}


class StepBudget(gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs):
    """Truncate the episode after ``max_turns`` turns, scoring the grid.

    On a tool-call env (an :class:`AceEnv`, possibly under :class:`ToolFailureInjection`) a turn
    is one ``step``, one tool call, and this wrapper counts them. On a chat stack the turn is an
    assistant message, owned by :class:`ChatAdapter` with the conversation, so this wrapper hands
    the limit to it (:meth:`ChatAdapter.limit_turns`) and passes steps through:
    ``StepBudget(ChatAdapter(env), n, notice=True)`` is ``ChatAdapter(env, max_turns=n,
    notice=True)``. The intended stack is ``StepBudget(ChatAdapter(ToolFailureInjection(AceEnv(...))), max_turns)``.

    When the last turn ends without the episode ending, the step is returned truncated with
    reward and ``info["score"]``, ``["reason"]``, ``["grid"]`` computed exactly as the env's own
    limit computes them (:meth:`AceEnv.score`), and ``info["budget_exhausted"]``. Steps after
    that are not executed: they return the last observation again, reward 0, truncated, until
    ``reset``. ``info["turns_left"]`` reports the remaining budget on reset and on every step.
    ``notice=True`` appends ``"(N steps left)"`` to each observation (on a chat stack, to the last
    message of the turn, in the conversation itself).
    """

    def __init__(
        self, env: gym.Env[ObsType, ActType], max_turns: int = DEFAULT_MAX_TURNS, *, notice: bool = False
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, max_turns=max_turns, notice=notice, _disable_deepcopy=True
        )  # plain values, validated below
        if not isinstance(env.unwrapped, AceEnv):
            raise ConfigError("env", env, "StepBudget wraps an ace-gym env (its unwrapped env must be an AceEnv)")
        self.max_turns, self.notice = integer("max_turns", max_turns, minimum=1), flag("notice", notice)
        gym.Wrapper.__init__(self, env)
        self._limit: TurnLimit | None = None
        if env.has_wrapper_attr("limit_turns"):  # a conversation below owns the turn
            env.get_wrapper_attr("limit_turns")(self.max_turns, notice=self.notice)
        else:
            self._limit = TurnLimit(self.max_turns, self.notice, env.get_wrapper_attr("score"))
        self._turns = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        if self._limit is None:
            return observation, info
        self._turns = 0
        notice = self._limit.start(info)
        observation = _with_notice(observation, notice)
        self._limit.last_observation = observation
        return observation, info

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        limit = self._limit
        if limit is None:
            return self.env.step(action)
        if limit.exhausted:
            return limit.repeat()
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._turns += 1
        final, notice = limit.end_turn(self._turns, terminated or truncated, info)
        if final is not None:
            reward, truncated = final, True
        observation = _with_notice(observation, notice)
        limit.last_observation = observation
        return observation, float(reward), terminated, truncated, info

    def resume(self, message: str) -> ObsType:
        """Reopen the episode that just ended for another attempt (see ``AceEnv.resume``) with a
        fresh budget of ``max_turns``; returns the wrapped env's next observation (``message``)."""
        observation = self.env.get_wrapper_attr("resume")(message)
        if self._limit is None:  # the conversation below restarts its own limit
            return observation
        self._turns = 0
        observation = self._limit.last_observation = _with_notice(observation, self._limit.start({}))
        return observation


def _with_notice(observation: Any, notice: str | None) -> Any:
    """A text observation with ``notice`` appended (other observations are left as they are)."""
    return f"{observation}\n\n{notice}" if notice and isinstance(observation, str) else observation

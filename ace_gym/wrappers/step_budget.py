"""A turn limit with final scoring, like the published agent loop's ``max_steps`` (docs/compatibility.md §4.2)."""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym

from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, flag, integer
from ace_gym.scoring import evaluate_grid, grid_of_ids


def steps_left_notice(turns_left: int) -> str:
    """The short budget notice appended to observations, e.g. ``(3 steps left)``."""
    return f"({turns_left} step{'' if turns_left == 1 else 's'} left)"


class StepBudget(gym.Wrapper):
    """Truncate the episode after ``max_turns`` steps of the wrapped env, scoring the grid.

    One turn is one ``step`` of the env it wraps: wrap a :class:`ChatAdapter` to count assistant
    messages (the published meaning of a step, however many calls a message holds), or the bare
    env to count tool calls. The intended stack is
    ``StepBudget(ChatAdapter(ToolFailureInjection(AceEnv(...))), max_turns)``.

    When the last turn ends without the episode ending, the step is returned truncated with
    reward and ``info["score"]``, ``["reason"]``, ``["grid"]`` computed exactly as the env's own
    limit computes them. Steps after that are not executed: they return the last observation
    again, reward 0, truncated, until ``reset``. ``info["turns_left"]`` reports the remaining
    budget on reset and on every step.

    ``notice=True`` appends ``"(N steps left)"`` to each observation: to a text observation
    directly, and to the last message of a message-list observation, through the adapter's
    ``add_notice``, which edits the adapter's history, so that its ``info["messages"]`` (a view of
    that history) shows the model the same text.
    """

    def __init__(self, env: gym.Env, max_turns: int, *, notice: bool = False) -> None:
        max_turns = integer("max_turns", max_turns, minimum=1)
        notice = flag("notice", notice)
        if not isinstance(env.unwrapped, AceEnv):
            raise ConfigError("env", env, "StepBudget wraps an ace-gym env (its unwrapped env must be an AceEnv)")
        super().__init__(env)
        self.max_turns = max_turns
        self.notice = notice
        self._turns = 0
        self._exhausted = False
        self._last_observation: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._turns = 0
        self._exhausted = False
        info["turns_left"] = self.max_turns
        if self.notice:
            observation = self._with_notice(observation, self.max_turns)
        self._last_observation = observation
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._exhausted:
            return self._last_observation, 0.0, False, True, {"turns_left": 0, "budget_exhausted": True}
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._turns += 1
        turns_left = max(0, self.max_turns - self._turns)
        info["turns_left"] = turns_left
        if turns_left == 0 and not (terminated or truncated):
            core = cast(AceEnv, self.env.unwrapped)  # checked in __init__
            score, reason = evaluate_grid(core.compiled, core.state.grid)
            reward = float(score)
            truncated = self._exhausted = True
            info.update(
                score=reward, reason=reason, grid=grid_of_ids(core.compiled, core.state.grid), budget_exhausted=True
            )
        elif self.notice and not (terminated or truncated):
            observation = self._with_notice(observation, turns_left)
        self._last_observation = observation
        return observation, float(reward), terminated, truncated, info

    def resume(self, message: str) -> Any:
        """Reopen the episode that just ended for another attempt (see ``AceEnv.resume``) with a
        fresh budget of ``max_turns``; returns the wrapped env's next observation (``message``)."""
        observation = self.env.get_wrapper_attr("resume")(message)
        self._turns = 0
        self._exhausted = False
        if self.notice:
            observation = self._with_notice(observation, self.max_turns)
        self._last_observation = observation
        return observation

    def _with_notice(self, observation: Any, turns_left: int) -> Any:
        text = steps_left_notice(turns_left)
        if isinstance(observation, str):
            return f"{observation}\n\n{text}"
        if isinstance(observation, list) and observation and self.env.has_wrapper_attr("add_notice"):
            message = self.env.get_wrapper_attr("add_notice")(text)  # info["messages"] views the edited history
            return [*observation[:-1], message]
        return observation

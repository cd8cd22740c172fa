"""An adaptive curriculum over a procedural env: each reset plays the level the curriculum state
chooses, and each finished episode's outcome moves it (docs/curriculum.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat, TypeVar

import gymnasium as gym

from ace_gym.curriculum import CurriculumState, Level, ScheduleFunction
from ace_gym.errors import ConfigError, flag

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")


class Curriculum(gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs):
    """Plays the level a :class:`~ace_gym.curriculum.CurriculumState` chooses at every reset of a
    procedural env (``ACE-<domain>-procedural...``, or any env on a
    :class:`~ace_gym.envs.procedural.GeneratorSource`), and reports each episode's outcome to it.

    ``levels``, ``schedule``, ``target_success``, ``floor``, ``window``: the state's settings
    (:class:`~ace_gym.curriculum.CurriculumState`; ``levels`` a ladder's name, by default the
    5x7 ``"procedural"`` ladder, or ``[hidden_slots, decoy_budget]`` pairs). The level reaches
    the env as the reset options ``hidden_slots`` and ``decoy_budget`` (a caller that sets them
    itself gets ConfigError, and so does an env whose instance does not have the chosen level: a
    dataset env); the instance is still drawn from the reset seed.

    Wrap it outermost (above ``StepBudget`` / ``ChatAdapter``) so it sees how every episode ends:
    an episode that ends (terminated or truncated) succeeds when ``info["score"]`` is 1.0; an
    episode abandoned by a reset before it ended reports nothing. Actions and observations pass
    through untouched.

    ``shared=False``: the wrapper reports its own outcomes, so each env (each sub-env of a vector
    env) runs its own curriculum, and sub-env ``i`` of a vector env seeded ``s`` plays the level
    sequence of a single env seeded ``s + i``. ``shared=True``: every sub-env holds a copy of one
    shared state and reports nothing itself; the collector passes every outcome to all of them
    (``envs.call("report", outcome)``, as :func:`ace_gym.eval.collectors.run_vector_episodes` does)
    before the next step, so the copies stay equal and a sync and an async vector env play the
    same levels.

    Info: reset ``curriculum`` = ``{"level": ladder index, "hidden_slots", "decoy_budget"}``;
    the step that ends an episode ``curriculum_outcome`` = ``{"domain", "level", "success",
    "reported"}`` (``reported``: already applied by this wrapper; False under ``shared``).

    Public methods (also through ``get_wrapper_attr`` / ``envs.call``): :meth:`report`,
    :meth:`curriculum_state` and :meth:`load_curriculum_state`, to save and restore the state with
    a training checkpoint.
    """

    def __init__(
        self,
        env: gym.Env[ObsType, ActType],
        levels: str | Sequence[Sequence[int]] = "procedural",
        schedule: str | ScheduleFunction = "adaptive",
        target_success: float = 0.6,
        floor: float = 0.2,
        window: int = 64,
        shared: bool = False,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            levels=levels,
            schedule=schedule,
            target_success=target_success,
            floor=floor,
            window=window,
            shared=shared,
        )
        self.state = CurriculumState(
            levels, schedule=schedule, target_success=target_success, floor=floor, window=window
        )
        self.shared = flag("shared", shared)
        gym.Wrapper.__init__(self, env)
        self._playing: tuple[str, int] | None = None  # (domain, ladder index) of the running episode

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        options = options or {}
        for key in Level._fields:  # the reset options GeneratorSource reads
            if key in options:
                raise ConfigError(f"options[{key!r}]", options[key], "the curriculum chooses the level")
        domain = self.env.get_wrapper_attr("domain").name
        position = self.state.position(domain)
        chosen = self.state.levels[position]._asdict()
        observation, info = self.env.reset(seed=seed, options={**options, **chosen})
        if any(info.get(key) != value for key, value in chosen.items()):
            raise ConfigError(
                "env", self.env, "a curriculum needs a procedural env (its source reads the level's options)"
            )
        self._playing = (domain, position)
        info["curriculum"] = {"level": position, **chosen}
        return observation, info

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        if (terminated or truncated) and self._playing is not None:
            domain, position = self._playing
            self._playing = None
            success = float(info.get("score") or 0.0) >= 1.0
            if not self.shared:
                self.state.report(domain, position, success)
            info["curriculum_outcome"] = {
                "domain": domain,
                "level": position,
                "success": success,
                "reported": not self.shared,
            }
        return observation, reward, terminated, truncated, info

    def report(self, outcome: Mapping[str, Any]) -> int:
        """Apply an outcome (an ``info["curriculum_outcome"]``: ``domain``, ``level``,
        ``success``) to this env's state; returns the domain's ladder index afterwards.
        ConfigError for anything else."""
        if not isinstance(outcome, Mapping) or not isinstance(outcome.get("domain"), str):
            raise ConfigError("outcome", outcome, "must be an info['curriculum_outcome'] mapping")
        return self.state.report(outcome["domain"], outcome.get("level"), flag("success", outcome.get("success")))  # type: ignore[arg-type]

    def curriculum_state(self) -> dict[str, Any]:
        """The state as plain JSON values (:meth:`~ace_gym.curriculum.CurriculumState.to_dict`)."""
        return self.state.to_dict()

    def load_curriculum_state(self, data: Mapping[str, Any]) -> None:
        """Continue from a saved :meth:`curriculum_state`. ConfigError when it is not one, or was
        saved with other settings than this wrapper's."""
        restored = CurriculumState.from_dict(
            data, schedule=self.state.schedule if callable(self.state.schedule) else None
        )
        if restored.settings() != self.state.settings():
            raise ConfigError(
                "curriculum state", dict(data), f"was saved with other settings than {self.state.settings()}"
            )
        self.state = restored

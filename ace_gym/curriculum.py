"""Curricula over the procedural envs' two difficulty knobs: ladders of levels, the schedules
that move along them, and the small serialisable state a run keeps (docs/curriculum.md).

A level is a ``(hidden_slots, decoy_budget)`` pair; a ladder is an ordered tuple of levels,
easiest first (one default per procedural variant: :data:`ace_gym.presets.CURRICULUM_LADDERS`).
:class:`CurriculumState` keeps, per domain, the position on the ladder and the outcomes of the
episodes played there; :meth:`CurriculumState.report` applies one outcome and moves by the
schedule. Nothing here draws random numbers: the level of every reset follows from the outcomes
reported before it, in order, so a run replays from its log.

Imports only ``errors`` and ``presets``: the wrapper (:class:`ace_gym.wrappers.Curriculum`), the
collectors and the TRL rows all share this one state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ace_gym.errors import ConfigError, choice, did_you_mean, integer, probability
from ace_gym.presets import CURRICULUM_LADDERS
from ace_gym.stats import mean


class Level(NamedTuple):
    """One rung of a ladder: the generator's ``hidden_slots`` (H) and ``decoy_budget`` (B)."""

    hidden_slots: int
    decoy_budget: int


ScheduleFunction = Callable[[int, tuple[bool, ...], int], int]
"""A custom schedule: ``(position, outcomes at it (oldest first, at most window), ladder length)``
-> the new position (an int in ``[0, ladder length)``)."""
SCHEDULES: tuple[str, ...] = ("adaptive", "linear")
"""The named schedules (:meth:`CurriculumState.report`); a :data:`ScheduleFunction` is the third kind."""


def ladder(levels: str | Sequence[Sequence[int]]) -> tuple[Level, ...]:
    """The ladder ``levels`` names: a procedural variant (``"procedural"``,
    ``"procedural-10x10"``: its default ladder) or explicit ``[hidden_slots, decoy_budget]``
    pairs, easiest first. ConfigError for an unknown name, an empty ladder, a pair that is not two
    integers (H >= 1, B >= 0) or a level listed twice."""
    if isinstance(levels, str):
        if levels not in CURRICULUM_LADDERS:
            raise ConfigError("levels", levels, f"no such ladder{did_you_mean(levels, CURRICULUM_LADDERS)}")
        return tuple(Level(*pair) for pair in CURRICULUM_LADDERS[levels])
    if not isinstance(levels, Sequence) or not levels:
        raise ConfigError(
            "levels", levels, "must be a ladder's name or a non-empty list of [hidden_slots, decoy_budget]"
        )
    rungs = []
    for index, pair in enumerate(levels):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ConfigError(f"levels[{index}]", pair, "must be a [hidden_slots, decoy_budget] pair")
        rungs.append(
            Level(
                integer(f"levels[{index}][0] (hidden_slots)", pair[0], minimum=1),
                integer(f"levels[{index}][1] (decoy_budget)", pair[1], minimum=0),
            )
        )
    if len(set(rungs)) != len(rungs):
        raise ConfigError("levels", levels, "lists a level twice")
    return tuple(rungs)


class CurriculumState:
    """Where a curriculum stands, per domain: the position on the ladder, the outcomes of the
    episodes played at that position since it was reached (the last ``window`` of them) and how
    many outcomes were reported in all.

    ``schedule``: ``"adaptive"`` (once ``window`` outcomes at the position are in: up one level
    when their success rate exceeds ``target_success``, down one when it falls below ``floor``),
    ``"linear"`` (up one level after every ``window`` outcomes at the position, whatever they
    were) or a :data:`ScheduleFunction`. Every move clears the window. Outcomes of episodes that
    started at another position (a vector env's episodes that were running when the level moved)
    count in ``reported`` but not in the window. ConfigError for bad settings.

    :meth:`to_dict` / :meth:`from_dict` save and restore it (plain JSON values) with a training
    checkpoint; a restored state reports and moves exactly as the saved one would have.
    """

    def __init__(
        self,
        levels: str | Sequence[Sequence[int]] = "procedural",
        *,
        schedule: str | ScheduleFunction = "adaptive",
        target_success: float = 0.6,
        floor: float = 0.2,
        window: int = 64,
    ) -> None:
        self.levels = ladder(levels)
        self.schedule: str | ScheduleFunction = (
            schedule if callable(schedule) else choice("schedule", schedule, SCHEDULES)
        )
        self.target_success = probability("target_success", target_success)
        self.floor = probability("floor", floor)
        if self.floor > self.target_success:
            raise ConfigError("floor", floor, f"must not exceed target_success ({self.target_success})")
        self.window = integer("window", window, minimum=1)
        self.positions: dict[str, int] = {}
        self.outcomes: dict[str, list[bool]] = {}
        self.reported: dict[str, int] = {}

    def position(self, domain: str) -> int:
        """The ladder index ``domain``'s next episode plays (0 until something moves it)."""
        return self.positions.get(domain, 0)

    def level(self, domain: str) -> Level:
        """The level ``domain``'s next episode plays."""
        return self.levels[self.position(domain)]

    def report(self, domain: str, position: int, success: bool) -> int:
        """Apply the outcome of one episode of ``domain`` played at ladder index ``position``;
        returns the domain's position afterwards. ConfigError for a position off the ladder."""
        position = integer("position", position, minimum=0, maximum=len(self.levels) - 1)
        self.reported[domain] = self.reported.get(domain, 0) + 1
        current = self.position(domain)
        if position != current:
            return current
        window = [*self.outcomes.get(domain, []), bool(success)][-self.window :]
        moved = self._next_position(current, tuple(window))
        self.positions[domain] = moved
        self.outcomes[domain] = [] if moved != current else window
        return moved

    def _next_position(self, position: int, window: tuple[bool, ...]) -> int:
        top = len(self.levels) - 1
        if callable(self.schedule):
            chosen = self.schedule(position, window, len(self.levels))
            return integer("schedule's position", chosen, minimum=0, maximum=top)
        if len(window) < self.window:
            return position
        if self.schedule == "linear":
            return min(position + 1, top)
        rate = mean(window)
        if rate > self.target_success:
            return min(position + 1, top)
        if rate < self.floor:
            return max(position - 1, 0)
        return position

    def to_dict(self) -> dict[str, Any]:
        """The state as plain JSON values (a custom schedule is saved as ``"custom"`` and must be
        given again to :meth:`from_dict`)."""
        return {
            "levels": [list(level) for level in self.levels],
            "schedule": "custom" if callable(self.schedule) else self.schedule,
            "target_success": self.target_success,
            "floor": self.floor,
            "window": self.window,
            "domains": {
                domain: {
                    "position": self.position(domain),
                    "outcomes": [int(outcome) for outcome in self.outcomes.get(domain, [])],
                    "reported": self.reported.get(domain, 0),
                }
                for domain in sorted(set(self.positions) | set(self.reported))
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], schedule: ScheduleFunction | None = None) -> CurriculumState:
        """The state :meth:`to_dict` saved (``schedule``: the custom schedule it was run with).
        ConfigError for anything else."""
        if not isinstance(data, Mapping) or not isinstance(data.get("domains"), Mapping):
            raise ConfigError("curriculum state", data, "is not a CurriculumState.to_dict() value")
        if (data.get("schedule") == "custom") != (schedule is not None):
            raise ConfigError(
                "schedule", schedule, "give the custom schedule exactly when the state was saved with one"
            )
        state = cls(
            data.get("levels", ()),
            schedule=schedule or data.get("schedule", ""),
            target_success=data.get("target_success"),  # type: ignore[arg-type]  # checked by __init__
            floor=data.get("floor"),  # type: ignore[arg-type]
            window=data.get("window"),  # type: ignore[arg-type]
        )
        for domain, saved in data["domains"].items():
            field = f"domains[{domain!r}]"
            if not isinstance(saved, Mapping) or not isinstance(saved.get("outcomes"), list):
                raise ConfigError(field, saved, "must hold position, outcomes and reported")
            state.positions[domain] = integer(
                f"{field}.position", saved.get("position"), minimum=0, maximum=len(state.levels) - 1
            )
            state.reported[domain] = integer(f"{field}.reported", saved.get("reported"), minimum=0)
            outcomes = saved["outcomes"]
            if len(outcomes) > state.window or any(
                outcome not in (0, 1) or isinstance(outcome, float) for outcome in outcomes
            ):
                raise ConfigError(
                    f"{field}.outcomes", outcomes, f"must be at most {state.window} outcomes, each 0 or 1"
                )
            state.outcomes[domain] = [bool(outcome) for outcome in outcomes]
        return state

    def settings(self) -> dict[str, Any]:
        """What a curriculum is configured with (everything in :meth:`to_dict` but the domains)."""
        return {key: value for key, value in self.to_dict().items() if key != "domains"}

"""Policies that plan nothing: the floors a training reward must hold them to (docs/training.md).

:class:`SmallestName` acts on the published data's name-order tell (docs/compatibility.md §7):
per hidden slot it finds the slot-valid candidates (greedy-local's queries) and lists every
candidate's name, then sets the slot-valid one whose name carries the smallest number; ``done``.
On the published 5x5 data that is the truth in every cell; on data without the tell it is a
random slot-valid candidate.

:class:`CheckGuidedSearch`: per hidden slot it issues the slot-rule queries of greedy-local and sets a random slot-valid
candidate; then it repeats "global check; if the grid fails, set one random slot to another
random slot-valid candidate" until a check passes, the global-check budget runs out or
``max_calls`` calls were made; then ``done``. It never reads a global rule: it is the
no-planning policy the global-check budget must hold near greedy-local's score
(docs/training.md, "Budgets"). Its neighbours: :class:`CheckRestartSearch` re-draws the whole grid
per failed check, :class:`RandomRetry` submits a fresh random grid after each feedback round.
Every draw comes from the episode's seeded generator.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, ClassVar

import numpy as np

from ace_gym.agents.base import ScriptedPolicy
from ace_gym.agents.solver import list_all_query, slot_candidates
from ace_gym.agents.task_view import Script, TaskView, ToolCallDict, call, succeeded
from ace_gym.errors import integer
from ace_gym.instance import name_number

MAX_CALLS = 250
"""The calls one episode may make by default (the issue's measurement: about 250)."""


class SmallestName(ScriptedPolicy):
    """Sets each hidden slot's slot-valid candidate with the smallest name number;
    ``notes["unfilled"]`` lists the slots where a query failed or no candidate passed."""

    name: ClassVar[str] = "smallest-name"

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        unfilled = []
        for slot in view.slots:
            valid = yield from slot_candidates(view, slot)
            envelope = yield from call(view.tool("query"), row=slot.row, col=slot.col, **list_all_query(view, "name"))
            names = {m["id"]: m.get("name") for m in envelope["data"]["matches"]} if succeeded(envelope) else {}
            numbered = [(_sort_number(names.get(item)), item) for item in valid or ()]
            if not numbered:
                unfilled.append([slot.row, slot.col])
                continue
            yield from call("set_slot", row=slot.row, col=slot.col, id=min(numbered)[1])
        if unfilled:
            notes["unfilled"] = unfilled


def _sort_number(name: object) -> float:
    """A name's number (:func:`~ace_gym.instance.name_number`); infinity for a name without one."""
    number = name_number(name)
    return float("inf") if number is None else number


class CheckGuidedSearch(ScriptedPolicy):
    """Random slot-valid grid, then one random re-draw per failed global check;
    ``notes["checks"]`` counts the checks made and ``notes["passed"]`` says whether one passed.
    ``max_calls`` counts every call; one below what the fill takes (``max_calls=1``) is random
    slot-valid play, no check made."""

    name: ClassVar[str] = "check-search"
    redraw_all: ClassVar[bool] = False
    """Whether a failed check re-draws every slot (a fresh grid) instead of one."""
    retry: ClassVar[bool] = False
    """Whether feedback on a submission (AgencyBench's rounds) starts the search again on a fresh grid."""

    def __init__(self, max_calls: int = MAX_CALLS) -> None:
        self.max_calls = integer("max_calls", max_calls, minimum=1)

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        made = 0
        options: list[tuple[int, int, list[str]]] = []
        for slot in view.slots:
            valid = yield from slot_candidates(view, slot)
            made += max(1, len(slot.rules))
            if valid:
                options.append((slot.row, slot.col, list(valid)))
        notes["checks"], notes["passed"] = 0, False
        while True:
            made = yield from self._search(view, options, rng, notes, made)
            if not self.retry:
                return
            envelope = yield from call(view.tool("done"))
            if succeeded(envelope):  # the episode ended, or a scenario's next stage opened
                return
            notes["retries"] = notes.get("retries", 0) + 1

    def _search(
        self,
        view: TaskView,
        options: list[tuple[int, int, list[str]]],
        rng: np.random.Generator,
        notes: dict[str, Any],
        made: int,
    ) -> Generator[ToolCallDict, str, int]:
        """Fill a random slot-valid grid and re-draw after each failed check while calls and checks
        remain (see the class docstring); returns the calls made so far."""
        for row, col, ids in options:
            yield from call("set_slot", row=row, col=col, id=ids[int(rng.integers(len(ids)))])
            made += 1
        movable = [option for option in options if len(option[2]) > 1]
        while made < self.max_calls:
            envelope = yield from call(view.tool("global_check"))
            made += 1
            notes["checks"] += 1
            if not succeeded(envelope) or envelope["data"].get("is_valid"):
                notes["passed"] = succeeded(envelope)
                return made
            if not movable:
                return made
            for row, col, ids in movable if self.redraw_all else [movable[int(rng.integers(len(movable)))]]:
                yield from call("set_slot", row=row, col=col, id=ids[int(rng.integers(len(ids)))])
                made += 1
        return made


class CheckRestartSearch(CheckGuidedSearch):
    """:class:`CheckGuidedSearch` that re-draws every slot after a failed check: one fresh
    random slot-valid grid per check."""

    name: ClassVar[str] = "check-restart"
    redraw_all: ClassVar[bool] = True


class RandomRetry(CheckGuidedSearch):
    """Random slot-valid play (no check) that submits a fresh random slot-valid grid after each
    feedback round: what AgencyBench's rounds pay a grid filled without planning, retried."""

    name: ClassVar[str] = "random-retry"
    retry: ClassVar[bool] = True
    redraw_all: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__(max_calls=1)

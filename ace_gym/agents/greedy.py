"""Greedy-local baseline: each hidden slot gets a candidate that passes its own slot rules, with
no global reasoning, so it falls for decoys (a decoy passes the slot rules by construction).

Per slot it issues the slot-rule queries of the solver (one per rule, filtered by the rule) and
sets the first slot-valid candidate in the order the tool lists them; then ``done``. It never
calls the global check. Deterministic: the candidate order is fixed per instance.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, ClassVar

import numpy as np

from ace_gym.agents.base import ScriptedPolicy
from ace_gym.agents.solver import Values, slot_candidates
from ace_gym.agents.task_view import Script, TaskView, ToolCallDict, call, succeeded

Filled = list[tuple[str | None, dict[str, Values]]]
"""Per hidden slot (in ``view.slots`` order): the id set there (None if none) and its slot-valid
candidates with the values their queries returned."""


class GreedyLocal(ScriptedPolicy):
    """Fills every hidden slot with its first slot-valid candidate; ``notes["unfilled"]`` lists
    slots where no candidate passed (or a query failed)."""

    name: ClassVar[str] = "greedy"

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        yield from greedy_fill(view, notes)


def greedy_fill(view: TaskView, notes: dict[str, Any]) -> Generator[ToolCallDict, str, Filled]:
    """Greedy-local's calls (see the module docstring); returns what it set and learnt per slot."""
    filled: Filled = []
    unfilled = []
    for slot in view.slots:
        valid = yield from slot_candidates(view, slot)
        if not valid:
            unfilled.append([slot.row, slot.col])
            filled.append((None, valid or {}))
            continue
        chosen = next(iter(valid))
        envelope = yield from call("set_slot", row=slot.row, col=slot.col, id=chosen)
        if not succeeded(envelope):
            unfilled.append([slot.row, slot.col])
        filled.append((chosen if succeeded(envelope) else None, valid))
    if unfilled:
        notes["unfilled"] = unfilled
    return filled

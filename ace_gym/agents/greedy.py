"""Greedy-local baseline: each hidden slot gets a candidate that passes its own slot rules, with
no global reasoning, so it falls for decoys (a decoy passes the slot rules by construction).

Per slot it issues the slot-rule queries of the solver (one per rule, filtered by the rule) and
sets the first slot-valid candidate in the order the tool lists them; then ``done``. It never
calls the global check. Deterministic: the candidate order is fixed per instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ace_gym.agents.base import ScriptedPolicy
from ace_gym.agents.solver import slot_candidates
from ace_gym.agents.task_view import Script, TaskView, call, succeeded


class GreedyLocal(ScriptedPolicy):
    """Fills every hidden slot with its first slot-valid candidate; ``notes["unfilled"]`` lists
    slots where no candidate passed (or a query failed)."""

    name: ClassVar[str] = "greedy"

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        unfilled = []
        for slot in view.slots:
            valid = yield from slot_candidates(view, slot)
            if not valid:
                unfilled.append([slot.row, slot.col])
                continue
            envelope = yield from call("set_slot", row=slot.row, col=slot.col, id=next(iter(valid)))
            if not succeeded(envelope):
                unfilled.append([slot.row, slot.col])
        if unfilled:
            notes["unfilled"] = unfilled

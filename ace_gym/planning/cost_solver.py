"""The cost-aware solver: the exact solver's reasoning, gathering its facts through the cheapest
tools the agent is offered (the reference of ``CostAnnotatedTools``).

It knows only what an agent knows: the prompt and the tool list (composites are recognised by
their names). Where the multi-condition query is offered it asks each hidden slot *one* question,
the slot's rules as conditions plus a match-everything condition for each attribute the global
rules read (1.5 instead of one 1.0 query per rule and per attribute); the visible items' values
come in batches as large as the item-attributes tool allows (1.0 + 0.1 per id); then the exact
solver's search, fill (0.1 per cell) and one global check (2.0) per completion tried. It is a
deterministic reference, not a proven optimum: it always verifies its grid, as the E1-E6
detector expects, although a forced grid would not need the check.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, ClassVar

from ace_gym.agents.solver import ExactSolver, Gathered, Values, list_all_query, visible_values
from ace_gym.agents.task_view import TaskView, ToolCallDict, call, succeeded
from ace_gym.constraints import SLOT_KINDS
from ace_gym.domains import GlobalRule
from ace_gym.planning.cost import multi_query_name


class CostAwareSolver(ExactSolver):
    """The exact solver with the cheapest fact gathering its tools allow (module docstring)."""

    name: ClassVar[str] = "cost-solver"

    def gather(
        self, view: TaskView, info: Mapping[str, Any], rules: list[tuple[GlobalRule, int]], notes: dict[str, Any]
    ) -> Generator[ToolCallDict, str, Gathered | None]:
        composite = multi_query_name(view.domain.tool_noun)
        if not any(schema["function"]["name"] == composite for schema in info["tools"]):
            return (yield from super().gather(view, info, rules, notes))
        attributes = list(dict.fromkeys(rule.attribute for rule, _ in rules))
        candidates: list[dict[str, Values]] = []
        for slot in view.slots:
            conditions = [
                {"field": attribute, "operator": SLOT_KINDS[kind].query_operator, "value": bound}
                for attribute, kind, bound in slot.rules
            ]
            covered = {attribute for attribute, _, _ in slot.rules}
            conditions += [list_all_query(view, a) for a in attributes if a not in covered]
            envelope = yield from call(
                composite, row=slot.row, col=slot.col, conditions=conditions or [list_all_query(view, "name")]
            )
            if not succeeded(envelope):
                notes["error"] = f"multi-condition query failed on slot ({slot.row}, {slot.col})"
                return None
            candidates.append({m["id"]: {k: v for k, v in m.items() if k != "id"} for m in envelope["data"]["matches"]})
        if all(len(valid) == 1 for valid in candidates):
            rules = []
        visible: dict[str, Values] = (yield from visible_values(view, attributes)) if rules else {}
        return visible, candidates, rules

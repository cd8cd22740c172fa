"""Random baseline: each step one call drawn uniformly from the env's tools, with arguments that
look valid (hidden cells, known field names, operators fitting the field, ids it has seen).

Set ids come from the candidates its own queries returned for that slot (a visible id when it
has seen none, which the env refuses). ``done`` is one of the tools, so an episode lasts about
as many steps as there are tools. Every draw comes from the episode's seeded generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ace_gym.agents.base import ScriptedPolicy
from ace_gym.agents.task_view import Script, TaskView, ToolCallDict, call, succeeded
from ace_gym.domains import CategoricalAttribute, NumericAttribute


class RandomPolicy(ScriptedPolicy):
    """Uniform over the tools, plausible arguments; ``notes["calls"]`` counts calls by tool."""

    name: ClassVar[str] = "random"

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        tool_names = [schema["function"]["name"] for schema in info["tools"]]
        seen: dict[tuple[int, int], list[str]] = {}
        counts: dict[str, int] = {}
        notes["calls"] = counts
        while True:
            name = tool_names[int(rng.integers(len(tool_names)))]
            counts[name] = counts.get(name, 0) + 1
            if name == "done":
                return
            arguments = _arguments(view, name, rng, seen)
            envelope = yield from call(name, **arguments)
            if name == view.tool("query") and succeeded(envelope):
                cell = (envelope["data"]["row"], envelope["data"]["col"])
                known = seen.setdefault(cell, [])
                known.extend(m["id"] for m in envelope["data"]["matches"] if m["id"] not in known)


def _pick(rng: np.random.Generator, options: list[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _arguments(
    view: TaskView, name: str, rng: np.random.Generator, seen: dict[tuple[int, int], list[str]]
) -> ToolCallDict:
    domain = view.domain
    slot = _pick(rng, list(view.slots)) if view.slots else None
    cell = {"row": slot.row, "col": slot.col} if slot else {"row": 0, "col": 0}
    visible = view.visible_ids or [""]
    if name == "set_slot":
        return {**cell, "id": _pick(rng, seen.get((cell["row"], cell["col"])) or visible)}
    if name in ("get_slot_id", "get_hidden_slot_query_budget", view.tool("slot_check")):
        return cell
    if name == view.tool("query"):
        attribute = _pick(rng, list(domain.attributes))
        if isinstance(attribute, NumericAttribute):
            operator = _pick(rng, [">", ">=", "=", "<", "<="])
            value: Any = int(rng.integers(attribute.low, attribute.high + 1))
        else:
            categories: CategoricalAttribute = attribute
            operator = _pick(rng, ["in", "not_in"])
            size = int(rng.integers(0, len(categories.values) + 1))
            value = [str(v) for v in rng.choice(categories.values, size=size, replace=False)]
        return {**cell, "field": attribute.name, "operator": operator, "value": value}
    if name == view.tool("item_info"):
        return {"id": _pick(rng, visible)}
    if name == view.tool("item_attributes"):
        ids = [str(i) for i in rng.choice(visible, size=min(len(visible), view.max_query_ids), replace=False)]
        fields = [a.name for a in domain.attributes][: view.max_query_fields]
        return {"ids": ids, "field": fields}
    return {}

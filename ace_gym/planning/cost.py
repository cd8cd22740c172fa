"""Tool costs and the composite tools of the efficiency-aware setting (``CostAnnotatedTools``).

Costs are by tool kind (:data:`DEFAULT_COSTS`; the APB paper gives no numbers, these are ours):
the attribute query, item info and a global check are the expensive calls, filling a cell is
cheap, ``done`` is free; the item-attributes tool costs its base plus ``item_attributes_per_id``
for each id asked. The composites cost less than the atomic calls they stand for: a multi-condition
query 1.5 instead of k x 1.0, set-and-check 0.4 instead of 0.1 + 0.5.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ace_gym.planning.knowledge import decode_arguments, json_argument
from ace_gym.planning.vocabulary import tool_schema
from ace_gym.tools.readonly import ReadOnlyDict

DEFAULT_COSTS: dict[str, float] = {
    "query": 1.0,
    "item_info": 1.0,
    "item_attributes": 1.0,
    "item_attributes_per_id": 0.1,
    "slot_check": 0.5,
    "global_check": 2.0,
    "set_slot": 0.1,
    "grid_state": 0.5,
    "slot_id": 0.1,
    "slot_query_budget": 0.1,
    "global_check_budget": 0.1,
    "done": 0.0,
    "multi_query": 1.5,
    "set_and_check": 0.4,
}
COMPOSITE_KINDS = ("multi_query", "set_and_check")
SET_AND_CHECK_TOOL = "set_and_check_slot"
_CELL = {
    "row": {"type": "integer", "description": "Row index as an integer."},
    "col": {"type": "integer", "description": "Column index as an integer."},
}


def multi_query_name(noun: str) -> str:
    return f"query_{noun}_candidates_by_conditions"


def composite_names(noun: str) -> dict[str, str]:
    """``{tool name: kind}`` of the composites in a domain (``noun`` = its tool noun)."""
    return {multi_query_name(noun): "multi_query", SET_AND_CHECK_TOOL: "set_and_check"}


def multi_query_schema(noun: str) -> ReadOnlyDict:
    condition = {
        "type": "object",
        "properties": {
            "field": {"type": "string", "description": "One attribute name to filter on."},
            "operator": {"type": "string", "enum": [">", ">=", "=", "<", "<=", "in", "not_in"]},
            "value": {"description": "One numeric comparison value, or a string list for `in`/`not_in`."},
        },
        "required": ["field", "operator", "value"],
    }
    return tool_schema(
        multi_query_name(noun),
        "Filter one hidden slot's candidates by several attribute conditions at once; returns the candidates "
        "meeting every condition, with each condition's attribute.",
        {**_CELL, "conditions": {"type": "array", "items": condition, "description": "The conditions, all applied."}},
        ["row", "col", "conditions"],
    )


def set_and_check_schema() -> ReadOnlyDict:
    return tool_schema(
        SET_AND_CHECK_TOOL,
        "Fill a hidden slot and check its slot constraints in one call.",
        {**_CELL, "id": {"type": "string", "description": "Item id as a string."}},
        ["row", "col", "id"],
    )


def plan_cost(costs: Mapping[str, float], per_id: float, chain: Any) -> float:
    """What a plan's tool chain would cost: ``costs`` by tool name (as ``CostAnnotatedTools``
    records them), ``per_id`` for each id an item-attributes step names."""
    total = 0.0
    for step in chain if isinstance(chain, list) else ():
        name = step.get("name") if isinstance(step, Mapping) else None
        if not isinstance(name, str) or name not in costs:
            continue
        arguments = decode_arguments(step.get("arguments")) or {}
        ids = arguments.get("ids")
        total += costs[name] + (per_id * len(ids) if isinstance(ids, list) else 0.0)
    return total


def call_cost(costs: Mapping[str, float], kind: str | None, arguments: Any) -> float:
    """What one call of a tool of ``kind`` costs (0 for tools without a cost)."""
    if kind is None or kind not in costs:
        return 0.0
    cost = costs[kind]
    if kind == "item_attributes":
        ids = json_argument((decode_arguments(arguments) or {}).get("ids"))
        cost += costs["item_attributes_per_id"] * (len(ids) if isinstance(ids, list) else 0)
    return cost

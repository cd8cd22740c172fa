"""The eleven ACE tools (docs/compatibility.md §3): one function per tool, with its argument coercion.

Every tool takes the mutable :class:`~ace_gym.tools.state.EpisodeState` first and the model's
arguments as keywords, and returns a :class:`~ace_gym.tools.replies.ToolReply` whose text is the
envelope exactly as the published benchmark serialises it. A bad argument returns the published
failure (:func:`~ace_gym.tools.replies.invalid`); the argument helpers below return either their
result or that failed reply, which the tool returns at once: failures are values, not exceptions.
Checks run in the published order with the published messages; the deliberate departures are
listed in the "Departures from the published release" section of :class:`ace_gym.envs.AceEnv`.
The docstrings are the schemas' descriptions (``{title}`` is filled in per domain) and the
annotations their types.
"""

from __future__ import annotations

import json
import operator as op
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from itertools import compress, repeat
from typing import TYPE_CHECKING, Any, Literal

from ace_gym.constraints import slot_violation_reason
from ace_gym.tools.replies import (
    GLOBAL_CHECK_CHARGE,
    STOP_REPLY,
    Charge,
    InstanceTexts,
    ToolReply,
    echo,
    invalid,
    ok_reply,
    safe_repr,
    valid_text,
)
from ace_gym.tools.state import EpisodeState

if TYPE_CHECKING:
    from ace_gym.instance import CompiledInstance, CompiledSlot

Operator = Literal[">", ">=", "=", "<", "<=", "in", "not_in"]
"""The query operators; the schema's ``enum`` for ``operator`` comes from this type."""
OPERATORS: dict[str, Callable[[Any, Any], bool]] = {  # keyed by the Operator names; looked up by any str
    ">": op.gt,
    ">=": op.ge,
    "=": op.eq,
    "<": op.lt,
    "<=": op.le,
    "in": op.contains,
    "not_in": op.contains,
}
_OPERATOR_LIST = ", ".join(OPERATORS)


# --------------------------------------------------------------------------------------------
# argument coercion


def _cell(state: EpisodeState, row: Any, col: Any) -> tuple[int, int, int] | ToolReply:
    """Convert and range-check a cell: (row, col, hidden slot index or -1), or the failed reply."""
    if _not_integer(row) or _not_integer(col):  # a missing or lettered coordinate, whatever the other is
        return invalid("row and col must be integers")
    if _beyond_any_grid(row) or _beyond_any_grid(col):
        return _invalid_slot(row, col)
    try:
        r, c = int(row), int(col)
    except (TypeError, ValueError, ArithmeticError):  # OverflowError; decimal's InvalidOperation (NaN)
        return invalid("row and col must be integers")
    compiled = state.compiled
    if not (0 <= r < compiled.rows and 0 <= c < compiled.cols):
        return _invalid_slot(r, c)
    return r, c, compiled.cell_slot_list[r * compiled.cols + c]


_BEYOND_ANY_GRID = 2**63


def _beyond_any_grid(value: Any) -> bool:
    """Whether ``value`` is a finite Decimal or Fraction no grid has a row or column at, told by a
    comparison: ``int()`` of one takes time quadratic in its digits (``Decimal("1e999999")``:
    minutes). Other numbers convert in bounded time (a float has at most 1024 bits, a numpy
    scalar 64) and an int needs no conversion."""
    if isinstance(value, Decimal):
        return value.is_finite() and abs(value) >= _BEYOND_ANY_GRID
    return isinstance(value, Fraction) and abs(value) >= _BEYOND_ANY_GRID


def _not_integer(value: Any) -> bool:
    """Whether ``value`` is surely no integer: a left-out coordinate (None), or a string of
    letters only (no letter is a digit, a sign, a space or an underscore)."""
    return value is None or (type(value) is str and value.isalpha())


def _invalid_slot(row: int, col: int) -> ToolReply:
    """The reply to a cell off the grid."""
    return invalid(f"Invalid slot (row={safe_repr(row)}, col={safe_repr(col)})")


def _slot_refusal(template: str, row: int, col: int) -> ToolReply:
    """``invalid(template.format(row=row, col=col))``: a refusal about one cell."""
    return invalid(template.format(row=row, col=col))


def _hidden(state: EpisodeState, row: Any, col: Any, visible_message: str) -> tuple[int, CompiledSlot] | ToolReply:
    """The hidden slot at a cell: (slot index, slot), or the failed reply (for a visible cell,
    ``visible_message`` with ``{row}`` and ``{col}`` filled in)."""
    cell = _cell(state, row, col)
    if isinstance(cell, ToolReply):
        return cell
    r, c, s = cell
    if s < 0:
        return _slot_refusal(visible_message, r, c)
    return s, state.compiled.slots[s]


# --------------------------------------------------------------------------------------------
# common tools


def set_slot(state: EpisodeState, row: int, col: int, id: str | None = None) -> ToolReply:
    """Fill or clear a specific slot.

    row: Row index as an integer.
    col: Column index as an integer.
    id: Item id as a string. Pass null or an empty string to clear the slot.
    """
    hidden = _hidden(state, row, col, "Slot (row={row}, col={col}) is fixed and cannot be modified")
    if isinstance(hidden, ToolReply):
        return hidden
    s, slot = hidden
    r, c = slot.row, slot.col
    if state.opened is not None and s not in state.opened:
        return _slot_refusal(
            "Slot (row={row}, col={col}) belongs to a later stage: set it when that stage opens.", r, c
        )
    if state.writable is not None and s not in state.writable:
        return _slot_refusal("Slot (row={row}, col={col}) is fixed now: its stage is closed.", r, c)
    if id is None or (isinstance(id, str) and not id):
        if state.grid[slot.cell] < 0:
            return _slot_refusal("Slot (row={row}, col={col}) is already empty.", r, c)
        item = -1
    else:
        found = slot.item_of_id.get(id if isinstance(id, str) else safe_repr(id))
        if found is None:
            return invalid(
                f"Slot (row={r}, col={c}) can only be set to one of its candidate ids. Allowed ids: {slot.allowed_ids_text}"
            )
        item = found
    state.place(s, item)
    shown = None if item < 0 else state.compiled.item_ids[item]
    message = "Hidden slot cleared." if item < 0 else "Hidden slot updated."
    return ok_reply({"row": r, "col": c, "id": shown, "message": message})


def get_current_grid_state(state: EpisodeState) -> ToolReply:
    """Return the full current grid state."""
    return ok_reply({"slots": state.texts.id_grid(state.grid)})


def get_hidden_slot_query_budget(state: EpisodeState, row: int, col: int) -> ToolReply:
    """Get the remaining attribute-query budget for one hidden slot.

    row: Row index as an integer.
    col: Column index as an integer.
    """
    hidden = _hidden(state, row, col, "Hidden-slot query budget is only available for hidden slots.")
    if isinstance(hidden, ToolReply):
        return hidden
    s, slot = hidden
    budget, calls = state.query_budgets[s], state.query_calls[s]
    return ok_reply(
        {
            "row": slot.row,
            "col": slot.col,
            "unlimited": budget is None,
            "query_budget": "unlimited" if budget is None else budget,
            "query_calls": calls,
            "remaining_queries": "unlimited" if budget is None else max(0, budget - calls),
        }
    )


def get_global_check_budget(state: EpisodeState) -> ToolReply:
    """Get the remaining global-check budget."""
    budget, calls = state.global_budget, state.global_calls
    return ok_reply(
        {
            "remaining_global_checks": None if budget is None else max(0, budget - calls),
            "global_check_budget": budget,
            "global_check_calls": calls,
        }
    )


def get_slot_id(state: EpisodeState, row: int, col: int) -> ToolReply:
    """Get the item id currently stored in a slot.

    row: Row index as an integer.
    col: Column index as an integer.
    """
    cell = _cell(state, row, col)
    if isinstance(cell, ToolReply):
        return cell
    r, c, _ = cell
    item = state.grid[r * state.compiled.cols + c]
    return ok_reply({"row": r, "col": c, "id": None if item < 0 else state.compiled.item_ids[item]})


def done(state: EpisodeState) -> ToolReply:
    """Call this function when you are done with the task."""
    return STOP_REPLY


# --------------------------------------------------------------------------------------------
# domain tools (``{title}`` is filled in per domain)


def query_candidate_from_attribute(
    state: EpisodeState, row: int, col: int, field: str, operator: Operator, value: str | int | float | list[str]
) -> ToolReply:
    """Filter current-slot {title} candidates by one attribute condition.

    row: Row index as an integer.
    col: Column index as an integer.
    field: One attribute name to filter on.
    operator: For numeric fields use one of `>`, `>=`, `=`, `<`, `<=`; for categorical fields use `in` or `not_in`.
    value: One numeric comparison value, or a string list for `in`/`not_in`.
    """
    hidden = _hidden(state, row, col, "Attribute candidate queries are only allowed for hidden slots.")
    if isinstance(hidden, ToolReply):
        return hidden
    s, slot = hidden
    budget = state.query_budgets[s]
    if budget is not None and state.query_calls[s] >= budget:
        return _slot_refusal(
            "Hidden slot query budget exhausted for slot (row={row}, col={col}). Remaining queries: 0.",
            slot.row,
            slot.col,
        )
    data = _query_data(state.compiled, state.texts, s, field, operator, value)
    if isinstance(data, ToolReply):  # a query refused for its arguments alone charges nothing
        return data
    state.query_calls[s] += 1
    remaining = None if budget is None else budget - state.query_calls[s]
    return ok_reply({**data, "remaining_budget": remaining}, Charge("query", (slot.row, slot.col)))


def _query_data(
    compiled: CompiledInstance, texts: InstanceTexts, s: int, field: Any, operator: Any, value: Any
) -> dict[str, Any] | ToolReply:
    """The query reply's data but its remaining budget, or the failed reply; it depends on the
    instance and the arguments alone."""
    if not isinstance(field, str) or not field.strip():
        return invalid("field must be a non-empty string")
    field = field.strip()
    allowed = compiled.domain.allowed_fields
    if field not in allowed:
        return invalid(f"unknown field: {echo(field)}. allowed fields: {', '.join(allowed)}")
    # only a str names an operator: anything else (an unhashable list, where the published release
    # raised) is refused without a lookup that would raise
    compare = OPERATORS.get(operator) if isinstance(operator, str) else None
    if compare is None:
        return invalid(f"operator must be one of: {_OPERATOR_LIST}")
    is_set_query = operator in ("in", "not_in")
    parsed = _parse_query_value(value, is_set_query)
    if isinstance(parsed, ToolReply):
        return parsed
    numeric = field in compiled.numeric
    if numeric and is_set_query:
        return invalid("numeric fields only support: >, >=, =, <, <=")
    if not numeric and not is_set_query:
        return invalid("categorical fields only support: in, not_in")
    if numeric and isinstance(parsed, str):
        return invalid("numeric comparisons require a numeric value")
    if isinstance(parsed, int) and parsed.bit_length() > 64:  # where the release would answer, echoing it
        return invalid("numeric comparison values must fit in 64 bits")
    values, objects = _query_matches(compiled, texts, s, field)
    if is_set_query:
        wanted = frozenset(parsed).__contains__
        selected = map(wanted, values) if operator == "in" else map(op.not_, map(wanted, values))
        shown = [valid_text(v) for v in parsed]
    else:
        selected = map(compare, values, repeat(parsed))
        shown = parsed
    slot = compiled.slots[s]
    return {
        "row": slot.row,
        "col": slot.col,
        "field": field,
        "operator": operator,
        "value": shown,
        "matches": list(compress(objects, selected)),
    }


def _parse_query_value(value: Any, is_set_query: bool) -> Any:
    """The query value as the published release reads it: a list of strings for ``in``/``not_in``;
    else a number, or a string that is not one (refused later, after the field-kind checks); or
    the failed reply.

    A set-query string is stripped (``str.strip``: every Unicode whitespace) before it is tested
    for a leading ``[`` and JSON-decoded; one that does not decode is kept whole, unstripped.
    """
    if is_set_query:
        if isinstance(value, str):
            stripped = value.strip()
            if stripped.startswith("["):
                try:
                    value = json.loads(stripped)
                except (ValueError, RecursionError):  # the release raises for the last two
                    value = [value]
            else:
                value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return invalid("value must be a string list for `in` or `not_in` queries")
        return value
    if isinstance(value, bool):
        return invalid("boolean values are not supported for attribute queries")
    if isinstance(value, str):
        try:
            return float(value) if "." in value else int(value)
        except ValueError:
            return value
    if isinstance(value, (int, float)):
        return value
    return invalid("value must be numeric for numeric comparisons, or a string list for `in`/`not_in`")


def _query_matches(
    compiled: CompiledInstance, texts: InstanceTexts, s: int, field: str
) -> tuple[tuple[Any, ...], tuple[dict[str, Any], ...]]:
    """The values of ``field`` of slot ``s``'s candidates and their match objects
    (``{"id": id, field: value}``), in stored order (kept per instance)."""
    found = texts.query_matches.get((s, field))
    if found is None:
        item_ids, candidates = compiled.item_ids, compiled.slots[s].candidate_items
        values = compiled.item_values(field, candidates)
        objects = [{"id": item_ids[i], field: v} for i, v in zip(candidates, values, strict=True)]
        found = texts.query_matches[(s, field)] = (tuple(values), tuple(objects))
    return found


def get_item_info(state: EpisodeState, id: str) -> ToolReply:
    """Return full {title} information for one id.

    id: Item id as a string; only ids visible in the initial grid are accessible.
    """
    if not isinstance(id, str):
        return invalid("id must be a string")
    compiled = state.compiled
    k = compiled.visible_items.get(id)
    if k is None:
        return invalid(f"Item id {echo(id)} is not accessible. You may only inspect ids from non-hidden slots.")
    return ok_reply({"id": id, "item": compiled.item(k)})


def get_item_attributes(state: EpisodeState, ids: list[str], field: str | list[str]) -> ToolReply:
    """Return selected attribute value(s) for a batch of {title} ids.

    ids: List of item ids as strings, up to the current task limit; only ids visible in the initial grid.
    field: Attribute name(s) to retrieve. A string for one attribute, or a list within the current task limit.
    """
    config, compiled = state.config, state.compiled
    if isinstance(ids, str):
        try:
            ids = json.loads(ids)
        except (ValueError, RecursionError):
            return invalid("ids string must be a valid JSON list")
    if not isinstance(ids, list):
        return invalid("ids must be a list")
    if not all(isinstance(i, str) for i in ids):
        return invalid("each element in ids must be a string")
    if len(ids) > config.max_query_ids:
        return invalid(f"ids can contain at most {config.max_query_ids} items")
    fields = _parse_fields(field)
    if isinstance(fields, ToolReply):
        return fields
    if len(fields) > config.max_query_fields:
        return invalid(f"field can specify at most {config.max_query_fields} attributes")
    visible = compiled.visible_items
    inaccessible = [i for i in ids if i not in visible]
    if inaccessible:
        return invalid(
            f"ids contain inaccessible item(s): {echo(', '.join(inaccessible))}. You may only inspect ids from non-hidden slots."
        )
    allowed = compiled.domain.allowed_fields
    unknown = [f for f in fields if f not in allowed]
    if unknown:
        return invalid(f"unknown field(s): {echo(', '.join(unknown))}. allowed fields: {', '.join(allowed)}")
    # the published payload, its values read from the compiled columns (as the query tool reads
    # them); an id or a field repeated is shown once, as a dict key
    shown_ids = list(dict.fromkeys(ids))
    items = [visible[i] for i in shown_ids]
    if len(fields) == 1:
        shown: dict[str, Any] = dict(zip(shown_ids, compiled.item_values(fields[0], items), strict=True))
    else:
        columns = {f: compiled.item_values(f, items) for f in fields}
        shown = {i: {f: column[n] for f, column in columns.items()} for n, i in enumerate(shown_ids)}
    return ok_reply({"fields": fields, "items": shown, "missing_ids": []})


def _parse_fields(field: Any) -> list[str] | ToolReply:
    """The attribute names ``field`` gives (stripped, none empty), or the failed reply."""
    if isinstance(field, str):
        stripped = field.strip()
        fields: Any = [stripped] if stripped else []
        if stripped.startswith("["):
            try:
                decoded = json.loads(stripped)
            except (ValueError, RecursionError):
                decoded = None
            if isinstance(decoded, list):
                fields = decoded
    elif isinstance(field, list):
        fields = field
    else:
        return invalid("field must be a string or a list of attribute names")
    if not all(isinstance(f, str) for f in fields):
        return invalid("each field must be a string")
    fields = [f.strip() for f in fields if f.strip()]
    if not fields:
        return invalid("field must specify at least one attribute name")
    return fields


def check_slot_constraints(state: EpisodeState, row: int, col: int) -> ToolReply:
    """Check whether a hidden slot satisfies its slot constraints.

    row: Row index as an integer.
    col: Column index as an integer.
    """
    hidden = _hidden(state, row, col, "Slot constraint checks are only allowed for hidden slots.")
    if isinstance(hidden, ToolReply):
        return hidden
    slot = hidden[1]
    item = state.grid[slot.cell]
    if item < 0:
        return _slot_refusal("Slot (row={row}, col={col}) has not been filled yet.", slot.row, slot.col)
    valid = item in slot.valid_items
    data: dict[str, Any] = {"is_valid": valid, "row": slot.row, "col": slot.col}
    if state.config.check_include_reason:
        data["reason"] = None if valid else slot_violation_reason(slot.row, slot.col)
    return ok_reply(data)


def check_global_constraints(state: EpisodeState) -> ToolReply:
    """Check whether the current {title} grid satisfies the global constraints."""
    if state.empty_cells:
        return invalid("The current grid must be fully filled before global constraints can be checked.")
    budget = state.global_budget
    if budget is not None and state.global_calls >= budget:
        return invalid(f"Global constraint check budget exhausted. Used {state.global_calls}/{budget} calls.")
    state.global_calls += 1
    reason = state.global_violation()
    data: dict[str, Any] = {"is_valid": reason is None}
    if state.config.check_include_reason:
        data["reason"] = reason
    return ok_reply(data, GLOBAL_CHECK_CHARGE)

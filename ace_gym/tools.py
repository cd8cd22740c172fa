"""The ACE tool set (docs/compatibility.md §3): one function per tool, the response envelope, the
dispatcher and the OpenAI tool schemas.

Every tool takes the mutable :class:`EpisodeState` first and the model's arguments as keywords,
and returns the response envelope already serialised exactly as the published benchmark sends it
to the model (``json.dumps(envelope, ensure_ascii=False)``). Checks run in the published order
with the published messages. The deliberate departures (inputs the release raises on, integers
beyond 64 bits, clipped echoes, schema details) are listed in one place: the "Departures from the
published release" section of :class:`ace_gym.envs.AceEnv`.
"""

from __future__ import annotations

import inspect
import json
import numbers
import operator as op
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from ace_gym.constraints import RunningTotals, slot_violation_reason
from ace_gym.domains import Domain
from ace_gym.errors import ConfigError
from ace_gym.instance import CompiledInstance, CompiledSlot

ECHO_LIMIT = 200
_SUCCESS = '{"status": "success", "messages": "Successfully executed tool", "data": '
STOP = '{"status": "success", "messages": "###STOP###", "data": {}}'
TOOL_CALL_FAILED = '{"status": "failed", "messages": "Tool call failed", "data": {}}'
INVALID = "Invalid tool arguments"
OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    ">": op.gt,
    ">=": op.ge,
    "=": op.eq,
    "<": op.lt,
    "<=": op.le,
    "in": op.contains,
    "not_in": op.contains,
}
_OPERATOR_LIST = ", ".join(OPERATORS)


MAX_GLOBAL_CHECK_ALPHA = 1e9  # larger (or infinite) values would overflow floor(alpha * H)


@dataclass(frozen=True)
class ToolConfig:
    """Budgets and limits, named as in the published benchmark (docs/compatibility.md §3.5).

    ``extra_query_num``: per-slot query budget = active rules + hidden slots + this; -1 unlimited.
    ``global_check_alpha``: global-check budget = floor(alpha * hidden slots); -1 or None unlimited.
    """

    extra_query_num: int = -1
    global_check_alpha: float | None = -1
    check_include_reason: bool = False
    max_query_ids: int = 5
    max_query_fields: int = 5

    def __post_init__(self) -> None:
        # numpy scalars (e.g. from a sweep) are accepted and stored as plain Python numbers
        set_field = object.__setattr__
        set_field(
            self, "extra_query_num", integer_option("extra_query_num", self.extra_query_num, -1, "(-1 = unlimited)")
        )
        alpha = self.global_check_alpha
        if alpha is not None:
            valid = (
                not isinstance(alpha, bool)
                and isinstance(alpha, numbers.Real)
                and (alpha == -1 or 0 <= alpha <= MAX_GLOBAL_CHECK_ALPHA)  # NaN fails both
            )
            if not valid:
                raise ConfigError(
                    "global_check_alpha",
                    alpha,
                    f"must be a number in [0, {MAX_GLOBAL_CHECK_ALPHA:g}], or -1/None for unlimited",
                )
            set_field(self, "global_check_alpha", int(alpha) if isinstance(alpha, numbers.Integral) else float(alpha))
        if not isinstance(self.check_include_reason, bool):
            raise ConfigError("check_include_reason", self.check_include_reason, "must be a bool")
        for name in ("max_query_ids", "max_query_fields"):
            set_field(self, name, integer_option(name, getattr(self, name), 1))

    def query_budget(self, rule_count: int, hidden_slots: int) -> int | None:
        """Attribute queries allowed on one hidden slot; None = unlimited."""
        return None if self.extra_query_num == -1 else rule_count + hidden_slots + self.extra_query_num

    def global_check_budget(self, hidden_slots: int) -> int | None:
        """Global checks allowed per episode; None = unlimited."""
        alpha = self.global_check_alpha
        return None if alpha is None or alpha == -1 else max(0, int(alpha * hidden_slots))


def integer_option(field: str, value: Any, minimum: int, note: str = "") -> int:
    """``value`` as a plain int if it is an integer (bool excluded) >= ``minimum``, else ConfigError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ConfigError(field, value, f"must be an integer >= {minimum}{' ' + note if note else ''}")
    return int(value)


class EpisodeState:
    """The mutable state of one episode on one compiled instance (never shared between envs)."""

    __slots__ = (
        "compiled",
        "config",
        "empty_cells",
        "global_budget",
        "global_calls",
        "grid",
        "invalid_slots",
        "query_budgets",
        "query_calls",
        "revealed",
        "totals",
        "writable",
    )

    def __init__(self, compiled: CompiledInstance, config: ToolConfig) -> None:
        self.compiled = compiled
        self.config = config
        # the hidden slots the tools may touch (None = all): a staged scenario reveals slots stage
        # by stage and fixes a stage's slots once it closes
        self.revealed: frozenset[int] | None = None
        self.writable: frozenset[int] | None = None
        self.grid: list[int] = list(compiled.initial_grid)
        self.empty_cells = compiled.hidden_count
        self.invalid_slots: set[int] = set()
        self.query_calls = [0] * compiled.hidden_count
        self.query_budgets = [config.query_budget(s.rule_count, compiled.hidden_count) for s in compiled.slots]
        self.global_calls = 0
        self.global_budget = config.global_check_budget(compiled.hidden_count)
        self.totals = RunningTotals(compiled.global_rules, compiled.cols)
        for cell, item in enumerate(self.grid):
            if item >= 0:
                self.totals.add(cell, item)

    def place(self, slot_index: int, item: int) -> None:
        """Put ``item`` (-1 to clear) into hidden slot ``slot_index``, keeping totals current."""
        slot = self.compiled.slots[slot_index]
        old = self.grid[slot.cell]
        if old >= 0:
            self.totals.remove(slot.cell, old)
            self.empty_cells += 1
        self.grid[slot.cell] = item
        if item >= 0:
            self.totals.add(slot.cell, item)
            self.empty_cells -= 1
        if item < 0 or item in slot.valid_items:
            self.invalid_slots.discard(slot_index)
        else:
            self.invalid_slots.add(slot_index)

    def global_violation(self) -> str | None:
        """First failure of the global validator on the current (complete) grid, or None."""
        if self.invalid_slots:
            slot = self.compiled.slots[min(self.invalid_slots)]
            return slot_violation_reason(slot.row, slot.col)
        return self.totals.first_violation(complete=True)


class _ToolError(Exception):
    """Raised inside a tool to return ``Invalid tool arguments, <detail>``; never escapes."""


# --------------------------------------------------------------------------------------------
# envelopes and argument coercion


# ``json.dumps(value, ensure_ascii=False)`` builds a new encoder on every call (it only caches the
# default one); the bound method of one encoder gives the same text several times faster.
_dumps: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False).encode
_OPERATOR_JSON = {name: _dumps(name) for name in OPERATORS}


class _Texts:
    """Serialised pieces of one compiled instance, built on first use and shared read-only.

    ``cell_json[i]`` is item ``i``'s id as JSON, and ``cell_json[-1]`` is ``null`` so that a grid
    cell (-1 = empty) indexes it directly; ``item_json`` holds full item dicts as JSON,
    ``attribute_json`` their fields one by one, and ``query_columns`` the per-(slot, field)
    candidate values and match objects of the query tool (all filled lazily).
    """

    __slots__ = ("attribute_json", "cell_json", "field_json", "item_json", "query_columns")

    def __init__(self, compiled: CompiledInstance) -> None:
        self.cell_json: tuple[str, ...] = (*(_dumps(i) for i in compiled.item_ids), "null")
        self.field_json: dict[str, str] = {field: _dumps(field) for field in compiled.allowed_fields}
        self.item_json: dict[int, str] = {}
        self.query_columns: dict[tuple[int, str], tuple[tuple[Any, str], ...]] = {}
        self.attribute_json: dict[int, tuple[dict[str, str], dict[str, str]]] = {}

    def attributes(self, compiled: CompiledInstance, item: int) -> tuple[dict[str, str], dict[str, str]]:
        """Item ``item``'s fields as JSON values (``field -> value``) and pairs (``field -> '"field": value'``)."""
        found = self.attribute_json.get(item)
        if found is None:
            values = {f: _dumps(v) for f, v in compiled.items[item].items()}
            pairs = {f: f"{_dumps(f)}: {v}" for f, v in values.items()}
            found = self.attribute_json[item] = (values, pairs)
        return found


def _texts(compiled: CompiledInstance) -> _Texts:
    found: _Texts | None = compiled.__dict__.get("_tool_texts")
    if found is None:
        found = compiled.__dict__.setdefault("_tool_texts", _Texts(compiled))
    return found


def success(data_json: str) -> str:
    """A success envelope around already-serialised ``data``."""
    return _SUCCESS + data_json + "}"


def failure(message: str) -> str:
    """A failed envelope with the full message (``"<ErrorType>, <detail>"``)."""
    return '{"status": "failed", "messages": ' + _dumps(message) + ', "data": {}}'


def echo(text: object) -> str:
    """A model-supplied value for an error message, clipped to :data:`ECHO_LIMIT` characters."""
    text = text if isinstance(text, str) else _safe_repr(text)
    return valid_text(text if len(text) <= ECHO_LIMIT else f"{text[:ECHO_LIMIT]}...[{len(text)} chars]")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so that it encodes as UTF-8.

    JSON arguments may spell a lone surrogate as an escape (``"\\ud800"``); echoed back raw it
    would make the observation unencodable for a tokenizer.
    """
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


def _safe_repr(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<{value.bit_length()}-bit integer>"
    try:
        return str(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__}>"


def _invalid_slot(row: int, col: int) -> _ToolError:
    return _ToolError(f"Invalid slot (row={_safe_repr(row)}, col={_safe_repr(col)})")


def _cell(state: EpisodeState, row: Any, col: Any) -> tuple[int, int, int]:
    """Convert and range-check a cell; returns (row, col, hidden slot index or -1)."""
    try:
        r, c = int(row), int(col)
    except (TypeError, ValueError, OverflowError):
        raise _ToolError("row and col must be integers") from None
    compiled = state.compiled
    if not (0 <= r < compiled.rows and 0 <= c < compiled.cols):
        raise _invalid_slot(r, c)
    return r, c, compiled.cell_slot_list[r * compiled.cols + c]


def _hidden(state: EpisodeState, row: Any, col: Any, visible_message: str) -> tuple[int, CompiledSlot]:
    r, c, s = _cell(state, row, col)
    if s < 0:
        raise _ToolError(visible_message)
    _check_revealed(state, s, r, c)
    return s, state.compiled.slots[s]


def _check_revealed(state: EpisodeState, s: int, row: int, col: int) -> None:
    if state.revealed is not None and s not in state.revealed:
        raise _ToolError(f"Slot (row={row}, col={col}) is not revealed yet: it belongs to a later stage.")


# --------------------------------------------------------------------------------------------
# common tools


def set_slot(state: EpisodeState, row: int, col: int, id: str | None = None) -> str:
    """Fill or clear a specific slot.

    row: Row index as an integer.
    col: Column index as an integer.
    id: Item id as a string. Pass null or an empty string to clear the slot.
    """
    r, c, s = _cell(state, row, col)
    if s < 0:
        raise _ToolError(f"Slot (row={r}, col={c}) is fixed and cannot be modified")
    _check_revealed(state, s, r, c)
    if state.writable is not None and s not in state.writable:
        raise _ToolError(f"Slot (row={r}, col={c}) is fixed now: its stage is closed.")
    slot = state.compiled.slots[s]
    if id is None or (isinstance(id, str) and not id):
        if state.grid[slot.cell] < 0:
            raise _ToolError(f"Slot (row={r}, col={c}) is already empty.")
        state.place(s, -1)
        return success(f'{{"row": {r}, "col": {c}, "id": null, "message": "Hidden slot cleared."}}')
    item_id = id if isinstance(id, str) else _safe_repr(id)
    item = slot.item_of_id.get(item_id)
    if item is None:
        raise _ToolError(
            f"Slot (row={r}, col={c}) can only be set to one of its candidate ids. Allowed ids: {slot.allowed_ids_text}"
        )
    state.place(s, item)
    shown = _texts(state.compiled).cell_json[item]
    return success(f'{{"row": {r}, "col": {c}, "id": {shown}, "message": "Hidden slot updated."}}')


def get_current_grid_state(state: EpisodeState) -> str:
    """Return the full current grid state."""
    cell_json = _texts(state.compiled).cell_json
    cols = state.compiled.cols
    cells = [cell_json[i] for i in state.grid]
    rows = ["[" + ", ".join(cells[k : k + cols]) + "]" for k in range(0, len(cells), cols)]
    return success('{"slots": [' + ", ".join(rows) + "]}")


def get_hidden_slot_query_budget(state: EpisodeState, row: int, col: int) -> str:
    """Get the remaining attribute-query budget for one hidden slot.

    row: Row index as an integer.
    col: Column index as an integer.
    """
    s, slot = _hidden(state, row, col, "Hidden-slot query budget is only available for hidden slots.")
    budget, calls = state.query_budgets[s], state.query_calls[s]
    if budget is None:
        rest = (
            f'"unlimited": true, "query_budget": "unlimited", "query_calls": {calls}, "remaining_queries": "unlimited"'
        )
    else:
        rest = (
            f'"unlimited": false, "query_budget": {budget}, "query_calls": {calls}, '
            f'"remaining_queries": {max(0, budget - calls)}'
        )
    return success(f'{{"row": {slot.row}, "col": {slot.col}, {rest}}}')


def get_global_check_budget(state: EpisodeState) -> str:
    """Get the remaining global-check budget."""
    budget, calls = state.global_budget, state.global_calls
    if budget is None:
        return success(
            f'{{"remaining_global_checks": null, "global_check_budget": null, "global_check_calls": {calls}}}'
        )
    return success(
        f'{{"remaining_global_checks": {max(0, budget - calls)}, "global_check_budget": {budget}, '
        f'"global_check_calls": {calls}}}'
    )


def get_slot_id(state: EpisodeState, row: int, col: int) -> str:
    """Get the item id currently stored in a slot.

    row: Row index as an integer.
    col: Column index as an integer.
    """
    r, c, _ = _cell(state, row, col)
    shown = _texts(state.compiled).cell_json[state.grid[r * state.compiled.cols + c]]
    return success(f'{{"row": {r}, "col": {c}, "id": {shown}}}')


def done(state: EpisodeState) -> str:
    """Call this function when you are done with the task."""
    return STOP


# --------------------------------------------------------------------------------------------
# domain tools ({noun} and {title} are filled in per domain)


def query_candidate_from_attribute(
    state: EpisodeState, row: int, col: int, field: str, operator: str, value: str | int | float | list[str]
) -> str:
    """Filter current-slot {title} candidates by one attribute condition.

    row: Row index as an integer.
    col: Column index as an integer.
    field: One attribute name to filter on.
    operator: For numeric fields use one of `>`, `>=`, `=`, `<`, `<=`; for categorical fields use `in` or `not_in`.
    value: One numeric comparison value, or a string list for `in`/`not_in`.
    """
    s, slot = _hidden(state, row, col, "Attribute candidate queries are only allowed for hidden slots.")
    budget = state.query_budgets[s]
    if budget is not None and state.query_calls[s] >= budget:
        raise _ToolError(
            f"Hidden slot query budget exhausted for slot (row={slot.row}, col={slot.col}). Remaining queries: 0."
        )
    if not isinstance(field, str) or not field.strip():
        raise _ToolError("field must be a non-empty string")
    field = field.strip()
    compiled = state.compiled
    if field not in compiled.allowed_fields:
        raise _ToolError(f"unknown field: {echo(field)}. allowed fields: {', '.join(compiled.allowed_fields)}")
    try:
        compare = OPERATORS.get(operator)  # type: ignore[call-overload]
    except TypeError:  # unhashable operator: the published release raised here
        compare = None
    if compare is None:
        raise _ToolError(f"operator must be one of: {_OPERATOR_LIST}")
    is_set_query = operator in ("in", "not_in")
    parsed = _parse_query_value(value, is_set_query)
    numeric = field in compiled.numeric
    if numeric and is_set_query:
        raise _ToolError("numeric fields only support: >, >=, =, <, <=")
    if not numeric and not is_set_query:
        raise _ToolError("categorical fields only support: in, not_in")
    if numeric and isinstance(parsed, str):
        raise _ToolError("numeric comparisons require a numeric value")
    if isinstance(parsed, int) and parsed.bit_length() > 64:  # where the release would answer, echoing it
        raise _ToolError("numeric comparison values must fit in 64 bits")
    texts = _texts(compiled)
    column = _query_column(compiled, texts, s, field)
    if is_set_query:
        wanted = frozenset(parsed)  # type: ignore[arg-type]
        if operator == "in":
            matches = [f for v, f in column if v in wanted]
        else:
            matches = [f for v, f in column if v not in wanted]
    else:
        matches = [f for v, f in column if compare(v, parsed)]
    state.query_calls[s] += 1
    remaining = "null" if budget is None else str(budget - state.query_calls[s])
    if is_set_query:
        shown = valid_text("[" + ", ".join(map(_dumps, parsed)) + "]")
    else:
        shown = str(parsed) if type(parsed) is int else _dumps(parsed)
    return success(
        f'{{"row": {slot.row}, "col": {slot.col}, "field": {texts.field_json[field]}, '
        f'"operator": {_OPERATOR_JSON[operator]}, "value": {shown}, "matches": [{", ".join(matches)}], '
        f'"remaining_budget": {remaining}}}'
    )


def _parse_query_value(value: Any, is_set_query: bool) -> Any:
    """The query value as the published release reads it: a list of strings for ``in``/``not_in``;
    else a number, or a string that is not one (refused later, after the field-kind checks).

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
            raise _ToolError("value must be a string list for `in` or `not_in` queries")
        return value
    if isinstance(value, bool):
        raise _ToolError("boolean values are not supported for attribute queries")
    if isinstance(value, str):
        try:
            return float(value) if "." in value else int(value)
        except ValueError:
            return value
    if isinstance(value, (int, float)):
        return value
    raise _ToolError("value must be numeric for numeric comparisons, or a string list for `in`/`not_in`")


def _query_column(compiled: CompiledInstance, texts: _Texts, s: int, field: str) -> tuple[tuple[Any, str], ...]:
    """(value of ``field``, serialised match object) per candidate of slot ``s``, in stored order (cached)."""
    found = texts.query_columns.get((s, field))
    if found is None:
        slot = compiled.slots[s]
        key = texts.field_json[field]
        found = tuple(
            (compiled.items[i][field], f'{{"id": {texts.cell_json[i]}, {key}: {_dumps(compiled.items[i][field])}}}')
            for i in slot.candidate_items
        )
        texts.query_columns[(s, field)] = found
    return found


def get_item_info(state: EpisodeState, id: str) -> str:
    """Return full {title} information for one id.

    id: Item id as a string; only ids visible in the initial grid are accessible.
    """
    if not isinstance(id, str):
        raise _ToolError("id must be a string")
    compiled = state.compiled
    if id not in compiled.visible_ids:
        raise _ToolError(f"Item id {echo(id)} is not accessible. You may only inspect ids from non-hidden slots.")
    k = compiled.item_index[id]
    texts = _texts(compiled)
    item_json = texts.item_json.get(k)
    if item_json is None:
        item_json = texts.item_json[k] = _dumps(compiled.items[k])
    return success(f'{{"id": {texts.cell_json[k]}, "item": {item_json}}}')


def get_item_attributes(state: EpisodeState, ids: list[str], field: str | list[str]) -> str:
    """Return selected attribute value(s) for a batch of {title} ids.

    ids: List of item ids as strings, up to the current task limit; only ids visible in the initial grid.
    field: Attribute name(s) to retrieve. A string for one attribute, or a list within the current task limit.
    """
    config, compiled = state.config, state.compiled
    if isinstance(ids, str):
        try:
            ids = json.loads(ids)
        except (ValueError, RecursionError):
            raise _ToolError("ids string must be a valid JSON list") from None
    if not isinstance(ids, list):
        raise _ToolError("ids must be a list")
    if not all(isinstance(i, str) for i in ids):
        raise _ToolError("each element in ids must be a string")
    if len(ids) > config.max_query_ids:
        raise _ToolError(f"ids can contain at most {config.max_query_ids} items")
    fields = _parse_fields(field)
    if len(fields) > config.max_query_fields:
        raise _ToolError(f"field can specify at most {config.max_query_fields} attributes")
    inaccessible = [i for i in ids if i not in compiled.visible_ids]
    if inaccessible:
        raise _ToolError(
            f"ids contain inaccessible item(s): {echo(', '.join(inaccessible))}. You may only inspect ids from non-hidden slots."
        )
    unknown = [f for f in fields if f not in compiled.allowed_fields]
    if unknown:
        raise _ToolError(
            f"unknown field(s): {echo(', '.join(unknown))}. allowed fields: {', '.join(compiled.allowed_fields)}"
        )
    # serialised by hand from cached pieces; the same text as json.dumps of the published dict
    texts = _texts(compiled)
    entries = []
    unique_fields = list(dict.fromkeys(fields))  # duplicates collapse in the payload, as dict keys did
    for item_id in dict.fromkeys(ids):
        k = compiled.item_index[item_id]
        values, pairs = texts.attributes(compiled, k)
        if len(fields) == 1:
            shown = values[fields[0]]
        else:
            shown = "{" + ", ".join([pairs[f] for f in unique_fields]) + "}"
        entries.append(f"{texts.cell_json[k]}: {shown}")
    field_list = ", ".join([texts.field_json[f] for f in fields])
    return success(f'{{"fields": [{field_list}], "items": {{{", ".join(entries)}}}, "missing_ids": []}}')


def _parse_fields(field: Any) -> list[str]:
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
        raise _ToolError("field must be a string or a list of attribute names")
    if not all(isinstance(f, str) for f in fields):
        raise _ToolError("each field must be a string")
    fields = [f.strip() for f in fields if f.strip()]
    if not fields:
        raise _ToolError("field must specify at least one attribute name")
    return fields


def check_slot_constraints(state: EpisodeState, row: int, col: int) -> str:
    """Check whether a hidden slot satisfies its slot constraints.

    row: Row index as an integer.
    col: Column index as an integer.
    """
    _s, slot = _hidden(state, row, col, "Slot constraint checks are only allowed for hidden slots.")
    item = state.grid[slot.cell]
    if item < 0:
        raise _ToolError(f"Slot (row={slot.row}, col={slot.col}) has not been filled yet.")
    valid = item in slot.valid_items
    head = f'{{"is_valid": {"true" if valid else "false"}, "row": {slot.row}, "col": {slot.col}'
    if not state.config.check_include_reason:
        return success(head + "}")
    reason = "null" if valid else _dumps(slot_violation_reason(slot.row, slot.col))
    return success(f'{head}, "reason": {reason}}}')


def check_global_constraints(state: EpisodeState) -> str:
    """Check whether the current {title} grid satisfies the global constraints."""
    if state.empty_cells:
        raise _ToolError("The current grid must be fully filled before global constraints can be checked.")
    budget = state.global_budget
    if budget is not None and state.global_calls >= budget:
        raise _ToolError(f"Global constraint check budget exhausted. Used {state.global_calls}/{budget} calls.")
    state.global_calls += 1
    reason = state.global_violation()
    valid = "true" if reason is None else "false"
    if not state.config.check_include_reason:
        return success(f'{{"is_valid": {valid}}}')
    return success(f'{{"is_valid": {valid}, "reason": {"null" if reason is None else _dumps(reason)}}}')


# --------------------------------------------------------------------------------------------
# the tool set of a domain, dispatch and schemas

COMMON_TOOLS: tuple[Callable[..., str], ...] = (
    set_slot,
    get_current_grid_state,
    get_hidden_slot_query_budget,
    get_global_check_budget,
    get_slot_id,
    done,
)
DOMAIN_TOOL_NAMES: dict[Callable[..., str], str] = {
    query_candidate_from_attribute: "query_{noun}_candidate_from_attribute",
    get_item_info: "get_{noun}_item_info",
    get_item_attributes: "get_{noun}_item_attributes",
    check_slot_constraints: "check_{noun}_slot_constraints",
    check_global_constraints: "check_{noun}_global_constraints",
}


@dataclass(frozen=True)
class Tool:
    """One tool bound to a domain: its public name, function, parameters and schema."""

    name: str
    function: Callable[..., str]
    parameters: tuple[str, ...]
    accepted: frozenset[str]  # the parameters, as a set
    required: frozenset[str]
    schema: dict[str, Any]


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    summary, _, rest = inspect.cleandoc(doc).partition("\n\n")
    params = {}
    for line in rest.splitlines():
        name, sep, text = line.partition(": ")
        if sep:
            params[name.strip()] = text.strip()
    return summary.strip(), params


def _make_tool(name: str, function: Callable[..., str], domain: Domain) -> Tool:
    signature = inspect.signature(function)
    summary, docs = _parse_docstring((function.__doc__ or "").format(noun=domain.tool_noun, title=domain.tool_title))
    parameters = [p for p in signature.parameters.values() if p.name != "state"]
    properties: dict[str, Any] = {}
    hints = inspect.get_annotations(function, eval_str=True)
    for p in parameters:
        schema = TypeAdapter(hints[p.name]).json_schema()
        schema["description"] = docs[p.name]
        if p.default is not inspect.Parameter.empty:
            schema["default"] = p.default
        properties[p.name] = schema
    if "operator" in properties:
        properties["operator"]["enum"] = list(OPERATORS)
    required = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    schema = {
        "type": "function",
        "function": {
            "name": name,
            "description": summary,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }
    names = tuple(p.name for p in parameters)
    return Tool(name, function, names, frozenset(names), frozenset(required), schema)


class ToolSet:
    """The 11 tools of one domain (6 common + 5 domain tools), by public name."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        tools = [_make_tool(f.__name__, f, domain) for f in COMMON_TOOLS]
        tools += [
            _make_tool(pattern.format(noun=domain.tool_noun), f, domain) for f, pattern in DOMAIN_TOOL_NAMES.items()
        ]
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.names: tuple[str, ...] = tuple(self.tools)
        self.schemas: list[dict[str, Any]] = [t.schema for t in tools]
        self._schemas_json = json.dumps(self.schemas)

    def schema_copies(self) -> list[dict[str, Any]]:
        """Fresh copies of :attr:`schemas` that the caller may change (faster than a deepcopy)."""
        copies: list[dict[str, Any]] = json.loads(self._schemas_json)
        return copies

    def call(self, state: EpisodeState, name: Any, arguments: Any) -> str:
        """Run one tool call and return the serialised envelope. Never raises for bad input:
        unknown names, non-object or missing arguments and bad values become failed envelopes."""
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return failure(f"Unknown tool, '{echo(name)}' for domain '{self.domain.name}'")
        if type(arguments) is not dict:  # the common case skips the coercions below
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except (ValueError, RecursionError) as error:
                    return failure(f"{INVALID}, arguments are not valid JSON ({echo(str(error))})")
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, Mapping):
                return failure(f"{INVALID}, arguments must be a JSON object, got {type(arguments).__name__}")
        if arguments.keys() <= tool.accepted:
            kwargs = arguments
        else:  # extra arguments are ignored, as the published tools' **kwargs did
            kwargs = {p: arguments[p] for p in tool.parameters if p in arguments}
        if not kwargs.keys() >= tool.required:
            names = ", ".join(p for p in tool.parameters if p in tool.required and p not in kwargs)
            return failure(f"{INVALID}, missing required argument(s): {names}")
        try:
            return tool.function(state, **kwargs)
        except _ToolError as error:
            return failure(f"{INVALID}, {error}")


_TOOLSETS: dict[str, ToolSet] = {}


def toolset(domain: Domain) -> ToolSet:
    """The (immutable, shared) tool set of ``domain``."""
    found = _TOOLSETS.get(domain.name)
    if found is None:
        found = _TOOLSETS[domain.name] = ToolSet(domain)
    return found

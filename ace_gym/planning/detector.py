"""The rule-based E1-E6 detector: which planning errors one ACE action makes, given what the agent
has observed so far.

:func:`detect_errors` judges an action *before* it runs, from the episode's
:class:`~ace_gym.planning.knowledge.TaskFacts` and the agent's
:class:`~ace_gym.planning.knowledge.Knowledge`; it never executes anything. A call that the tools
would refuse gets one flag for the first fault found, in the tools' own order (unknown tool, bad
arguments, the cell, then the tool's own arguments); a call that would run may still get the
flags of what it does wrong (an id never observed for that slot, an id that breaks the slot's
rules, a question already answered...). :class:`ErrorTracker` runs the detector over an episode,
observing each executed call. The causes and codes are listed in :mod:`ace_gym.planning.taxonomy`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

from ace_gym.planning.knowledge import (
    Cell,
    Knowledge,
    TaskFacts,
    ToolEntry,
    call_key,
    decode_arguments,
    json_argument,
    split_action,
)
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS, Flag
from ace_gym.tools import OPERATORS, ToolReply, echo

SET_OPERATORS = frozenset({"in", "not_in"})


class Fault(Exception):
    """One flag that stops the judgement of a call (the tools would refuse it)."""

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(detail)
        self.flag = Flag(cause, detail)


def detect_errors(facts: TaskFacts, knowledge: Knowledge, action: Any) -> tuple[Flag, ...]:
    """The flags of ``action`` taken after what ``knowledge`` holds (empty: a correct action).

    Never raises for any action: whatever the model sent is judged.
    """
    try:
        entry, arguments = resolve_call(facts, action)
        if entry.name in facts.broken and entry.name in knowledge.failed_tools:
            raise Fault("broken_retry", f"{entry.name} already failed persistently")
        return tuple(_JUDGES[entry.kind](facts, knowledge, entry, arguments))
    except Fault as fault:
        return (fault.flag,)


def resolve_call(facts: TaskFacts, action: Any) -> tuple[ToolEntry, dict[Any, Any]]:
    """The offered tool an action calls and its arguments under the tool's original parameter
    names; Fault when it is no call, names no offered tool or a distractor, or its arguments are
    not an object or lack a required parameter."""
    name, raw = split_action(action)
    if not isinstance(name, str):
        raise Fault("malformed_action", "the action is not a tool call")
    entry = facts.tools.get(name)
    if entry is None:
        raise Fault("unknown_tool", f"no tool is called {echo(name)}")
    if entry.kind == "distractor":
        raise Fault("distractor_tool", f"{name} does nothing for this task")
    arguments = decode_arguments(raw)
    if arguments is None:
        raise Fault("bad_arguments", "arguments are not a JSON object")
    arguments = {entry.renamed.get(key, key) if isinstance(key, str) else key: v for key, v in arguments.items()}
    missing = [p for p in entry.parameters if p in entry.required and entry.renamed.get(p, p) not in arguments]
    if missing:
        raise Fault("missing_argument", f"missing required argument(s): {', '.join(missing)}")
    return entry, arguments


# -- shared argument checks ----------------------------------------------------------------------


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def cell_of(facts: TaskFacts, arguments: Mapping[str, Any]) -> Cell:
    row, col = _integer(arguments.get("row")), _integer(arguments.get("col"))
    if row is None or col is None:
        raise Fault("wrong_type", "row and col must be integers")
    if not (0 <= row < facts.rows and 0 <= col < facts.cols):
        raise Fault("cell_off_grid", f"cell ({echo(row)}, {echo(col)}) is off the {facts.rows}x{facts.cols} grid")
    return row, col


def hidden_cell(facts: TaskFacts, arguments: Mapping[str, Any], what: str) -> Cell:
    cell = cell_of(facts, arguments)
    if cell not in facts.hidden:
        raise Fault("prefilled_cell", f"{what} on the pre-filled cell {cell}")
    return cell


def _repeat(knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any], state_free: bool) -> list[Flag]:
    """E4 when the same call was answered before (``state_free``: its answer cannot change; else
    only when nothing changed since)."""
    answered = knowledge.answered.get(call_key(entry.name, arguments))
    if answered is not None and (state_free or answered == knowledge.version):
        return [Flag("repeated_call", f"{entry.name} was already answered with these arguments")]
    return []


def _item_ids(facts: TaskFacts, ids: list[Any]) -> None:
    """E6 for ids that exist nowhere, E3 for hidden candidates the item tools may not inspect."""
    unknown = [i for i in ids if i not in facts.item_ids]
    if unknown:
        raise Fault("unknown_item", f"no item is called {echo(', '.join(unknown))}")
    hidden = [i for i in ids if i not in facts.visible_ids]
    if hidden:
        raise Fault(
            "data_access", f"{echo(', '.join(hidden))} are not pre-filled ids; the item tools may not inspect them"
        )


def _field(facts: TaskFacts, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Fault("wrong_type", "field must be a non-empty string")
    if value.strip() not in facts.fields:
        raise Fault("unknown_field", f"no attribute is called {echo(value)}")
    return value.strip()


def check_condition(facts: TaskFacts, field: Any, operator: Any, value: Any) -> None:
    """The checks of one attribute condition (field, operator, value), in the query tool's order."""
    name = _field(facts, field)
    if not isinstance(operator, str) or operator not in OPERATORS:
        raise Fault("bad_operator", f"operator must be one of {', '.join(OPERATORS)}")
    numeric = name in facts.numeric_fields
    if numeric == (operator in SET_OPERATORS):
        raise Fault(
            "bad_operator", f"{operator} does not apply to the {'numeric' if numeric else 'categorical'} field {name}"
        )
    if operator in SET_OPERATORS:
        if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
            raise Fault("wrong_type", "in/not_in take a list of strings")
    elif not _is_number(value):
        raise Fault("wrong_type", "numeric comparisons take a number")


def _is_number(value: Any) -> bool:
    """Whether the query tool reads ``value`` as a comparison number (a string is read as a float
    when it holds a point, else as an int; integers beyond 64 bits are refused)."""
    if isinstance(value, str):
        try:
            value = float(value) if "." in value else int(value)
        except ValueError:
            return False
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return not isinstance(value, numbers.Integral) or int(value).bit_length() <= 64


# -- one judge per tool kind --------------------------------------------------------------------


def _set_slot(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    cell = hidden_cell(facts, arguments, "set_slot")
    item = arguments.get("id")
    if item is None or item == "":
        if knowledge.grid.get(cell) is None:
            raise Fault("clear_empty", f"cell {cell} is already empty")
        return []
    if not isinstance(item, str):
        raise Fault("wrong_type", "id must be a string")
    if item not in facts.item_ids:
        raise Fault("unknown_item", f"no item is called {echo(item)}")
    flags = []
    if item in facts.unapprovable:
        flags.append(Flag("policy_breach", f"cell {cell} was set without the approval the task policy requires"))
    if item not in knowledge.observed.get(cell, ()):
        flags.append(Flag("unobserved_id", f"{item} was never returned as a candidate of cell {cell}"))
    if item not in facts.slot_valid[cell]:
        flags.append(Flag("slot_rule_violation", f"{item} breaks the rules of cell {cell}"))
    return flags


def _query(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    cell = hidden_cell(facts, arguments, "a candidate query")
    _within_query_budget(facts, knowledge, cell, 1)
    check_condition(facts, arguments.get("field"), arguments.get("operator"), arguments.get("value"))
    return _repeat(knowledge, entry, arguments, state_free=True)


def _multi_query(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    cell = hidden_cell(facts, arguments, "a candidate query")
    conditions = arguments.get("conditions")
    if not isinstance(conditions, list) or not conditions or not all(isinstance(c, Mapping) for c in conditions):
        raise Fault("wrong_type", "conditions must be a non-empty list of {field, operator, value} objects")
    _within_query_budget(facts, knowledge, cell, len(conditions))
    for condition in conditions:
        check_condition(facts, condition.get("field"), condition.get("operator"), condition.get("value"))
    return _repeat(knowledge, entry, arguments, state_free=True)


def _within_query_budget(facts: TaskFacts, knowledge: Knowledge, cell: Cell, charge: int) -> None:
    budget = facts.query_budgets.get(cell)
    if budget is not None and knowledge.query_calls.get(cell, 0) + charge > budget:
        raise Fault("budget_exceeded", f"the query budget of cell {cell} is spent")


def _info(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    item = arguments.get("id")
    if not isinstance(item, str):
        raise Fault("wrong_type", "id must be a string")
    _item_ids(facts, [item])
    return _repeat(knowledge, entry, arguments, state_free=True)


def _attributes(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    ids = arguments.get("ids")
    if isinstance(ids, str):
        ids = json_argument(ids)
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise Fault("wrong_type", "ids must be a list of strings")
    if len(ids) > facts.max_query_ids:
        raise Fault("too_many", f"at most {facts.max_query_ids} ids per call")
    fields = arguments.get("field")
    if isinstance(fields, str):
        fields = json_argument(fields) if fields.strip().startswith("[") else [fields]
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f.strip() for f in fields):
        raise Fault("wrong_type", "field must be an attribute name or a list of them")
    if len(fields) > facts.max_query_fields:
        raise Fault("too_many", f"at most {facts.max_query_fields} fields per call")
    _item_ids(facts, ids)
    for name in fields:
        _field(facts, name)
    return _repeat(knowledge, entry, arguments, state_free=True)


def _slot_check(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    cell = hidden_cell(facts, arguments, "a slot check")
    if knowledge.grid.get(cell) is None:
        raise Fault("unfilled_check", f"cell {cell} is not filled yet")
    return _repeat(knowledge, entry, arguments, state_free=False)


def _global_check(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    if knowledge.empty_cells:
        raise Fault("unfilled_check", f"{len(knowledge.empty_cells)} hidden cell(s) are still empty")
    if facts.global_budget is not None and knowledge.global_calls >= facts.global_budget:
        raise Fault("budget_exceeded", "the global-check budget is spent")
    return _repeat(knowledge, entry, {}, state_free=False)


def _query_budget(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    cell = cell_of(facts, arguments)
    if cell not in facts.hidden:
        raise Fault("not_hidden", f"cell {cell} is pre-filled and has no query budget")
    return _repeat(knowledge, entry, arguments, state_free=False)


def _slot_id(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    cell_of(facts, arguments)
    return _repeat(knowledge, entry, arguments, state_free=False)


def _state_read(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    return _repeat(knowledge, entry, {}, state_free=False)


def _done(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    if facts.solvable is False:
        return [Flag("completed_unsolvable", "the task cannot be done; it should be reported as infeasible")]
    if knowledge.empty_cells:
        return [Flag("empty_slots", f"{len(knowledge.empty_cells)} hidden cell(s) are still empty")]
    verdict = knowledge.verified()
    if verdict is False:
        return [Flag("ignored_result", "the global check said this grid breaks a rule")]
    checks_left = facts.global_budget is None or knowledge.global_calls < facts.global_budget
    if verdict is None and checks_left:
        return [Flag("unverified_done", "the grid was never checked although global checks remain")]
    return []


def _refusal(facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]) -> list[Flag]:
    code = arguments.get("reason_code")
    if not isinstance(code, str) or code not in UNSOLVABLE_KINDS:
        raise Fault("wrong_type", f"reason_code must be one of {', '.join(UNSOLVABLE_KINDS)}")
    if facts.solvable is None:  # not the judge's to know (a critic the agent reads)
        return []
    if facts.solvable:
        return [Flag("refused_solvable", "the task can be done")]
    if code != facts.unsolvable_kind:
        return [Flag("wrong_reason_code", f"the task is infeasible, but not because of {code}")]
    return []


def _answered_once(
    facts: TaskFacts, knowledge: Knowledge, entry: ToolEntry, arguments: Mapping[str, Any]
) -> list[Flag]:
    return _repeat(knowledge, entry, arguments, state_free=True)


_JUDGES: dict[str, Callable[[TaskFacts, Knowledge, ToolEntry, Mapping[str, Any]], list[Flag]]] = {
    "set_slot": _set_slot,
    "set_and_check": _set_slot,
    "query": _query,
    "multi_query": _multi_query,
    "item_info": _info,
    "item_attributes": _attributes,
    "slot_check": _slot_check,
    "global_check": _global_check,
    "slot_query_budget": _query_budget,
    "slot_id": _slot_id,
    "grid_state": _state_read,
    "global_check_budget": _state_read,
    "done": _done,
    "refusal": _refusal,
    "approval": _answered_once,
    "attachment": _answered_once,
}


class ErrorTracker:
    """Runs :func:`detect_errors` over an episode: :meth:`judge` an action, then :meth:`observe`
    it once it ran (calls that never ran, like a refined-away proposal, are not observed)."""

    def __init__(self, facts: TaskFacts) -> None:
        self.facts = facts
        self.knowledge = Knowledge.start(facts)

    def judge(self, action: Any) -> tuple[Flag, ...]:
        return detect_errors(self.facts, self.knowledge, action)

    def observe(self, action: Any, reply: ToolReply | None) -> None:
        """Update the knowledge from an executed call and its typed reply (the step's ``info["reply"]``)."""
        self.knowledge.observe(self.facts, action, reply)

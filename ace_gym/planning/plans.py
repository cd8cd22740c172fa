"""Holistic plans: reading a submitted plan, grading its structure with the E1-E6 causes, and
measuring how closely an execution followed it.

A plan is ``{"plan": str, "tool_chain": [{"name", "arguments" | "parameter_description",
"reason"}, ...]}``, or a refusal ``{"status": "REJECT", "reason": str[, "reason_code": str]}``.
A linear chain cannot pick among candidates it has not seen, so values that come from earlier
results are *references*: any string argument that names the step it comes from ("the id chosen
from step 4"). Static values (rows, columns, fields, operators, bounds) are written as they are.
:func:`grade_plan` checks (our reading of the APB holistic checks, with the step detector's causes):

* E6 every tool exists; E5 no distractor, required arguments present (as keys, or named in a
  ``parameter_description``), static values well formed, no budget overrun;
* E1 no action on a pre-filled cell; a plan for an infeasible task, or a refusal of a feasible one;
* E2 every hidden cell gets a ``set_slot``; ``done`` comes once, last; a global check before
  ``done`` while checks are available;
* E3 no ``set_slot`` the task policy forbids;
* E4 every ``set_slot`` on a cell comes after a query on that cell; no reference to the step
  itself or a later one; a refusal names the right reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ace_gym.planning.detector import Fault, check_condition, hidden_cell, resolve_call
from ace_gym.planning.knowledge import Cell, TaskFacts
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS, Flag, grade

REFERENCE = re.compile(r"\bstep\s*#?\s*(\d{1,9})\b", re.IGNORECASE)
_CELL_KINDS = frozenset({"set_slot", "set_and_check", "query", "multi_query", "slot_check"})


@dataclass(frozen=True)
class PlanGrade:
    """A graded plan: its ``flags`` (step index or -1 for the whole plan, flag), ``grade`` (the
    rubric on all flags), ``refused`` and the refusal's ``reason_code`` ("" when none)."""

    flags: tuple[tuple[int, Flag], ...]
    grade: float
    refused: bool
    reason_code: str
    tool_names: tuple[str, ...]

    @property
    def correct(self) -> bool:
        return not self.flags


def read_plan(action: Any) -> Mapping[str, Any] | None:
    """A submitted plan as a mapping (a JSON object string is decoded), or None when it is none."""
    if isinstance(action, str):
        try:
            action = json.loads(action)
        except (ValueError, RecursionError):
            return None
    return action if isinstance(action, Mapping) else None


def is_refusal(plan: Mapping[str, Any]) -> bool:
    status = plan.get("status")
    return isinstance(status, str) and status.strip().upper() == "REJECT"


def grade_plan(facts: TaskFacts, action: Any) -> PlanGrade:
    """Grade a submitted plan against the task's facts (see the module docstring). Never raises."""
    plan = read_plan(action)
    if plan is None:
        return _graded([(-1, Flag("bad_arguments", "the plan is not a JSON object"))])
    if is_refusal(plan):
        return _refusal(facts, plan)
    chain = plan.get("tool_chain")
    if not isinstance(chain, list) or not all(isinstance(step, Mapping) for step in chain):
        return _graded([(-1, Flag("bad_arguments", "tool_chain must be a list of {name, arguments, reason} steps"))])
    flags: list[tuple[int, Flag]] = []
    if facts.solvable is False:
        flags.append((-1, Flag("completed_unsolvable", "the task cannot be done; the plan should reject it")))
    names = tuple(_name(step) for step in chain)
    _check_steps(facts, chain, flags)
    _check_structure(facts, chain, flags)
    return _graded(flags, tool_names=names)


def _graded(
    flags: list[tuple[int, Flag]], refused: bool = False, reason_code: str = "", tool_names: tuple[str, ...] = ()
) -> PlanGrade:
    return PlanGrade(tuple(flags), grade(flag for _, flag in flags), refused, reason_code, tool_names)


def _refusal(facts: TaskFacts, plan: Mapping[str, Any]) -> PlanGrade:
    code = plan.get("reason_code")
    code = code if isinstance(code, str) and code in UNSOLVABLE_KINDS else ""
    if facts.solvable is None:  # not the judge's to know
        return _graded([], True, code)
    if facts.solvable:
        return _graded([(-1, Flag("refused_solvable", "the task can be done"))], True, code)
    if code and code != facts.unsolvable_kind:
        return _graded(
            [(-1, Flag("wrong_reason_code", f"the task is infeasible, but not because of {code}"))], True, code
        )
    return _graded([], True, code)


def _references(value: Any) -> list[int]:
    """The 1-based step numbers a (possibly nested) argument value refers to."""
    if isinstance(value, str):
        return [int(n) for n in REFERENCE.findall(value)]
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in _references(v)]
    if isinstance(value, list):
        return [n for v in value for n in _references(v)]
    return []


def _check_steps(facts: TaskFacts, chain: Sequence[Mapping[str, Any]], flags: list[tuple[int, Flag]]) -> None:
    queried: set[Cell] = set()
    query_counts: dict[Cell, int] = {}
    global_checks = 0
    for index, step in enumerate(chain):
        arguments = step.get("arguments")
        described = step.get("parameter_description")
        if arguments is None and isinstance(described, str):
            arguments = _named_parameters(facts, step.get("name"), described)
        try:
            entry, arguments = resolve_call(facts, {"name": step.get("name"), "arguments": arguments})
            ahead = [n for n in _references(arguments) if n >= index + 1]
            if ahead:
                raise Fault("forward_reference", f"step {index + 1} uses the result of step {ahead[0]}")
            static = {k: v for k, v in arguments.items() if not _references(v)}
            cell = _step_cell(facts, entry.kind, static)
            if entry.kind in ("query", "multi_query") and cell is not None:
                query_counts[cell] = query_counts.get(cell, 0) + (
                    len(static.get("conditions", ())) if entry.kind == "multi_query" else 1
                )
                budget = facts.query_budgets.get(cell)
                if budget is not None and query_counts[cell] > budget:
                    raise Fault("budget_exceeded", f"more queries on cell {cell} than its budget of {budget}")
                _check_conditions(facts, entry.kind, static)
                queried.add(cell)
            if entry.kind == "global_check":
                global_checks += 1
                if facts.global_budget is not None and global_checks > facts.global_budget:
                    raise Fault("budget_exceeded", f"more global checks than the budget of {facts.global_budget}")
            if entry.kind in ("set_slot", "set_and_check") and cell is not None:
                if isinstance(static.get("id"), str) and static["id"] in facts.unapprovable:
                    raise Fault("policy_breach", f"cell {cell} is set without the approval the policy requires")
                if cell not in queried:
                    raise Fault("unqueried_slot", f"cell {cell} is set before any query on it")
        except Fault as fault:
            flags.append((index, fault.flag))


def _named_parameters(facts: TaskFacts, name: Any, described: str) -> dict[str, str]:
    """The parameters a ``parameter_description`` names, each standing for a described value."""
    entry = facts.tools.get(name) if isinstance(name, str) else None
    parameters = entry.parameters if entry is not None else ()
    return {p: f"{described} (step 0)" for p in parameters if re.search(rf"\b{re.escape(p)}\b", described)}


def _step_cell(facts: TaskFacts, kind: str, static: Mapping[str, Any]) -> Cell | None:
    """The hidden cell a cell tool's static row and col name (None when they are references)."""
    if kind not in _CELL_KINDS or "row" not in static or "col" not in static:
        return None
    return hidden_cell(facts, static, kind.replace("_", " "))


def _check_conditions(facts: TaskFacts, kind: str, static: Mapping[str, Any]) -> None:
    if kind == "query" and {"field", "operator", "value"} <= static.keys():
        check_condition(facts, static["field"], static["operator"], static["value"])
    conditions = static.get("conditions")
    if kind == "multi_query" and isinstance(conditions, list):
        for condition in conditions:
            if isinstance(condition, Mapping):
                check_condition(facts, condition.get("field"), condition.get("operator"), condition.get("value"))


def _check_structure(facts: TaskFacts, chain: Sequence[Mapping[str, Any]], flags: list[tuple[int, Flag]]) -> None:
    kinds = [facts.tools[_name(step)].kind if _name(step) in facts.tools else "" for step in chain]
    set_cells = set()
    for step, kind in zip(chain, kinds, strict=True):
        arguments = step.get("arguments")
        if kind in ("set_slot", "set_and_check") and isinstance(arguments, Mapping):
            set_cells.add((_plain_int(arguments.get("row")), _plain_int(arguments.get("col"))))
    unset = [cell for cell in facts.hidden if cell not in set_cells]
    if unset and facts.solvable is not False:
        flags.append((-1, Flag("empty_slots", f"no set_slot for {len(unset)} hidden cell(s), e.g. {unset[0]}")))
    dones = [i for i, kind in enumerate(kinds) if kind == "done"]
    if dones != [len(chain) - 1]:
        flags.append((-1, Flag("missing_done", "done must come exactly once, as the last step")))
    elif facts.solvable is not False and "global_check" not in kinds[: dones[0]] and facts.global_budget != 0:
        flags.append((dones[0], Flag("unverified_done", "no global check before done although checks are available")))


def _name(step: Mapping[str, Any]) -> str:
    """A step's tool name ("" when it is not a string)."""
    name = step.get("name")
    return name if isinstance(name, str) else ""


def _plain_int(value: Any) -> int | None:
    return value if type(value) is int else None


def plan_adherence(planned: Sequence[str], executed: Sequence[str]) -> float:
    """How closely an execution followed a plan: the longest common subsequence of the planned and
    executed tool names over the plan's length (1.0 for an empty plan)."""
    if not planned:
        return 1.0
    previous = [0] * (len(executed) + 1)
    for name in planned:
        current = [0]
        for j, done_name in enumerate(executed):
            current.append(previous[j] + 1 if name == done_name else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1] / len(planned)

"""Slot and global rule semantics over compiled arrays (spec §1.6, §2.6, §4.3).

A global rule compiles to a per-item *contribution* column and a bound; its semantics are then
one aggregate over the filled cells of a grid:

=====================  ===========================  =====================  ============
kind                   contribution of an item      aggregate              satisfied
=====================  ===========================  =====================  ============
sum_max / sum_min      attribute value              sum                    <= / >= V
count_min              1 if key == value else 0     sum                    >= V
count_min_threshold    1 if attr >= threshold       sum                    >= V
repeat_max             category code                max value frequency    <= V
max_row_sum            attribute value              max row sum            <= V
max_cap                attribute value              max                    <= V
=====================  ===========================  =====================  ============

Lower-bound rules are only checked on complete grids (partial grids could still reach them).
:func:`aggregate` is the array definition used by scoring, the generator and tests;
:class:`RunningTotals` keeps the same aggregates up to date cell by cell for the tools, so a
global check costs O(rules), independent of grid size and hidden-slot count.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ace_gym.domains.spec import LOWER_BOUND_KINDS, Domain, GlobalRule

SUM_KINDS: frozenset[str] = frozenset({"sum_max", "sum_min", "count_min", "count_min_threshold"})


def words(attribute: str) -> str:
    """An attribute name as prose: ``hourly_cost`` -> ``hourly cost``."""
    return attribute.replace("_", " ")


def slot_rule_mask(values: np.ndarray, kind: str, bound: int) -> np.ndarray:
    """Which ``values`` satisfy a slot rule of ``kind`` ("max": <= bound, "min": >= bound)."""
    return values <= bound if kind == "max" else values >= bound


def slot_rule_text(domain: Domain, row: int, col: int, attribute: str, kind: str, bound: int) -> str:
    """The instruction sentence of one slot rule (spec §1.7)."""
    relation = "at most" if kind == "max" else "at least"
    return f"the {domain.item_label} in slot ({row}, {col}) must have {words(attribute)} {relation} {bound}"


def slot_violation_reason(row: int, col: int) -> str:
    return f"slot ({row}, {col}) violates its slot constraints"


@dataclass(frozen=True, eq=False)
class CompiledGlobalRule:
    """A global rule bound to one instance: contribution column, threshold and reason text."""

    name: str
    kind: str
    bound: int
    contribution: np.ndarray
    reason: str

    @cached_property
    def contribution_list(self) -> list[int]:
        """``contribution`` as Python ints, for the running totals (built once per instance)."""
        values: list[int] = self.contribution.tolist()
        return values

    @property
    def is_lower_bound(self) -> bool:
        return self.kind in LOWER_BOUND_KINDS

    def satisfied(self, value: int, complete: bool) -> bool:
        """Whether an aggregate ``value`` meets the bound (lower bounds pass on partial grids)."""
        if self.kind in LOWER_BOUND_KINDS:
            return not complete or value >= self.bound
        return value <= self.bound


def global_rule_text(rule: GlobalRule, bound: int, domain: Domain) -> str:
    """The instruction / failure sentence of a global rule (spec §1.6)."""
    attribute, plural = words(rule.attribute), domain.item_plural
    if rule.kind == "sum_max":
        return f"the total {attribute} of all {plural} in the whole grid must be at most {bound}"
    if rule.kind == "sum_min":
        return f"the total {attribute} of all {plural} in the whole grid must be at least {bound}"
    if rule.kind == "repeat_max":
        return f"the same {attribute} can appear at most {bound} times in the whole grid"
    if rule.kind == "count_min":
        return f"there must be at least {bound} {plural} in the whole grid whose {attribute} is {rule.value}"
    if rule.kind == "count_min_threshold":
        return (
            f"there must be at least {bound} {plural} in the whole grid whose {attribute} is at least {rule.threshold}"
        )
    if rule.kind == "max_row_sum":
        return f"for any single row in the whole grid, the total {attribute} must be at most {bound}"
    if rule.kind == "max_cap":
        return f"the maximum {attribute} of any {domain.item_label} in the whole grid must be at most {bound}"
    raise ValueError(f"unknown global rule kind {rule.kind!r}")


def compile_global_rule(
    rule: GlobalRule,
    bound: int,
    domain: Domain,
    numeric: dict[str, np.ndarray],
    categorical: dict[str, tuple[np.ndarray, tuple[str, ...]]],
) -> CompiledGlobalRule:
    """Bind ``rule`` to an item table: build its contribution column (see module docstring)."""
    if rule.kind == "repeat_max":
        contribution = categorical[rule.attribute][0].astype(np.int64)
    elif rule.kind == "count_min":
        codes, vocabulary = categorical[rule.attribute]
        code = vocabulary.index(rule.value) if rule.value in vocabulary else -1
        contribution = (codes == code).astype(np.int64)
    elif rule.kind == "count_min_threshold":
        assert rule.threshold is not None
        contribution = (numeric[rule.attribute] >= rule.threshold).astype(np.int64)
    else:
        contribution = numeric[rule.attribute]
    contribution.flags.writeable = False
    return CompiledGlobalRule(rule.name, rule.kind, bound, contribution, global_rule_text(rule, bound, domain))


def aggregate(rule: CompiledGlobalRule, grid: np.ndarray, cols: int) -> int:
    """The rule's aggregate over the filled cells of a flat row-major ``grid`` (-1 = empty)."""
    filled = grid >= 0
    values = np.where(filled, rule.contribution[np.where(filled, grid, 0)], 0)
    if rule.kind in SUM_KINDS:
        return int(values.sum())
    if rule.kind == "repeat_max":
        codes = values[filled]
        return int(np.bincount(codes).max()) if codes.size else 0
    if rule.kind == "max_row_sum":
        return int(values.reshape(-1, cols).sum(axis=1).max())
    if rule.kind == "max_cap":
        return int(values[filled].max()) if filled.any() else 0
    raise ValueError(f"unknown global rule kind {rule.kind!r}")


def first_global_violation(rules: tuple[CompiledGlobalRule, ...], grid: np.ndarray, cols: int) -> str | None:
    """Reason of the first violated rule in rule order, or None; partial grids skip lower bounds."""
    complete = bool((grid >= 0).all())
    for rule in rules:
        if not rule.satisfied(aggregate(rule, grid, cols), complete):
            return rule.reason
    return None


class RunningTotals:
    """The aggregates of :func:`aggregate`, kept current as cells change (for the tool hot path).

    ``add``/``remove`` take a cell and an item index; ``first_violation`` evaluates the
    complete-grid semantics. Plain Python numbers: a handful of rules on small grids is faster
    without numpy's per-call overhead.
    """

    __slots__ = ("_cols", "_contrib", "_kinds", "_rules", "_state")

    def __init__(self, rules: tuple[CompiledGlobalRule, ...], cols: int) -> None:
        self._rules = rules
        self._cols = cols
        self._kinds = tuple(rule.kind for rule in rules)
        self._contrib = tuple(rule.contribution_list for rule in rules)
        self._state: list[object] = []
        for rule in rules:
            if rule.kind in SUM_KINDS:
                self._state.append(0)
            elif rule.kind == "repeat_max":
                self._state.append([0] * (int(rule.contribution.max(initial=0)) + 1))
            else:  # max_row_sum keeps row sums, max_cap keeps a value -> count multiset
                self._state.append({})

    def copy(self) -> RunningTotals:
        twin = RunningTotals.__new__(RunningTotals)
        twin._rules, twin._cols, twin._kinds, twin._contrib = self._rules, self._cols, self._kinds, self._contrib
        twin._state = [s.copy() if isinstance(s, (list, dict)) else s for s in self._state]
        return twin

    def add(self, cell: int, item: int, sign: int = 1) -> None:
        state = self._state
        for k, kind in enumerate(self._kinds):
            value = self._contrib[k][item]
            if kind in SUM_KINDS:
                state[k] += sign * value  # type: ignore[operator]
            elif kind == "repeat_max":
                state[k][value] += sign  # type: ignore[index]
            else:
                bucket: dict[int, int] = state[k]  # type: ignore[assignment]
                key = cell // self._cols if kind == "max_row_sum" else value
                bucket[key] = bucket.get(key, 0) + (sign * value if kind == "max_row_sum" else sign)
                if kind == "max_cap" and bucket[key] == 0:
                    del bucket[key]

    def remove(self, cell: int, item: int) -> None:
        self.add(cell, item, -1)

    def value(self, k: int) -> int:
        """Current aggregate of rule ``k``."""
        kind, state = self._kinds[k], self._state[k]
        if kind in SUM_KINDS:
            return state  # type: ignore[return-value]
        if kind == "repeat_max":
            return max(state)  # type: ignore[call-overload,no-any-return]
        if kind == "max_row_sum":
            return max(state.values(), default=0)  # type: ignore[attr-defined,no-any-return]
        return max(state, default=0)  # type: ignore[call-overload,no-any-return]

    def first_violation(self, complete: bool = True) -> str | None:
        for k, rule in enumerate(self._rules):
            if not rule.satisfied(self.value(k), complete):
                return rule.reason
        return None

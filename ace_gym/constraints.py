"""Slot and global rule semantics over compiled arrays (docs/compatibility.md §1.6, §2.6, §4.3).

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
    """The instruction sentence of one slot rule (docs/compatibility.md §1.7)."""
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
    """The instruction / failure sentence of a global rule (docs/compatibility.md §1.6)."""
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


_TOTAL_GROUP = {
    "sum_max": "sum",
    "sum_min": "sum",
    "count_min": "sum",
    "count_min_threshold": "sum",
    "repeat_max": "count",
    "max_row_sum": "row",
    "max_cap": "cap",
}


class RunningTotals:
    """The aggregates of :func:`aggregate`, kept current as cells change (for the tool hot path).

    ``add``/``remove`` take a cell and an item index; ``first_violation`` evaluates the
    complete-grid semantics. Rules are grouped by how their aggregate is kept (a sum, counts per
    value, sums per row, a multiset of values) so that an update does no per-rule dispatch.
    Plain Python numbers: a handful of rules on small grids is faster without numpy's overhead.
    """

    __slots__ = (
        "_cap_columns",
        "_cap_values",
        "_checks",
        "_cols",
        "_count_columns",
        "_counts",
        "_row_columns",
        "_row_sums",
        "_sum_columns",
        "_sums",
        "_where",
    )

    def __init__(self, rules: tuple[CompiledGlobalRule, ...], cols: int) -> None:
        self._cols = cols
        columns: dict[str, list[list[int]]] = {"sum": [], "count": [], "row": [], "cap": []}
        where = []
        for rule in rules:
            group = _TOTAL_GROUP[rule.kind]
            where.append((group, len(columns[group])))
            columns[group].append(rule.contribution_list)
        self._where: tuple[tuple[str, int], ...] = tuple(where)  # rule k -> (group, index in group)
        self._checks = tuple((rule.is_lower_bound, rule.bound, rule.reason) for rule in rules)
        # (index in group, contribution column) pairs, so that updates loop without enumerate()
        self._sum_columns = tuple(enumerate(columns["sum"]))
        self._count_columns = tuple(enumerate(columns["count"]))
        self._row_columns = tuple(enumerate(columns["row"]))
        self._cap_columns = tuple(enumerate(columns["cap"]))
        self._sums = [0] * len(self._sum_columns)
        self._counts = [[0] * (max(column, default=0) + 1) for column in columns["count"]]
        self._row_sums: list[dict[int, int]] = [{} for _ in self._row_columns]
        self._cap_values: list[dict[int, int]] = [{} for _ in self._cap_columns]  # value -> how many cells

    def copy(self) -> RunningTotals:
        twin = RunningTotals.__new__(RunningTotals)
        for name in ("_cols", "_where", "_checks", "_sum_columns", "_count_columns", "_row_columns", "_cap_columns"):
            setattr(twin, name, getattr(self, name))  # immutable, shared
        twin._sums = list(self._sums)
        twin._counts = [list(counts) for counts in self._counts]
        twin._row_sums = [dict(sums) for sums in self._row_sums]
        twin._cap_values = [dict(values) for values in self._cap_values]
        return twin

    def add(self, cell: int, item: int, sign: int = 1) -> None:
        sums = self._sums
        for k, column in self._sum_columns:
            sums[k] += sign * column[item]
        counts = self._counts
        for k, column in self._count_columns:
            counts[k][column[item]] += sign
        if self._row_columns:
            row = cell // self._cols
            for k, column in self._row_columns:
                row_sums = self._row_sums[k]
                row_sums[row] = row_sums.get(row, 0) + sign * column[item]
        for k, column in self._cap_columns:
            values, value = self._cap_values[k], column[item]
            remaining = values.get(value, 0) + sign
            if remaining:
                values[value] = remaining
            else:
                del values[value]

    def remove(self, cell: int, item: int) -> None:
        self.add(cell, item, -1)

    def value(self, k: int) -> int:
        """Current aggregate of rule ``k``."""
        group, i = self._where[k]
        if group == "sum":
            return self._sums[i]
        if group == "count":
            return max(self._counts[i])
        if group == "row":
            return max(self._row_sums[i].values(), default=0)
        return max(self._cap_values[i], default=0)

    def first_violation(self, complete: bool = True) -> str | None:
        """Reason of the first violated rule in rule order (lower bounds only when ``complete``)."""
        for k, (lower, bound, reason) in enumerate(self._checks):
            value = self.value(k)
            if (complete and value < bound) if lower else value > bound:
                return reason
        return None

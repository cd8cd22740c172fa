"""Slot and global rule semantics over compiled arrays: the one home of every rule kind.

Every rule kind is one declaration: :data:`SLOT_KINDS` (slot rules) and :data:`RULE_KINDS`
(global rules). The tools (through :class:`RunningTotals`), scoring, the generator, its
certificate, the prompts and the exact solver read these declarations; no other module names a
rule kind (a test checks), except the domain declarations that use them.

A global rule reads a per-item *contribution* from one attribute (:class:`Reading`) and bounds
one :class:`Aggregate` of the contributions over the filled cells, from above (``<= bound``) or
from below (``>= bound``). Lower bounds are only checked on complete grids (partial grids could
still reach them). :func:`aggregate` is the array definition used by scoring, the generator and
tests; :class:`RunningTotals` keeps the same aggregates up to date cell by cell for the tools, so
a global check costs O(rules), independent of grid size and hidden-slot count. The published
semantics are described in docs/compatibility.md §1.6, §2.6 and §4.3.

For the generator and its certificate a rule is a few signed additive :class:`Components`, each
violated iff its total over the grid exceeds its threshold (:func:`components`); the generator
draws the rule's bound from the kind's ``threshold_range`` around the truth grid.

Adding a global rule kind:

1. add its name to ``GlobalRuleKindName`` in :mod:`ace_gym.domains.spec` (the type of
   ``GlobalRule.kind`` in domain declarations);
2. add one :class:`RuleKind` entry to :data:`RULE_KINDS`: bound direction, sentence template,
   reading, aggregate and threshold range (a new threshold range is one small function here);
3. a new *reading* or *aggregate* (rather than a new combination of existing ones) also needs its
   branch in :func:`read`/:func:`read_each`, or in :func:`combine`, :func:`components`,
   :class:`RunningTotals` (its updates and :func:`_grid_total`) and the exact solver's search;
4. ``tests/contracts/test_rule_kinds.py`` then fails until the kind has a sentence and a plain-Python twin
   there; every other test covers it through the table.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any, NamedTuple

import numpy as np

from ace_gym.domains.spec import Domain, GlobalRule


def words(attribute: str) -> str:
    """An attribute name as prose: ``hourly_cost`` -> ``hourly cost``."""
    return attribute.replace("_", " ")


# -- slot rules -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotKind:
    """A slot rule kind: ``item[attribute] <= bound`` (``upper``) or ``>= bound``.

    ``relation`` is how the instruction states it, ``query_operator`` the query operator that selects
    the items satisfying it.
    """

    name: str
    upper: bool
    relation: str
    query_operator: str


SLOT_KINDS: dict[str, SlotKind] = {
    kind.name: kind
    for kind in (
        SlotKind("max", upper=True, relation="at most", query_operator="<="),
        SlotKind("min", upper=False, relation="at least", query_operator=">="),
    )
}


def slot_rule_mask(values: np.ndarray, kind: str, bound: int | np.ndarray) -> np.ndarray:
    """Which ``values`` satisfy a slot rule of ``kind`` with ``bound`` (an int, or an array of
    bounds broadcast against ``values``)."""
    return values <= bound if SLOT_KINDS[kind].upper else values >= bound


def slot_rules_mask(values: np.ndarray, kinds: Sequence[str], bounds: np.ndarray) -> np.ndarray:
    """:func:`slot_rule_mask` over rules of mixed kinds at once: ``values[i]`` against a rule of
    ``kinds[i]`` with ``bounds[i]``."""
    upper = np.fromiter((SLOT_KINDS[kind].upper for kind in kinds), dtype=bool, count=len(kinds))
    return np.where(upper, values <= bounds, values >= bounds)


def slot_rule_text(domain: Domain, row: int, col: int, attribute: str, kind: str, bound: int) -> str:
    """The instruction sentence of one slot rule (docs/compatibility.md §1.7)."""
    relation = SLOT_KINDS[kind].relation
    return f"the {domain.item_label} in slot ({row}, {col}) must have {words(attribute)} {relation} {bound}"


EMPTY_CELLS_REASON = "solution still contains empty slots"
"""The final score's reason for a grid with an empty cell (the published text)."""


def slot_violation_reason(row: int, col: int) -> str:
    return f"slot ({row}, {col}) violates its slot constraints"


# -- global rules: readings, aggregates, components ------------------------------------------------


class Reading(IntEnum):
    """How a number is read from an attribute value (or from a contribution, for components).

    ``VALUE``: the value itself (a category's code for categorical attributes); ``EQUAL``: 1 if
    it equals the parameter, else 0; ``AT_LEAST``: 1 if ``>=`` the parameter; ``ABOVE``: 1 if
    ``>`` the parameter. A rule's parameter is its ``value`` (EQUAL) or ``threshold``. Integer
    codes, so that the generator can read many components at once (:func:`read_each`).
    """

    VALUE = 0
    EQUAL = 1
    AT_LEAST = 2
    ABOVE = 3


_COMPARISON: dict[Reading, Callable[[Any, Any], Any]] = {
    Reading.EQUAL: operator.eq,
    Reading.AT_LEAST: operator.ge,
    Reading.ABOVE: operator.gt,
}


# Module-level aliases for the hot paths: on Python 3.11 an enum attribute lookup costs ~0.3 µs,
# and numpy compares an array with an IntEnum member 4x slower than with a plain int.
_VALUE, _EQUAL, _AT_LEAST, _ABOVE = Reading
_VALUE_CODE, _EQUAL_CODE, _AT_LEAST_CODE = int(_VALUE), int(_EQUAL), int(_AT_LEAST)


def read(reading: Reading, values: np.ndarray, parameter: Any) -> np.ndarray:
    """``values`` read by ``reading``: the array itself (VALUE) or an int64 0/1 array."""
    if reading is _VALUE:
        return values
    hits: np.ndarray = _COMPARISON[reading](values, parameter)
    return hits.astype(np.int64)


def read_each(readings: np.ndarray, values: np.ndarray, parameters: np.ndarray) -> np.ndarray:
    """Vectorised :func:`read`: int64 ``values`` read by the broadcast ``readings`` codes and
    ``parameters`` (one per component), as int64."""
    return np.where(
        readings == _VALUE_CODE,
        values,
        np.where(
            readings == _EQUAL_CODE,
            values == parameters,
            np.where(readings == _AT_LEAST_CODE, values >= parameters, values > parameters),
        ),
    ).astype(np.int64, copy=False)


class Aggregate(Enum):
    """How the contributions of the filled cells combine into the number a rule bounds."""

    TOTAL = "the sum of the contributions"
    MOST_FREQUENT = "how many cells hold the most frequent contribution"
    LARGEST_ROW_TOTAL = "the largest sum of contributions over one row"
    LARGEST = "the largest contribution"


_TOTAL, _MOST_FREQUENT, _LARGEST_ROW_TOTAL, _LARGEST = Aggregate  # aliases, as for Reading


def combine(how: Aggregate, values: np.ndarray, cols: int, filled: np.ndarray | None = None) -> int:
    """The aggregate of per-cell contributions ``values`` (flat row-major, 0 on empty cells);
    ``filled`` marks the filled cells (None: every cell is filled). Empty grids give 0."""
    if how is _TOTAL:
        return int(values.sum())
    if how is _LARGEST_ROW_TOTAL:
        return int(values.reshape(-1, cols).sum(axis=1).max())
    present = values if filled is None else values[filled]
    if not present.size:
        return 0
    if how is _MOST_FREQUENT:
        return int(np.bincount(present).max())
    return int(present.max())


class Components(NamedTuple):
    """A rule's signed additive components, as parallel lists (one entry per component).

    The grid violates component ``k`` iff the sum over its cells (those of row ``rows[k]`` only,
    when ``rows[k] >= 0``) of ``signs[k] * read(tests[k], contribution, parameters[k])`` exceeds
    ``thresholds[k]``. A lower bound ``total >= V`` becomes ``-total > -V``.
    """

    tests: list[Reading]
    parameters: list[int]
    signs: list[int]
    rows: list[int]
    thresholds: list[int]


# -- global rules: the table ----------------------------------------------------------------------

ThresholdRange = Callable[[int, GlobalRule, int, int, int], tuple[int, int]]
"""``(observed, rule, cells, cols, item_high) -> (low, high)``: the generator's range for a
rule's bound, given the truth grid's aggregate ``observed``, the grid size and the largest value
of the rule's attribute (``item_high``). The bound is drawn uniformly from ``[low, high]``."""


def _below_by_slack(observed: int, rule: GlobalRule, cells: int, cols: int, item_high: int) -> tuple[int, int]:
    """Up to ``slack`` below the truth, not below ``floor`` (0 if unset) unless the truth is."""
    return min(observed, max(int(rule.floor or 0), observed - rule.slack)), observed


def _above_by_slack(observed: int, rule: GlobalRule, cells: int, cols: int, item_high: int) -> tuple[int, int]:
    """Up to ``slack`` above the truth, not above ``cap`` per cell unless the truth is."""
    return observed, max(observed, min(cells * int(rule.cap or 0), observed + rule.slack))


def _above_by_slack_per_row(observed: int, rule: GlobalRule, cells: int, cols: int, item_high: int) -> tuple[int, int]:
    """Up to ``slack`` above the truth, not above ``cap`` per cell of a row unless the truth is."""
    return observed, max(observed, min(cols * int(rule.cap or 0), observed + rule.slack))


def _up_to_cells(observed: int, rule: GlobalRule, cells: int, cols: int, item_high: int) -> tuple[int, int]:
    """Anywhere from the truth to the number of cells."""
    return observed, cells


def _up_to_item_high(observed: int, rule: GlobalRule, cells: int, cols: int, item_high: int) -> tuple[int, int]:
    """Anywhere from the truth to the attribute's largest value."""
    return observed, max(observed, item_high)


@dataclass(frozen=True)
class RuleKind:
    """Everything the engine knows about one global rule kind.

    ``upper``: satisfied iff the aggregate is ``<= bound`` (else ``>= bound``, on complete grids).
    ``text``: the instruction and failure sentence, a :meth:`str.format` template over the
    rule's ``attribute`` (in words), ``value`` and ``threshold``, the ``bound``, and the domain's
    item words ``item`` and ``plural``. ``reading``: an item's contribution from its
    attribute. ``aggregate``: how contributions combine. ``threshold_range``: how the generator
    draws the bound. Raises ValueError for combinations the components cannot express.
    """

    name: str
    upper: bool
    text: str
    reading: Reading
    aggregate: Aggregate
    threshold_range: ThresholdRange

    def __post_init__(self) -> None:
        if not self.upper and self.aggregate is not Aggregate.TOTAL:
            raise ValueError(f"rule kind {self.name}: a lower bound needs the TOTAL aggregate (additive components)")
        if self.aggregate in (Aggregate.MOST_FREQUENT, Aggregate.LARGEST) and self.reading is not Reading.VALUE:
            raise ValueError(f"rule kind {self.name}: {self.aggregate.name} reads attribute values (Reading.VALUE)")

    def parameter(self, rule: GlobalRule, vocabulary: tuple[str, ...] | None = None) -> Any:
        """The parameter of ``rule``'s reading: its ``value`` (as its code in ``vocabulary`` when
        given, -1 if absent), its ``threshold``, or 0 for VALUE. ValueError if the rule lacks it."""
        if self.reading is _VALUE:
            return 0
        if self.reading is _EQUAL:
            if rule.value is None:
                raise ValueError(f"global rule {rule.name} ({self.name}) declares no value")
            if vocabulary is None:
                return rule.value
            return vocabulary.index(rule.value) if rule.value in vocabulary else -1
        if rule.threshold is None:
            raise ValueError(f"global rule {rule.name} ({self.name}) declares no threshold")
        return rule.threshold

    def largest_aggregate(self, item_high: int, rows: int, cols: int) -> int:
        """The largest aggregate on a ``rows`` x ``cols`` grid whose items read at most
        ``item_high`` from the rule's attribute (ignored for counts and frequencies)."""
        per_item = item_high if self.reading is _VALUE else 1
        if self.aggregate is _MOST_FREQUENT:
            return rows * cols
        if self.aggregate is _TOTAL:
            return rows * cols * per_item
        if self.aggregate is _LARGEST_ROW_TOTAL:
            return cols * per_item
        return per_item

    def can_bind(self, bound: int, cells: int) -> bool:
        """False when no complete grid of ``cells`` cells violates the bound: a count of 0/1
        contributions and a frequency both lie in ``[0, cells]``."""
        counts = self.aggregate is _MOST_FREQUENT or (self.aggregate is _TOTAL and self.reading is not _VALUE)
        if not counts:
            return True
        return bound < cells if self.upper else bound > 0


RULE_KINDS: dict[str, RuleKind] = {
    kind.name: kind
    for kind in (
        RuleKind(
            "sum_max",
            upper=True,
            text="the total {attribute} of all {plural} in the whole grid must be at most {bound}",
            reading=Reading.VALUE,
            aggregate=Aggregate.TOTAL,
            threshold_range=_above_by_slack,
        ),
        RuleKind(
            "sum_min",
            upper=False,
            text="the total {attribute} of all {plural} in the whole grid must be at least {bound}",
            reading=Reading.VALUE,
            aggregate=Aggregate.TOTAL,
            threshold_range=_below_by_slack,
        ),
        RuleKind(
            "repeat_max",
            upper=True,
            text="the same {attribute} can appear at most {bound} times in the whole grid",
            reading=Reading.VALUE,
            aggregate=Aggregate.MOST_FREQUENT,
            threshold_range=_up_to_cells,
        ),
        RuleKind(
            "count_min",
            upper=False,
            text="there must be at least {bound} {plural} in the whole grid whose {attribute} is {value}",
            reading=Reading.EQUAL,
            aggregate=Aggregate.TOTAL,
            threshold_range=_below_by_slack,
        ),
        RuleKind(
            "count_min_threshold",
            upper=False,
            text="there must be at least {bound} {plural} in the whole grid whose {attribute} is at least {threshold}",
            reading=Reading.AT_LEAST,
            aggregate=Aggregate.TOTAL,
            threshold_range=_below_by_slack,
        ),
        RuleKind(
            "max_row_sum",
            upper=True,
            text="for any single row in the whole grid, the total {attribute} must be at most {bound}",
            reading=Reading.VALUE,
            aggregate=Aggregate.LARGEST_ROW_TOTAL,
            threshold_range=_above_by_slack_per_row,
        ),
        RuleKind(
            "max_cap",
            upper=True,
            text="the maximum {attribute} of any {item} in the whole grid must be at most {bound}",
            reading=Reading.VALUE,
            aggregate=Aggregate.LARGEST,
            threshold_range=_up_to_item_high,
        ),
    )
}


def kind_of(rule: GlobalRule) -> RuleKind:
    """The declaration of ``rule``'s kind; ValueError for an unknown kind."""
    try:
        return RULE_KINDS[rule.kind]
    except KeyError:
        raise ValueError(f"unknown global rule kind {rule.kind!r}") from None


def components(kind: RuleKind, bound: int, codes: Sequence[int], rows: int) -> Components:
    """A rule of ``kind`` with ``bound`` as signed additive components, in a fixed order: one for
    a total, one per category code of ``codes`` for a frequency, one per row of ``rows`` for a
    row total, one (``contribution > bound`` counted, threshold 0) for a largest value."""
    if kind.aggregate is _TOTAL:
        sign = 1 if kind.upper else -1
        return Components([_VALUE], [0], [sign], [-1], [sign * bound])
    if kind.aggregate is _MOST_FREQUENT:
        n = len(codes)
        return Components([_EQUAL] * n, list(codes), [1] * n, [-1] * n, [bound] * n)
    if kind.aggregate is _LARGEST_ROW_TOTAL:
        return Components([_VALUE] * rows, [0] * rows, [1] * rows, list(range(rows)), [bound] * rows)
    return Components([_ABOVE], [bound], [1], [-1], [0])


def contribution_reader(rule: GlobalRule) -> Callable[[Any], Any]:
    """A plain-Python function from an item's raw attribute value to its contribution to ``rule``."""
    kind = kind_of(rule)
    if kind.reading is _VALUE:
        return _same
    compare, parameter = _COMPARISON[kind.reading], kind.parameter(rule)
    return lambda value: int(compare(value, parameter))


def _same(value: Any) -> Any:
    return value


# -- global rules bound to an instance ------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CompiledGlobalRule:
    """A global rule bound to one instance: its kind, contribution column, bound and reason text."""

    name: str
    kind: RuleKind
    bound: int
    contribution: np.ndarray
    reason: str

    @property
    def is_lower_bound(self) -> bool:
        return not self.kind.upper

    def satisfied(self, value: int, complete: bool) -> bool:
        """Whether an aggregate ``value`` meets the bound (lower bounds pass on partial grids)."""
        if self.kind.upper:
            return value <= self.bound
        return not complete or value >= self.bound

    def shortfall(self, value: int) -> int:
        """How far an aggregate ``value`` is from meeting the bound on a complete grid (0 when met)."""
        return max(0, value - self.bound if self.kind.upper else self.bound - value)


def global_rule_text(rule: GlobalRule, bound: int, domain: Domain) -> str:
    """The instruction / failure sentence of a global rule (docs/compatibility.md §1.6)."""
    return kind_of(rule).text.format(
        attribute=words(rule.attribute),
        plural=domain.item_plural,
        item=domain.item_label,
        bound=bound,
        value=rule.value,
        threshold=rule.threshold,
    )


def compile_global_rule(
    rule: GlobalRule,
    bound: int,
    domain: Domain,
    numeric: dict[str, np.ndarray],
    categorical: dict[str, tuple[np.ndarray, tuple[str, ...]]],
    reason: str | None = None,
) -> CompiledGlobalRule:
    """Bind ``rule`` to an item table: read its contribution column (categories as int64 codes).
    ``reason``: its :func:`global_rule_text` when the caller has it at hand (a dataset cache entry)."""
    kind = kind_of(rule)
    if rule.attribute in categorical:
        codes, vocabulary = categorical[rule.attribute]
        contribution = read(kind.reading, codes.astype(np.int64), kind.parameter(rule, vocabulary))
    else:
        contribution = read(kind.reading, numeric[rule.attribute], kind.parameter(rule))
    contribution.flags.writeable = False
    if reason is None:
        reason = global_rule_text(rule, bound, domain)
    return CompiledGlobalRule(rule.name, kind, bound, contribution, reason)


def aggregate(rule: CompiledGlobalRule, grid: np.ndarray, cols: int) -> int:
    """The rule's aggregate over the filled cells of a flat row-major ``grid`` (-1 = empty)."""
    filled = grid >= 0
    values = np.where(filled, rule.contribution[np.where(filled, grid, 0)], 0)
    return combine(rule.kind.aggregate, values, cols, filled)


def first_global_violation(rules: tuple[CompiledGlobalRule, ...], grid: np.ndarray, cols: int) -> str | None:
    """Reason of the first violated rule in rule order, or None; partial grids skip lower bounds."""
    complete = bool((grid >= 0).all())
    for rule in rules:
        if not rule.satisfied(aggregate(rule, grid, cols), complete):
            return rule.reason
    return None


_GROUPS = (_TOTAL, _MOST_FREQUENT, _LARGEST_ROW_TOTAL, _LARGEST)
"""The aggregates in the order :class:`RunningTotals` groups its rules."""


def _grid_total(group: Aggregate, column: list[int], grid: Sequence[int], items: list[int], cols: int) -> Any:
    """What :class:`RunningTotals` keeps for a rule of ``group`` with contributions ``column``, over
    the filled cells of ``grid`` (``items``: their items, in cell order): the sum; a count per value
    up to the column's largest; the sum of each row holding a filled cell; or, per value present,
    how many cells hold it."""
    if group is _TOTAL:
        return sum(map(column.__getitem__, items))
    if group is _MOST_FREQUENT:
        counts = [0] * (max(column, default=0) + 1)
        for item in items:
            counts[column[item]] += 1
        return counts
    kept: dict[int, int] = {}
    if group is _LARGEST_ROW_TOTAL:
        for cell, item in enumerate(grid):
            if item >= 0:
                row = cell // cols
                kept[row] = kept.get(row, 0) + column[item]
        return kept
    for item in items:
        value = column[item]
        kept[value] = kept.get(value, 0) + 1
    return kept


class RunningTotals:
    """The aggregates of :func:`aggregate`, kept current as cells change (for the tool hot path).

    ``add``/``remove``/``replace`` take a cell and item indices; ``first_violation`` evaluates the
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

    def __init__(self, rules: tuple[CompiledGlobalRule, ...], cols: int, grid: Sequence[int] = ()) -> None:
        """Totals of ``rules`` over the filled cells of ``grid`` (flat row-major item indices, -1 =
        empty; none given: an empty grid), each as :meth:`add` would have counted it."""
        self._cols = cols
        items = [item for item in grid if item >= 0]
        # per group, in _GROUPS order: (index in group, contribution column) pairs, so that updates
        # loop without enumerate(), and the totals
        columns: tuple[list[tuple[int, list[int]]], ...] = ([], [], [], [])
        totals: tuple[list[Any], ...] = ([], [], [], [])
        where, checks = [], []
        for rule in rules:
            group, column = rule.kind.aggregate, rule.contribution.tolist()
            g = _GROUPS.index(group)  # by identity, in C: an Enum-keyed dict hashes in Python
            i = len(totals[g])
            columns[g].append((i, column))
            totals[g].append(_grid_total(group, column, grid, items, cols))
            where.append((group, i))
            checks.append((group, i, rule.is_lower_bound, rule.bound, rule.reason))
        self._where: tuple[tuple[Aggregate, int], ...] = tuple(where)  # rule k -> (group, index in group)
        self._checks = tuple(checks)
        self._sum_columns, self._count_columns, self._row_columns, self._cap_columns = map(tuple, columns)
        self._sums: list[int]
        self._counts: list[list[int]]  # per value: how many cells
        self._row_sums: list[dict[int, int]]  # row -> sum
        self._cap_values: list[dict[int, int]]  # value -> how many cells
        self._sums, self._counts, self._row_sums, self._cap_values = totals

    def copy(self) -> RunningTotals:
        """An independent twin: the same rules (shared, immutable) and the same current totals."""
        twin = RunningTotals.__new__(RunningTotals)
        twin._cols, twin._where, twin._checks = self._cols, self._where, self._checks
        twin._sum_columns, twin._count_columns = self._sum_columns, self._count_columns
        twin._row_columns, twin._cap_columns = self._row_columns, self._cap_columns
        twin._sums = list(self._sums)
        twin._counts = [list(counts) for counts in self._counts]
        # most rule sets have neither kind: an empty group's list is never written, so it is shared
        twin._row_sums = [dict(sums) for sums in self._row_sums] if self._row_sums else self._row_sums
        twin._cap_values = [dict(values) for values in self._cap_values] if self._cap_values else self._cap_values
        return twin

    def add(self, cell: int, item: int) -> None:
        """Count ``item`` in at ``cell``."""
        sums = self._sums
        for k, column in self._sum_columns:
            sums[k] += column[item]
        counts = self._counts
        for k, column in self._count_columns:
            counts[k][column[item]] += 1
        if self._row_columns or self._cap_columns:  # rare kinds: one test spares two empty loops
            self._update_rows_and_caps(cell, item, 1)

    def remove(self, cell: int, item: int) -> None:
        """Count ``item`` out of ``cell`` (it was added there before)."""
        sums = self._sums
        for k, column in self._sum_columns:
            sums[k] -= column[item]
        counts = self._counts
        for k, column in self._count_columns:
            counts[k][column[item]] -= 1
        if self._row_columns or self._cap_columns:
            self._update_rows_and_caps(cell, item, -1)

    def replace(self, cell: int, old: int, new: int) -> None:
        """Count ``old`` out of ``cell`` and ``new`` in: :meth:`remove` then :meth:`add` in one pass."""
        sums = self._sums
        for k, column in self._sum_columns:
            sums[k] += column[new] - column[old]
        counts = self._counts
        for k, column in self._count_columns:
            counts_k = counts[k]
            counts_k[column[old]] -= 1
            counts_k[column[new]] += 1
        if self._row_columns or self._cap_columns:
            self._update_rows_and_caps(cell, old, -1)
            self._update_rows_and_caps(cell, new, 1)

    def _update_rows_and_caps(self, cell: int, item: int, sign: int) -> None:
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

    def value(self, k: int) -> int:
        """Current aggregate of rule ``k``."""
        return self._value(*self._where[k])

    def _value(self, group: Aggregate, i: int) -> int:
        """Current aggregate of the ``i``-th rule of ``group``."""
        if group is _TOTAL:
            return self._sums[i]
        if group is _MOST_FREQUENT:
            return max(self._counts[i])
        if group is _LARGEST_ROW_TOTAL:
            return max(self._row_sums[i].values(), default=0)
        return max(self._cap_values[i], default=0)

    def first_violation(self, complete: bool = True) -> str | None:
        """Reason of the first violated rule in rule order (lower bounds only when ``complete``)."""
        sums = self._sums
        for group, i, lower, bound, reason in self._checks:
            value = sums[i] if group is _TOTAL else self._value(group, i)  # most rules are sums: no call
            if (complete and value < bound) if lower else value > bound:
                return reason
        return None

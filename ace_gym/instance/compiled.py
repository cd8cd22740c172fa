"""The compiled form of a validated instance: the read-only arrays the tools and the scorer work
on, and the one store of what episodes derive from an instance."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from itertools import compress
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

import numpy as np

from ace_gym.constraints import CompiledGlobalRule, RunningTotals, compile_global_rule, slot_rule_mask
from ace_gym.domains import Domain, NumericAttribute

if TYPE_CHECKING:
    from ace_gym.dataset_schema import Instance, SlotEntry

_T = TypeVar("_T")


class Origin(Protocol):
    """What an instance was compiled from (:class:`ace_gym.instance.loading.Dataset`): it pickles
    as a reference into it."""

    def compiled(self, index: int) -> CompiledInstance:
        """Instance ``index`` compiled."""
        ...


class ItemRows(Protocol):
    """Where an instance from a cache entry reads its item dicts (:class:`ace_gym.instance.cached_instance.ItemRows`)."""

    def item(self, k: int) -> dict[str, int | str]:
        """Item number ``k``'s dict (the same dict on every call)."""
        ...


SlotRules = tuple[tuple[str, str, str, int], ...]
"""A slot's active rules: ``(rule name, attribute, kind, bound)`` in the domain's rule order."""


class CompiledSlot:
    """A hidden cell ready for the tools: where it is, its candidates and which pass its rules.
    Read-only; an instance's slots are shared by every episode on it."""

    def __init__(
        self,
        row: int,
        col: int,
        cell: int,
        candidates: np.ndarray,
        slot_valid: np.ndarray,
        rules: SlotRules,
        item_ids: tuple[str, ...],
    ) -> None:
        """``candidates`` and ``slot_valid``: the slot's rows of the instance's read-only
        candidate and slot-validity tables; ``item_ids``: the instance's."""
        self.row, self.col, self.cell = row, col, cell
        self.candidates = candidates
        """The candidates' item indices (read-only int32)."""
        self.slot_valid = slot_valid
        """Whether each candidate passes the slot's rules (read-only)."""
        self.candidate_items: tuple[int, ...] = tuple(candidates.tolist())
        self.candidate_ids: tuple[str, ...] = tuple([item_ids[i] for i in self.candidate_items])
        self.item_of_id: dict[str, int] = dict(zip(self.candidate_ids, self.candidate_items, strict=True))
        """Candidate id -> item index."""
        self.valid_items: frozenset[int] = frozenset(compress(self.candidate_items, slot_valid.tolist()))
        """The candidates that pass the slot's rules."""
        self.rules = rules
        self.rule_count = len(rules)

    @property
    def allowed_ids_text(self) -> str:
        """The sorted candidate ids as a Python list's repr: the published release leaks it in
        set_slot errors (docs/compatibility.md §3.3)."""
        return repr(sorted(self.candidate_ids))


class CompiledParts(NamedTuple):
    """Everything an instance compiles to, as plain values: what :class:`CompiledInstance` is built
    from, and what a cache entry stores (:mod:`ace_gym.instance.cache`).

    ``header``: the instance id, rows, cols and decoy budget (``meta.branch_budget``); ``numeric``
    and ``categorical``: :func:`item_columns` over the items in ``item_ids`` order; ``truth`` and
    ``initial``: flat row-major int32 item indices (-1 = empty); ``slots``: each hidden slot's
    row, col and active rules; ``candidates`` and ``valid``: the slots' candidate indices and
    slot-validity masks, a row per slot; ``global_bounds``: the domain's global rules' bounds with
    their reason texts (None: rendered from the bound)."""

    header: tuple[str, int, int, int]
    item_ids: tuple[str, ...]
    numeric: dict[str, np.ndarray]
    categorical: dict[str, tuple[np.ndarray, tuple[str, ...]]]
    truth: np.ndarray
    initial: np.ndarray
    slots: Sequence[tuple[int, int, SlotRules]]
    candidates: np.ndarray
    valid: np.ndarray
    global_bounds: tuple[tuple[int, str | None], ...]
    task_instruction: str


class CompiledInstance:
    """Read-only arrays compiled from one validated :class:`Instance`.

    Items are numbered in ``item_pool`` order. ``numeric[attr]`` is an int64 column over items;
    ``categorical[attr]`` is ``(codes, vocabulary)``. Grids are flat row-major int32 arrays of item
    indices with -1 for an empty cell. ``cell_slot[cell]`` is the hidden-slot index or -1.
    ``items`` holds the pool's item dicts in that order (``item(k)`` one of them);
    ``task_instruction`` is the instance's.

    ``CompiledInstance(instance, domain)`` compiles a validated model; an instance read from a
    cache entry (:func:`ace_gym.instance.cached_instance.compiled_from_entry`) is built from the same
    :class:`CompiledParts` and builds its pydantic ``instance`` and its item dicts on first use
    only (an episode needs neither the model nor more than the items it shows).
    """

    origin: tuple[Origin, int] | None = None
    """The dataset and index it was compiled from, when it was (set by the dataset)."""

    def __init__(
        self, instance: Instance, domain: Domain, item_table: Mapping[str, Sequence[Any]] | None = None
    ) -> None:
        """``item_table``: the pool's values by item key in pool order, when the caller has them
        (validation does: :func:`ace_gym.instance.validation.check_instance`); read from the items
        otherwise."""
        self._build(domain, parts_of(instance, domain, item_table), lambda: instance, None)

    @classmethod
    def from_parts(
        cls,
        domain: Domain,
        parts: CompiledParts,
        instance: Callable[[], Instance],
        item_rows: ItemRows,
    ) -> CompiledInstance:
        """The instance ``parts`` describe, whose pydantic model ``instance()`` builds when it is
        first used and whose item dicts ``item_rows`` builds one at a time as they are looked up."""
        compiled = cls.__new__(cls)
        compiled._build(domain, parts, instance, item_rows)
        return compiled

    def _build(
        self,
        domain: Domain,
        parts: CompiledParts,
        instance: Callable[[], Instance],
        item_rows: ItemRows | None,
    ) -> None:
        self._instance_source = instance
        self._item_rows = item_rows
        """Where an instance from a cache entry reads its item dicts, each on its first lookup
        (None for an instance compiled from its model, which holds them)."""
        self.domain = domain
        self.instance_id, self.rows, self.cols, self.decoy_budget = parts.header
        self.n_cells = self.rows * self.cols
        self.hidden_count = len(parts.slots)
        self.item_ids = item_ids = parts.item_ids
        self.numeric, self.categorical = parts.numeric, parts.categorical
        self.task_instruction = parts.task_instruction
        self.truth, self.initial = _frozen(parts.truth), _frozen(parts.initial)
        self.initial_grid: tuple[int, ...] = tuple(self.initial.tolist())
        candidates, valid = self._candidates, self._valid = _frozen(parts.candidates), _frozen(parts.valid)
        slots = [
            CompiledSlot(row, col, row * self.cols + col, candidates[s], valid[s], rules, item_ids)
            for s, (row, col, rules) in enumerate(parts.slots)
        ]
        self.slots: tuple[CompiledSlot, ...] = tuple(slots)
        cell_slot = [-1] * self.n_cells
        for s, slot in enumerate(slots):
            cell_slot[slot.cell] = s
        self.cell_slot_list: tuple[int, ...] = tuple(cell_slot)
        self.cell_slot = _frozen(np.asarray(cell_slot, dtype=np.int32))
        """Each cell's hidden-slot index, or -1 (read-only int32)."""
        self.global_rules: tuple[CompiledGlobalRule, ...] = tuple(
            compile_global_rule(rule, bound, domain, self.numeric, self.categorical, reason)
            for rule, (bound, reason) in zip(domain.global_rules, parts.global_bounds, strict=True)
        )
        self.visible_items: dict[str, int] = {item_ids[i]: i for i in self.initial_grid if i >= 0}
        """The ids of the items the initial grid shows, each with its item number."""
        self.visible_ids: frozenset[str] = frozenset(self.visible_items)
        self.initial_totals = RunningTotals(self.global_rules, self.cols, self.initial_grid)
        """The running totals of the initial grid; never changed (an episode works on a copy)."""
        self._derived = _DerivedStore()

    def parts(self) -> CompiledParts:
        """The :class:`CompiledParts` this instance was built from (reason texts rendered)."""
        return CompiledParts(
            (self.instance_id, self.rows, self.cols, self.decoy_budget),
            self.item_ids,
            self.numeric,
            self.categorical,
            self.truth,
            self.initial,
            [(slot.row, slot.col, slot.rules) for slot in self.slots],
            self._candidates,
            self._valid,
            tuple((rule.bound, rule.reason) for rule in self.global_rules),
            self.task_instruction,
        )

    @cached_property
    def instance(self) -> Instance:
        """The validated model this instance was compiled from."""
        return self._instance_source()

    @cached_property
    def items(self) -> tuple[dict[str, int | str], ...]:
        """The pool's item dicts, in item order (index = item number); the same dicts :meth:`item`
        returns."""
        rows = self._item_rows
        if rows is None:
            return tuple(self.instance.item_pool.values())
        return tuple(map(rows.item, range(len(self.item_ids))))

    @cached_property
    def item_index(self) -> dict[str, int]:
        """Each item id's item number."""
        return dict(zip(self.item_ids, range(len(self.item_ids)), strict=True))

    def item(self, k: int) -> dict[str, int | str]:
        """Item number ``k``'s dict, ``items[k]`` (read-only, shared): on an instance from a cache
        entry, built alone (once)."""
        rows = self._item_rows
        return self.items[k] if rows is None else rows.item(k)

    def item_values(self, key: str, items: Sequence[int]) -> list[Any]:
        """The values item key ``key`` has in items ``items`` (item numbers), as their dicts hold
        them: read from the compiled columns where they hold the key (validation guarantees the
        same values), else from the item dicts."""
        if key in self.numeric:
            return self.numeric[key].take(items).tolist()  # type: ignore[no-any-return]
        if key in self.categorical:
            codes, vocabulary = self.categorical[key]
            return [vocabulary[code] for code in codes.take(items).tolist()]
        return [self.item(i)[key] for i in items]

    def derived(self, make: Callable[[CompiledInstance], _T]) -> _T:
        """``make(self)``, built on the first call with ``make`` and kept with this instance for
        every later episode on it: the one store of what is derived from an instance (the tool
        layer's reply texts, the env's reset texts), gone with the instance and emptied by
        :func:`forget_derived`."""
        return self._derived.get(make, self)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickles as a reference into its (file-backed) dataset when it has one
        if self.origin is not None:
            dataset, index = self.origin
            return (dataset.compiled, (index,))
        return (CompiledInstance, (self.instance, self.domain))


class _DerivedStore:
    """The values :meth:`CompiledInstance.derived` keeps, by the function that made them; emptied
    when :func:`forget_derived` forgot every instance's since they were stored."""

    __slots__ = ("epoch", "values")
    forgotten = 0
    """How many times every store was emptied (:func:`forget_derived` with no instances)."""

    def __init__(self) -> None:
        self.values: dict[Callable[..., Any], Any] = {}
        self.epoch = _DerivedStore.forgotten

    def get(self, make: Callable[[CompiledInstance], _T], compiled: CompiledInstance) -> _T:
        if self.epoch != _DerivedStore.forgotten:
            self.values.clear()
            self.epoch = _DerivedStore.forgotten
        found = self.values.get(make)
        if found is None:
            found = self.values.setdefault(make, make(compiled))  # two threads building it keep one
        return found  # type: ignore[no-any-return]

    def forget(self) -> None:
        self.values.clear()


def forget_derived(instances: Iterable[CompiledInstance] | None = None) -> None:
    """Empty the stores of :meth:`CompiledInstance.derived` of ``instances`` (of every instance
    when None): the next episode on one builds what it needs again, as its first did. Episodes
    under way keep what they hold."""
    if instances is None:
        _DerivedStore.forgotten += 1
        return
    for compiled in instances:
        compiled._derived.forget()


def parts_of(
    instance: Instance, domain: Domain, item_table: Mapping[str, Sequence[Any]] | None = None
) -> CompiledParts:
    """The :class:`CompiledParts` of a validated ``instance`` (``item_table``: see :class:`CompiledInstance`)."""
    meta = instance.meta
    item_ids = tuple(instance.item_pool)
    numeric, categorical = (
        item_columns(tuple(instance.item_pool.values()), domain)
        if item_table is None
        else table_columns({attribute.name: item_table[attribute.name] for attribute in domain.attributes}, domain)
    )
    index_of = dict(zip(item_ids, range(len(item_ids)), strict=True)).__getitem__
    candidates = np.asarray([[index_of(i) for i in slot.candidate_ids] for slot in instance.slots], dtype=np.int32)
    slot_rules = [active_slot_rules(slot, domain) for slot in instance.slots]
    valid = np.ones(candidates.shape, dtype=bool)
    for rule in domain.slot_rules:  # one array operation per rule, over the slots it binds
        bounds = {s: bound for s, rules in enumerate(slot_rules) for name, *_, bound in rules if name == rule.name}
        if bounds:
            ruled = np.fromiter(bounds, dtype=np.intp, count=len(bounds))
            bound_column = np.fromiter(bounds.values(), dtype=np.int64, count=len(bounds))[:, None]
            valid[ruled] &= slot_rule_mask(numeric[rule.attribute][candidates[ruled]], rule.kind, bound_column)
    return CompiledParts(
        (instance.instance_id, meta.rows, meta.cols, meta.branch_budget),
        item_ids,
        numeric,
        categorical,
        np.asarray([index_of(i) for row in instance.truth_solution for i in row], dtype=np.int32),
        np.asarray(
            [-1 if i is None else index_of(i) for row in instance.partial_solution for i in row], dtype=np.int32
        ),
        [(slot.row, slot.col, rules) for slot, rules in zip(instance.slots, slot_rules, strict=True)],
        candidates,
        valid,
        tuple((int(instance.global_constraints[rule.name]), None) for rule in domain.global_rules),
        instance.task_instruction,
    )


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def item_columns(
    items: Sequence[Mapping[str, Any]], domain: Domain, names: Sequence[str] | None = None
) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, tuple[str, ...]]]]:
    """Read-only attribute columns over ``items``: ``numeric[attr]`` int64 values and
    ``categorical[attr]`` ``(codes, vocabulary)``, the vocabulary being the sorted union of the
    domain's declared values and any others present. ``names`` limits the columns to those
    attributes (the items need only hold them); None means every attribute of the domain."""
    attributes = domain.attributes if names is None else [domain.attribute(name) for name in names]
    return table_columns({attribute.name: [item[attribute.name] for item in items] for attribute in attributes}, domain)


def table_columns(
    table: Mapping[str, Sequence[Any]], domain: Domain
) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, tuple[str, ...]]]]:
    """:func:`item_columns` from the items' values by attribute: ``table`` maps attributes of
    ``domain`` (in the order the columns come out) to their values over the items."""
    numeric: dict[str, np.ndarray] = {}
    categorical: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
    for name, column in table.items():
        attribute = domain.attribute(name)
        if isinstance(attribute, NumericAttribute):
            numeric[name] = _frozen(np.asarray(column, dtype=np.int64))
        else:
            present = set(column)
            if any(type(value) is not str for value in present):  # str subclasses too: the vocabulary holds str
                column = list(map(str, column))
                present = set(column)
            vocabulary = tuple(sorted(present.union(attribute.values)))
            code = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
            codes = np.fromiter(map(code.__getitem__, column), dtype=np.int32, count=len(column))
            categorical[name] = (_frozen(codes), vocabulary)
    return numeric, categorical


def active_slot_rules(entry: SlotEntry, domain: Domain) -> SlotRules:
    """A slot's active rules as ``(rule name, attribute, kind, bound)`` in the domain's rule order."""
    active = entry.slot_constraints["active_rule_names"]
    return tuple(
        (rule.name, rule.attribute, rule.kind, int(entry.slot_constraints[rule.name]))  # type: ignore[arg-type]
        for rule in domain.slot_rules
        if rule.name in active  # type: ignore[operator]
    )

"""The published ACE dataset format: a validating loader, and compilation.

Data flows one way: JSON file -> validated :class:`DatasetFile` -> :class:`CompiledInstance`
(numpy arrays the tools and the scorer work on). A broken file raises one :class:`DatasetError`
naming the file, the JSON path and the problem, before anything is cached or returned; a
``dataset``/``path`` argument that names no regular file raises :class:`ConfigError` naming it.

The schema models (:class:`DatasetFile`, :class:`Instance`, :class:`InstanceMeta`,
:class:`SlotEntry`, :class:`Position`) live in :mod:`ace_gym.dataset_schema`. They are importable
from here too, imported (with pydantic) on first use: a file validated before is loaded from its
:mod:`ace_gym.dataset_cache` entry, and its instances set up, without them.

What a file must satisfy beyond the schema (every published and bundled file does):

* Size: at most :data:`MAX_DATASET_BYTES` (256 MiB) of JSON, counted after decompression for
  ``.json.gz``; decompression is streamed and abandoned at the limit, so a small file that
  inflates without end costs no more memory than the limit.
* Keys: no JSON object repeats a key (a reader keeps the last value only, so an item id listed
  twice in ``item_pool`` would silently lose the first item).
* Header: every instance has the file's ``rows`` and ``cols``, its ``meta.hidden_slots`` and
  ``meta.branch_budget`` appear in the file's ``hidden_slots`` and ``branch_budget`` lists, its
  ``meta.requested_candidates_per_slot`` is the file's ``candidates_per_slot``; instance ids
  are unique and at most :data:`MAX_INSTANCE_ID_LENGTH` (256) characters long (they name
  episodes in records, replays and URLs), and ``num_instances`` counts the instances.
* Items: the domain's keys, the pool key as id, integers for numeric attributes and strings
  otherwise; numeric values within :func:`accepted_ranges` and categorical values among the
  domain's declared values (``name`` is free text). The accepted range of an attribute is its
  declared ``[low, high]`` with the low end extended down to the ``floor`` of any ``sum_min``
  rule on it, because the published release's targeted decoy sampling reaches there: its 5x5
  data holds decoys with meal protein, shopping calories and workforce skill down to 0. Every
  accepted value is a small non-negative integer, so all aggregates stay far inside int64 and
  the scorer's array sums and the tools' running totals agree on every accepted file.
* Thresholds: every global rule of the domain, and no other, has an integer threshold in
  ``[0, threshold_limit]``, the values its aggregate can take on the grid (sums: cells x high,
  counts and repeats: cells, ``max_row_sum``: cols x high, ``max_cap``: high). Every active slot
  rule has an integer bound within the accepted range of its attribute; bounds outside the
  rule's usual list are fine (the release falls back to the truth's own value).
* Grids and slots: ``truth_solution`` and ``partial_solution`` are rows x cols, the partial grid
  is the truth with the hidden cells null, ``hidden_slots`` and ``slots`` list those cells in
  row-major order; every slot has ``is_hidden`` true. Each slot holds ``meta.candidates_per_slot``
  distinct pool ids, which its
  truth, ``decoy_ids`` and ``filter_candidate_ids`` list exactly once; ``allocated_budget``
  counts its decoys; its ``slot_constraints`` name each active rule once, with ``row``/``col``
  (if present) equal to the slot's and no other key.
* Branches: the slots with decoys are the branch slots, ranked 0, 1, ... in row-major order
  (``branch_rank`` null elsewhere); ``meta.branch_slot_count``, ``meta.branch_budget_allocations``
  (in rank order) and ``meta.branch_budget`` (their sum) agree with them.
* Truth: the truth passes every active slot rule and every global rule, checked with the
  constraint code the scorer uses.
* Instruction: ``task_instruction`` is exactly the text
  :func:`ace_gym.prompts.render_task_instruction` renders from the constraints (the published
  format); a difference is reported at its first line, naming the rule that line states.

What decoys and filters do (decoys pass the slot rules and break a global rule, filters break a
slot rule) is not checked at load: :func:`ace_gym.generators.certify` checks it.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import stat
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, cached_property, lru_cache, partial
from importlib import resources
from itertools import chain, compress, zip_longest
from json.encoder import encode_basestring_ascii
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import numpy as np

from ace_gym import dataset_cache
from ace_gym.constraints import (
    CompiledGlobalRule,
    Reading,
    RunningTotals,
    aggregate,
    compile_global_rule,
    first_global_violation,
    global_rule_text,
    kind_of,
    slot_rule_mask,
    slot_rule_text,
    slot_rules_mask,
)
from ace_gym.dataset_cache import CachedDataset
from ace_gym.domains import DOMAINS, Domain, GlobalRule, NumericAttribute
from ace_gym.errors import ConfigError, DatasetError, did_you_mean
from ace_gym.lazy_exports import lazy_exports
from ace_gym.prompts import render_task_instruction
from ace_gym.text import clipped

if TYPE_CHECKING:
    from pydantic import ValidationError

    from ace_gym.dataset_schema import DatasetFile, Instance, SlotEntry
    from ace_gym.dataset_schema import InstanceMeta as InstanceMeta  # re-exported: typed for importers
    from ace_gym.dataset_schema import Position as Position

# the schema models, re-exported: imported (with pydantic) on first access
__getattr__, __dir__ = lazy_exports(
    __name__, "ace_gym.dataset_schema", ["DatasetFile", "Instance", "InstanceMeta", "Position", "SlotEntry"]
)


# --------------------------------------------------------------------------------------------
# compiled form


class CompiledSlot:
    """A hidden cell ready for the tools: candidate indices, slot validity, cached texts.

    ``candidate_ids``, ``item_of_id``, ``valid_items``, ``allowed_ids_text`` and the row views
    ``candidates`` and ``slot_valid`` are built on first use (by :meth:`__getattr__`, which
    stores each in its slot, so that later reads are plain attribute reads): setting an episode
    up reads none of them, and an instance's slots are shared by every episode on it.
    """

    __slots__ = (
        "_arrays",
        "_index",
        "_item_ids",
        "allowed_ids_text",
        "candidate_ids",
        "candidate_items",
        "candidates",
        "cell",
        "col",
        "item_of_id",
        "row",
        "rule_count",
        "rules",
        "slot_valid",
        "valid_items",
    )

    def __init__(
        self,
        row: int,
        col: int,
        cell: int,
        candidate_items: tuple[int, ...],
        rules: tuple[tuple[str, str, str, int], ...],
        item_ids: tuple[str, ...],
        arrays: tuple[np.ndarray, np.ndarray],
        index: int,
    ) -> None:
        """``candidate_items``: the candidates' item indices; ``item_ids``: the instance's;
        ``arrays``: the instance's read-only candidate and slot-validity tables, this slot's
        rows being row ``index`` of each."""
        self.row, self.col, self.cell = row, col, cell
        self.candidate_items = candidate_items
        self.rules = rules  # (rule name, attribute, kind, bound) in the domain's rule order
        self.rule_count = len(rules)
        self._item_ids, self._arrays, self._index = item_ids, arrays, index

    # built on first use by __getattr__
    candidate_ids: tuple[str, ...]  # the candidates' item ids
    item_of_id: dict[str, int]  # candidate id -> item index
    valid_items: frozenset[int]  # the candidates that pass the slot's rules
    candidates: np.ndarray  # the candidates' item indices, int32
    slot_valid: np.ndarray  # whether each candidate passes the slot's rules
    allowed_ids_text: str
    """The sorted candidate ids as a Python list's repr: the published release leaks it in
    set_slot errors (docs/compatibility.md §3.3)."""

    def __getattr__(self, name: str) -> Any:
        # called only while the slot ``name`` is empty
        value: Any
        # each built from the tables, not through another of them: a slot's first set_slot
        # builds ``item_of_id`` and ``valid_items`` alone
        if name == "candidate_ids":
            value = tuple([self._item_ids[i] for i in self.candidate_items])
        elif name == "item_of_id":
            item_ids = self._item_ids
            value = {item_ids[i]: i for i in self.candidate_items}
        elif name == "valid_items":
            value = frozenset(compress(self.candidate_items, self._arrays[1][self._index].tolist()))
        elif name == "allowed_ids_text":
            value = repr(sorted(self.candidate_ids))
        elif name == "candidates":
            value = self._arrays[0][self._index]
        elif name == "slot_valid":
            value = self._arrays[1][self._index]
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        setattr(self, name, value)
        return value


_T = TypeVar("_T")


class _built_once(Generic[_T]):  # a decorator, named as functools.cached_property is
    """functools.cached_property as Python 3.12 has it: built on first access and kept in the
    instance's ``__dict__``, without the lock 3.11 takes on every first access (~0.3 µs, paid by
    an episode's first calls). Two threads building it at once keep one value."""

    def __init__(self, build: Callable[[Any], _T]) -> None:
        self._build, self._name = build, build.__name__
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> _built_once[_T]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...
    def __get__(self, instance: object | None, owner: type | None = None) -> _T | _built_once[_T]:
        if instance is None:
            return self
        return instance.__dict__.setdefault(self._name, self._build(instance))  # type: ignore[no-any-return]


class CompiledInstance:
    """Read-only arrays compiled from one validated :class:`Instance`.

    Items are numbered in ``item_pool`` order. ``numeric[attr]`` is an int64 column over items;
    ``categorical[attr]`` is ``(codes, vocabulary)``. Grids are flat row-major int32 arrays of item
    indices with -1 for an empty cell. ``cell_slot[cell]`` is the hidden-slot index or -1.
    ``items`` holds the pool's item dicts in that order (``item(k)`` one of them);
    ``task_instruction`` is the instance's. An instance compiled from a cache entry
    (:meth:`from_entry`) builds its pydantic ``instance`` on first use only, and its item dicts
    one at a time as they are looked up (:meth:`item`), without the model (an episode needs no
    model; its first item lookup builds that item alone).
    """

    def __init__(
        self, instance: Instance, domain: Domain, item_table: Mapping[str, Sequence[Any]] | None = None
    ) -> None:
        """``item_table``: the pool's values by item key in pool order, when the caller has them
        (validation does: :func:`check_instance`); read from the items otherwise."""
        self.__dict__["instance"] = instance
        self.items = tuple(instance.item_pool.values())
        self.task_instruction = instance.task_instruction
        meta = instance.meta
        item_ids = tuple(instance.item_pool)
        numeric, categorical = (
            item_columns(self.items, domain)
            if item_table is None
            else table_columns({attribute.name: item_table[attribute.name] for attribute in domain.attributes}, domain)
        )
        item_index = dict(zip(item_ids, range(len(item_ids)), strict=True))
        index_of = item_index.__getitem__
        candidates = np.asarray([[index_of(i) for i in slot.candidate_ids] for slot in instance.slots], dtype=np.int32)
        slot_rules = [active_slot_rules(slot, domain) for slot in instance.slots]
        valid = np.ones(candidates.shape, dtype=bool)
        for rule in domain.slot_rules:  # one array operation per rule, over the slots it binds
            bounds = {s: bound for s, rules in enumerate(slot_rules) for name, *_, bound in rules if name == rule.name}
            if bounds:
                ruled = np.fromiter(bounds, dtype=np.intp, count=len(bounds))
                bound_column = np.fromiter(bounds.values(), dtype=np.int64, count=len(bounds))[:, None]
                valid[ruled] &= slot_rule_mask(numeric[rule.attribute][candidates[ruled]], rule.kind, bound_column)
        self._assemble(
            domain,
            (instance.instance_id, meta.rows, meta.cols, meta.branch_budget),
            item_ids,
            (numeric, categorical),
            (
                np.asarray([index_of(i) for row in instance.truth_solution for i in row], dtype=np.int32),
                np.asarray(
                    [-1 if i is None else index_of(i) for row in instance.partial_solution for i in row], dtype=np.int32
                ),
            ),
            [(slot.row, slot.col, rules) for slot, rules in zip(instance.slots, slot_rules, strict=True)],
            (candidates, valid),
            tuple((int(instance.global_constraints[rule.name]), None) for rule in domain.global_rules),
            item_index,
        )

    @classmethod
    def from_entry(
        cls,
        entry: Mapping[str, Any],
        domain: Domain,
        instance: Callable[[], Instance],
        item_rows: Callable[[], ItemRows],
    ) -> CompiledInstance:
        """The compiled form a cache entry holds (:meth:`entry`, written from an instance that
        passed validation), read without building the pydantic model or looking any id up;
        ``instance()`` builds that model when :attr:`instance` is first used, and
        ``item_rows()`` reads the instance's item dicts (from its :func:`entry_item_texts`) when
        one is first looked up (:meth:`item`)."""
        compiled = cls.__new__(cls)
        compiled._instance_source, compiled._item_rows_source = instance, item_rows
        compiled.task_instruction = entry["task_instruction"]
        numeric_names, categorical_names = domain.numeric_attributes, domain.categorical_attributes
        heads = [(rule.name, rule.attribute, rule.kind) for rule in domain.slot_rules]
        header, item_count, slot_count, rule_count = entry["header"], len(entry["item_ids"]), entry["slots"], len(heads)
        numeric_table, codes, candidates, valid, grids, slot_table, global_bounds = _unpacked(
            entry["arrays"],
            entry["dtype"],
            [
                (len(numeric_names), item_count),
                (len(categorical_names), item_count),
                (slot_count, entry["k"]),
                (slot_count, entry["k"]),
                (2, header[1] * header[2]),
                (slot_count, 2 + 2 * rule_count),
                (1, len(domain.global_rules)),
            ],
        )
        numeric = dict(zip(numeric_names, _frozen(numeric_table.astype(np.int64)), strict=True))
        categorical = {
            name: (column, tuple(vocabulary))
            for name, column, vocabulary in zip(
                categorical_names, _frozen(codes.astype(np.int32)), entry["vocabularies"], strict=True
            )
        }
        # a slot's row of the table: its row, col, whether it has each slot rule (0/1), their bounds
        flags = range(2, 2 + rule_count)  # the columns of the 0/1s; a bound is rule_count columns on
        slots = [
            (row[0], row[1], tuple([(*heads[k - 2], row[k + rule_count]) for k in flags if row[k]]))
            for row in slot_table.tolist()
        ]
        truth, initial = _frozen(grids.astype(np.int32))
        compiled._assemble(
            domain,
            tuple(header),
            tuple(entry["item_ids"]),
            (numeric, categorical),
            (truth, initial),
            slots,
            (candidates.astype(np.int32), valid.astype(bool)),
            tuple(zip(global_bounds[0].tolist(), entry["global_reasons"], strict=True)),
        )
        return compiled

    def entry(self) -> bytes:
        """This compiled form as the JSON :meth:`from_entry` reads (what a cache entry stores):
        packed into ``arrays`` (:func:`_packed`): the item columns, the categorical codes, each
        slot's candidates and validity (0/1), the truth and the initial grid, each slot's row,
        col, which of the domain's slot rules it has (0/1) and their bounds (0 where it has
        none), and the global rules' bounds in the domain's order; beside them the reason texts
        of the global rules and the task instruction."""
        from pydantic_core import to_json  # written once a file passed validation: pydantic is loaded

        domain = self.domain
        categorical = [self.categorical[name] for name in domain.categorical_attributes]
        names = [rule.name for rule in domain.slot_rules]
        slot_table = []
        for slot in self.slots:
            bound_of = {name: bound for name, _, _, bound in slot.rules}
            slot_table.append(
                [slot.row, slot.col, *[name in bound_of for name in names], *[bound_of.get(name, 0) for name in names]]
            )
        arrays, dtype = _packed(
            [
                *[self.numeric[name] for name in domain.numeric_attributes],
                *[codes for codes, _ in categorical],
                *[slot.candidates for slot in self.slots],
                *[slot.slot_valid for slot in self.slots],
                self.truth,
                self.initial,
                np.asarray(slot_table, dtype=np.int64),
                np.asarray([rule.bound for rule in self.global_rules], dtype=np.int64),
            ]
        )
        return to_json(
            {
                "header": [self.instance_id, self.rows, self.cols, self.decoy_budget],
                "item_ids": self.item_ids,
                "vocabularies": [vocabulary for _, vocabulary in categorical],
                "slots": len(self.slots),
                "k": len(self.slots[0].candidate_items) if self.slots else 0,
                "arrays": arrays,
                "dtype": dtype,
                "global_reasons": [rule.reason for rule in self.global_rules],
                "task_instruction": self.task_instruction,
            }
        )

    def _assemble(
        self,
        domain: Domain,
        header: tuple[str, int, int, int],
        item_ids: tuple[str, ...],
        columns: tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, tuple[str, ...]]]],
        grids: tuple[np.ndarray, np.ndarray],
        slots: Sequence[tuple[int, int, tuple[tuple[str, str, str, int], ...]]],
        candidates: tuple[np.ndarray, np.ndarray],
        global_bounds: tuple[tuple[int, str | None], ...],
        item_index: dict[str, int] | None = None,
    ) -> None:
        """``header``: the instance id, rows, cols and decoy budget (``meta.branch_budget``);
        ``columns``: :func:`item_columns` over the items, in ``item_ids`` order; ``grids``: the
        truth and the initial grid, flat row-major int32 item indices (-1 = empty); ``slots``: each
        hidden slot's row, col and active rules; ``candidates``: the slots' candidate indices
        and slot-validity masks, one row per slot; ``global_bounds``: the domain's global rules'
        bounds and their reason texts (None: rendered here); ``item_index``: each item id's index,
        when the caller has built it."""
        self.domain = domain
        self.instance_id, self.rows, self.cols, self.decoy_budget = header
        self.n_cells = self.rows * self.cols
        self.hidden_count = len(slots)
        self.item_ids = item_ids
        if item_index is not None:
            self.__dict__["item_index"] = item_index
        self.numeric, self.categorical = columns
        self.truth, self.initial = (_frozen(grid) for grid in grids)
        self.initial_grid: tuple[int, ...] = tuple(self.initial.tolist())
        candidate_rows, valid_rows = (_frozen(array) for array in candidates)  # each slot's row: a read-only view
        cell_slot = [-1] * self.n_cells
        compiled_slots, tables = [], (candidate_rows, valid_rows)
        for s, ((row, col, rules), items) in enumerate(zip(slots, candidate_rows.tolist(), strict=True)):
            cell = row * self.cols + col
            cell_slot[cell] = s
            compiled_slots.append(CompiledSlot(row, col, cell, tuple(items), rules, item_ids, tables, s))
        self.cell_slot_list: tuple[int, ...] = tuple(cell_slot)
        self.slots: tuple[CompiledSlot, ...] = tuple(compiled_slots)
        self.global_rules: tuple[CompiledGlobalRule, ...] = tuple(
            compile_global_rule(rule, bound, domain, self.numeric, self.categorical, reason)
            for rule, (bound, reason) in zip(domain.global_rules, global_bounds, strict=True)
        )

    _instance_source: Callable[[], Instance]
    _item_rows_source: Callable[[], ItemRows]

    @cached_property
    def instance(self) -> Instance:
        """The validated model this instance was compiled from."""
        return self._instance_source()

    @cached_property
    def items(self) -> tuple[dict[str, int | str], ...]:
        """The pool's item dicts, in item order (index = item number); the same dicts :meth:`item`
        returns."""
        return tuple(map(self._item_rows.item, range(len(self.item_ids))))

    def item(self, k: int) -> dict[str, int | str]:
        """Item number ``k``'s dict, ``items[k]`` (read-only, shared): on an instance from a cache
        entry whose items were not all built, built alone (once)."""
        items = self.__dict__.get("items")
        return self._item_rows.item(k) if items is None else items[k]

    def item_json(self, k: int) -> str | None:
        """Item number ``k``'s dict as ``json.dumps(item, ensure_ascii=False)`` writes it, read
        from its cache entry line without building the dict (:meth:`ItemRows.item_json`); None
        where that line cannot show it as is, or the items are built dicts: then dump :meth:`item`."""
        if "items" in self.__dict__:
            return None
        return self._item_rows.item_json(k)

    def item_values(self, key: str, items: Sequence[int]) -> list[Any]:
        """The values item key ``key`` has in items ``items`` (item numbers), as their dicts hold
        them: read from the compiled columns where they hold the key (validation guarantees the
        same values), else from the item dicts."""
        if key in self.numeric:
            return self.numeric[key].take(items).tolist()  # type: ignore[no-any-return]
        if key in self.categorical:
            codes, vocabulary = self.categorical[key]
            return [vocabulary[code] for code in codes.take(items).tolist()]
        built = self.__dict__.get("items")  # :meth:`item`'s two cases, told once for every item
        item = self._item_rows.item if built is None else built.__getitem__
        return [item(i)[key] for i in items]

    @_built_once
    def _item_rows(self) -> ItemRows:
        return self._item_rows_source()

    origin: tuple[Dataset, int] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # pickles as a reference into its (file-backed) dataset when it has one
        if self.origin is not None:
            return (_compiled_from, self.origin)
        return (CompiledInstance, (self.instance, self.domain))

    # built on first use: setting an episode up reads none of them

    @cached_property
    def item_index(self) -> dict[str, int]:
        """Each item id's item number."""
        return dict(zip(self.item_ids, range(len(self.item_ids)), strict=True))

    @_built_once
    def visible_items(self) -> dict[str, int]:
        """The ids of the items the initial grid shows, each with its item number."""
        return {self.item_ids[i]: i for i in self.initial_grid if i >= 0}

    @cached_property
    def visible_ids(self) -> frozenset[str]:
        """The ids of the items the initial grid shows."""
        return frozenset(self.visible_items)

    @cached_property
    def cell_slot(self) -> np.ndarray:
        """``cell_slot_list`` as a read-only int32 array: each cell's hidden-slot index, or -1."""
        return _frozen(np.asarray(self.cell_slot_list, dtype=np.int32))

    @_built_once
    def initial_totals(self) -> RunningTotals:
        """The running totals of the initial grid, built on first use; never changed (an episode
        works on a :meth:`RunningTotals.copy`, which costs a fraction of building them)."""
        return RunningTotals(self.global_rules, self.cols, self.initial_grid)


class ItemRows:
    """The item dicts of a compiled instance from a cache entry, each built on its first lookup
    (then kept) from the instance's :func:`entry_item_texts`: the item keys' order, the items
    listing them in another order, and each item's line of values, found by its number and parsed
    when that item is built (or written as the dict's JSON: :meth:`item_json`). Each dict equals
    the validated item's, its keys in the order that item had."""

    __slots__ = ("_built", "_data", "_keys", "_orders", "_start", "_width")

    def __init__(self, data: bytes, start: int = 0) -> None:
        """``data``: holds the :func:`entry_item_texts` from ``start`` on (read in place)."""
        self._data, self._start = data, start
        self._width = data.index(b"\n", start) + 1 - start
        self._keys, self._orders = _item_header(data[start : start + self._width].rstrip())
        self._built: dict[int, dict[str, int | str]] = {}

    def item(self, k: int) -> dict[str, int | str]:
        """Item number ``k``'s dict (the same dict on every call)."""
        found = self._built.get(k)
        if found is None:
            found = dict(zip(self._keys, _JSON_VALUE.raw_decode(self._line(k))[0], strict=True))  # ~1/3 of json.loads
            order = self._orders.get(k)
            if order is not None:
                found = {key: found[key] for key in order}
            found = self._built.setdefault(k, found)  # two threads building it keep one
        return found

    def item_json(self, k: int) -> str | None:
        """``json.dumps(self.item(k), ensure_ascii=False)``, written from the item's line without
        building its dict (half the cost); None for an item whose keys come in another
        order, or whose line holds an escape (a string that JSON shows otherwise than as itself)."""
        if k in self._orders:
            return None
        line = self._line(k)
        if "\\" in line:
            return None
        values = _JSON_VALUE.raw_decode(line)[0]
        return _item_template(self._keys, tuple(map(type, values))) % tuple(values)

    def _line(self, k: int) -> str:
        start = self._start + (k + 1) * self._width  # the header first
        return self._data[start : start + self._width].decode("ascii")


_JSON_VALUE = json.JSONDecoder()
"""Reads the JSON value a text starts with (an item line: its padding after the value unread)."""


@lru_cache(maxsize=64)  # the instances of a file mostly share one header: parsed once
def _item_header(header: bytes) -> tuple[tuple[str, ...], Mapping[int, tuple[str, ...]]]:
    """The item keys' order and the exceptions (by item number) of an :func:`entry_item_texts` header."""
    parsed = json.loads(header)
    exceptions = parsed.get("order_exceptions", {})
    return tuple(parsed["keys"]), MappingProxyType({int(k): tuple(order) for k, order in exceptions.items()})


@lru_cache(maxsize=64)  # validation makes each key's values all ints or all strings: one per file, mostly
def _item_template(keys: tuple[str, ...], kinds: tuple[type, ...]) -> str:
    """The %-template of the JSON of an item dict with ``keys`` (in that order) whose values are
    of ``kinds``: ints (``%s`` writes them as JSON does) and strings that JSON shows as they are
    (``"%s"``, nothing to escape)."""
    fields = [
        json.dumps(key, ensure_ascii=False).replace("%", "%%") + (": %s" if kind is int else ': "%s"')
        for key, kind in zip(keys, kinds, strict=True)
    ]
    return "{" + ", ".join(fields) + "}"


def _compiled_from(dataset: Dataset, index: int) -> CompiledInstance:
    return dataset.compiled(index)


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


_PACKED_TYPES = ("<i2", "<i4", "<i8")
"""The little-endian integer types :func:`_packed` chooses from, smallest first."""


def _packed(arrays: Sequence[np.ndarray]) -> tuple[str, str]:
    """``arrays`` (integer or boolean) flattened and joined in the smallest type of
    :data:`_PACKED_TYPES` that holds every value, as hex text, and that type's name: a JSON form
    no longer than the numbers written out, which reads back (:func:`_unpacked`) with one decode
    and no per-value work (hex decodes 3x faster than base64)."""
    joined = np.concatenate([np.ravel(array) for array in arrays]) if arrays else np.zeros(0, dtype=np.int64)
    joined = joined.astype(np.int64)
    low, high = (int(joined.min()), int(joined.max())) if joined.size else (0, 0)
    dtype = next(t for t in _PACKED_TYPES if np.iinfo(t).min <= low and high <= np.iinfo(t).max)
    return joined.astype(dtype).tobytes().hex(), dtype


def _unpacked(text: str, dtype: str, shapes: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """The arrays :func:`_packed` joined, read-only, of these ``shapes`` in order."""
    joined = np.frombuffer(bytes.fromhex(text), dtype=dtype)
    arrays, start = [], 0
    for rows, cols in shapes:
        arrays.append(joined[start : start + rows * cols].reshape(rows, cols))
        start += rows * cols
    return arrays


def active_slot_rules(entry: SlotEntry, domain: Domain) -> tuple[tuple[str, str, str, int], ...]:
    """A slot's active rules as ``(rule name, attribute, kind, bound)`` in the domain's rule order."""
    active = entry.slot_constraints["active_rule_names"]
    return tuple(
        (rule.name, rule.attribute, rule.kind, int(entry.slot_constraints[rule.name]))  # type: ignore[arg-type]
        for rule in domain.slot_rules
        if rule.name in active  # type: ignore[operator]
    )


# --------------------------------------------------------------------------------------------
# loading


class Dataset(Sequence["Instance"]):
    """A validated dataset file; compiled instances are cached (shared read-only).

    Built from a validated :class:`DatasetFile` (:func:`parse_dataset`: with the instances that
    validation compiled), or (:func:`load_dataset`, with the dataset cache on) from the file's
    entry in :mod:`ace_gym.dataset_cache`: read back when the file was validated before, just
    written when it was validated now. Such a dataset's instances are compiled on first use from
    the compiled forms the entry holds (their pydantic models built from its JSON only when asked
    for), and it holds under half of its JSON's size in memory; its models would take about twice.
    """

    def __init__(
        self,
        model: DatasetFile,
        source: str,
        cache_key: tuple[Any, ...] | None = None,
        compiled: Sequence[CompiledInstance] = (),
    ) -> None:
        """``compiled``: the instances compiled (all of them, or none: compiled on first use)."""
        self._setup(model.domain, source, cache_key, tuple(i.instance_id for i in model.instances))
        self._instances: list[Instance | None] = list(model.instances)
        self._model: DatasetFile | None = model
        self._entry: CachedDataset | None = None
        for index, instance in enumerate(compiled):
            instance.origin = (self, index)
            self._compiled[index] = instance

    @classmethod
    def from_cache_entry(cls, entry: CachedDataset, source: str, cache_key: tuple[Any, ...] | None = None) -> Dataset:
        """The dataset of a file whose entry :func:`ace_gym.dataset_cache.read_entry` returned."""
        dataset = cls.__new__(cls)
        dataset._setup(entry.header["domain"], source, cache_key, entry.instance_ids)
        dataset._instances = [None] * len(entry.instance_ids)
        dataset._model = None
        dataset._entry = entry
        return dataset

    def _setup(
        self, domain: str, source: str, cache_key: tuple[Any, ...] | None, instance_ids: tuple[str, ...]
    ) -> None:
        self.source = source
        self.domain: Domain = DOMAINS[domain]
        self._cache_key = cache_key
        self._compiled: dict[int, CompiledInstance] = {}
        self._lock = threading.RLock()  # compiled() builds the instance under it
        self.instance_ids: tuple[str, ...] = instance_ids
        self._index_of_id = {iid: k for k, iid in enumerate(self.instance_ids)}

    @property
    def model(self) -> DatasetFile:
        """The whole file as a :class:`DatasetFile` (every instance built)."""
        if self._model is None:
            from ace_gym.dataset_schema import DatasetFile

            assert self._entry is not None
            instances = [self[k] for k in range(len(self))]
            self._model = DatasetFile.model_construct(**self._entry.header, instances=instances)
        return self._model

    def __len__(self) -> int:
        return len(self.instance_ids)

    def __getitem__(self, index: int) -> Instance:  # type: ignore[override]
        if isinstance(index, slice):
            return [self[k] for k in range(len(self))[index]]  # type: ignore[return-value]
        found = self._instances[index]
        if found is None:
            with self._lock:
                found = self._instances[index]
                if found is None:
                    from pydantic_core import from_json

                    assert self._entry is not None  # built from the JSON that passed validation
                    compiled = self.compiled(index % len(self))
                    document = from_json(self._entry.instance_json(index % len(self)))
                    found = self._instances[index] = _instance_from_checked(document, compiled)
        return found

    def index_of(self, instance_id: str) -> int:
        """Index of ``instance_id``; ConfigError with a suggestion when absent."""
        try:
            return self._index_of_id[instance_id]
        except (KeyError, TypeError):
            raise ConfigError(
                "instance_id",
                instance_id,
                f"not in {self.source}{did_you_mean(instance_id, self.instance_ids)}",
            ) from None

    def compiled(self, index: int) -> CompiledInstance:
        """The compiled form of instance ``index`` (built once per process)."""
        found = self._compiled.get(index)
        if found is None:
            with self._lock:
                found = self._compiled.get(index)
                if found is None:
                    found = self._compile(index)
                    found.origin = (self, index)
                    self._compiled[index] = found
        return found

    def _compile(self, index: int) -> CompiledInstance:
        instance = self._instances[index]
        if instance is not None:
            return CompiledInstance(instance, self.domain)
        assert self._entry is not None
        # json.loads, not pydantic_core's from_json (~6 µs faster per instance): a set-up from the
        # cache imports neither pydantic_core (~20 ms) nor pydantic
        return CompiledInstance.from_entry(
            json.loads(self._entry.compiled_json(index)),
            self.domain,
            partial(self.__getitem__, index),
            partial(self._item_rows, index),
        )

    def _item_rows(self, index: int) -> ItemRows:
        """Instance ``index``'s item dicts, read from its cache entry's :func:`entry_item_texts`."""
        assert self._entry is not None
        return ItemRows(self._entry.data, self._entry.item_texts_start(index))

    def __reduce__(self) -> tuple[Any, ...]:
        # a file-backed dataset re-opens from the per-process cache instead of pickling its data
        if self._cache_key is not None:
            return (load_dataset, (self.source,))
        return (Dataset, (self.model, self.source))


_CACHE: dict[tuple[int, int, int, int], Dataset] = {}  # by _file_identity
_CACHE_LOCK = threading.Lock()
BUNDLED_DATASETS: tuple[str, ...] = ("5x5", "5x7")
MAX_DATASET_BYTES = 256 * 2**20
"""The largest dataset accepted: bytes of JSON, counted after decompression for ``.json.gz``."""
MAX_INSTANCE_ID_LENGTH = 256
"""The longest instance id accepted, in characters (the bundled files' longest is 23)."""
_READ_CHUNK = 2**20


@cache  # the package's data does not change while it runs
def bundled_dataset_path(name: str, domain: str) -> Path:
    """Path of the bundled dataset ``name`` (e.g. "5x5") for ``domain``; ConfigError if unknown."""
    if name not in BUNDLED_DATASETS:
        raise ConfigError(
            "dataset",
            name,
            f"not a bundled dataset ({', '.join(BUNDLED_DATASETS)}){did_you_mean(name, BUNDLED_DATASETS)}",
        )
    folder = resources.files("ace_gym") / "data" / name
    for entry in folder.iterdir():
        if entry.name.startswith(f"{domain}_dataset_"):
            return Path(str(entry))
    raise ConfigError("domain", domain, f"bundled dataset {name} has no file for this domain")


def resolve_dataset(dataset: str | os.PathLike[str], domain: str) -> Dataset:
    """Load ``dataset`` (a bundled name or a file path) and check it is of ``domain``.

    A regular file at the path wins over a bundled name of the same spelling. ConfigError naming
    the value and the path when it is neither (missing, a directory, a FIFO, a name the system
    refuses, not a str or path); DatasetError for a broken file (see :func:`load_dataset`).
    """
    path = _path_argument("dataset", dataset, f"a bundled dataset name ({', '.join(BUNDLED_DATASETS)}) or a file path")
    if os.path.isfile(path):
        loaded = load_dataset(path)
    elif str(path) in BUNDLED_DATASETS:
        loaded = load_dataset(bundled_dataset_path(str(path), domain))
    else:
        raise ConfigError(
            "dataset",
            dataset,
            f"{_not_a_regular_file(path)}, and not a bundled dataset ({', '.join(BUNDLED_DATASETS)})"
            f"{did_you_mean(str(path), BUNDLED_DATASETS)}",
        )
    if loaded.domain.name != domain:
        raise ConfigError("dataset", str(dataset), f"holds domain {loaded.domain.name!r}, not {domain!r}")
    return loaded


def dataset_sha256(dataset: str | os.PathLike[str], domain: str) -> str:
    """SHA-256 (hex) of the bytes of the file ``dataset`` names for ``domain`` (resolved as
    :func:`resolve_dataset` does; a ``.gz`` file's bytes as stored): what a replay checks to know
    it plays the same instances. Hashed once per file version and process."""
    loaded = resolve_dataset(dataset, domain)  # the file's current version: its path, mtime and size
    assert loaded._cache_key is not None  # a file's dataset always has one
    return _file_sha256(*loaded._cache_key)


def forget_loaded_datasets() -> None:
    """Forget the datasets :func:`load_dataset` keeps for the process and the files' hashes: the
    next load of any file reads and hashes it again (then reads its on-disk cache entry when this
    machine validated it before), as a new process does. A dataset or env made before keeps what
    it holds. For a long run that loads many files (each is otherwise kept until the process
    ends), and for measuring a first load."""
    with _CACHE_LOCK:
        _CACHE.clear()
    _file_sha256.cache_clear()


@lru_cache(maxsize=64)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def load_dataset(path: str | os.PathLike[str]) -> Dataset:
    """Validate and load a dataset file (``.json`` or ``.json.gz``), once per process.

    Raises ConfigError when ``path`` names no regular file (naming it), and DatasetError
    (naming file, JSON path and problem) for a file that cannot be read, holds more than
    :data:`MAX_DATASET_BYTES` of JSON (a ``.gz`` file is decompressed in chunks and abandoned at
    the limit), or breaks the schema or a consistency rule of the module docstring. Nothing is
    cached for a broken file.
    """
    given = _path_argument("path", path, "a file path")
    with contextlib.suppress(OSError, ValueError):  # else _dataset_file names the problem
        with _CACHE_LOCK:
            cached = _CACHE.get(_file_identity(given.stat()))
        if cached is not None:
            return cached
    resolved, status = _dataset_file(given)
    dataset = _read_dataset(resolved, status)
    with _CACHE_LOCK:
        return _CACHE.setdefault(_file_identity(status), dataset)


def _file_identity(status: os.stat_result) -> tuple[int, int, int, int]:
    """The key of a file version in the per-process cache: which file (device, inode), whatever
    path or link names it, and its version (modification time, size)."""
    return (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size)


def read_dataset(path: str | os.PathLike[str]) -> Dataset:
    """Validate and load a dataset file as :func:`load_dataset` does, without its per-process cache.

    A file whose bytes this machine validated before under the same rules is not parsed again:
    its instances come from the entry :mod:`ace_gym.dataset_cache` wrote then, each built on
    first use. Any other file is validated in full and, once it passes, its entry written; the
    dataset returned is then read from that entry too (with the cache off: from the validated models).
    """
    return _read_dataset(*_dataset_file(path))


def _dataset_file(path: object) -> tuple[Path, os.stat_result]:
    """The resolved path and status of the regular file ``path`` names; ConfigError otherwise."""
    path = _path_argument("path", path, "a file path")
    problem = _not_a_regular_file(path)
    if problem is not None:
        raise ConfigError("path", str(path), problem)
    path = Path(os.path.realpath(path))  # what Path.resolve() does, without its pathlib layers
    return path, path.stat()


def _read_dataset(path: Path, status: os.stat_result) -> Dataset:
    key = (str(path), status.st_mtime_ns, status.st_size)
    digest = None
    if path.suffix == ".gz" or status.st_size <= MAX_DATASET_BYTES:  # larger: refused unread below
        with contextlib.suppress(OSError):  # unreadable: _read_json_bytes names the problem
            digest = _file_sha256(*key)
    entry = None if digest is None else dataset_cache.read_entry(digest, _entry_header_problem)
    if entry is not None:
        return Dataset.from_cache_entry(entry, str(path), cache_key=key)
    dataset = parse_dataset(_read_json_bytes(path, status.st_size), str(path), cache_key=key)
    if digest is not None and _unchanged(path, status):
        model = dataset.model
        written = dataset_cache.write_entry(
            digest,
            model.model_dump(exclude={"instances"}),
            dataset.instance_ids,
            map(entry_texts, map(dataset.compiled, range(len(dataset)))),
        )
        if written is not None:  # held as a later process holds it: a quarter of the models' memory
            return Dataset.from_cache_entry(written, str(path), cache_key=key)
    return dataset


_ENTRY_HEADER_INTS = ("num_instances", "rows", "cols", "candidates_per_slot")
_ENTRY_HEADER_LISTS = ("hidden_slots", "branch_budget")
"""With ``domain``, the fields of an entry's header: every :class:`DatasetFile` field but ``instances``."""


def _entry_header_problem(entry: CachedDataset) -> str | None:
    """Why ``entry``'s header cannot be the one written for a validated file (its fields, their
    types, a known domain, the instance count), or None: what :func:`Dataset.from_cache_entry`
    and :attr:`Dataset.model` rely on, checked without pydantic."""
    header = entry.header
    if header.keys() != {"domain", *_ENTRY_HEADER_INTS, *_ENTRY_HEADER_LISTS}:
        return f"its header holds the fields {clipped(sorted(header))}"
    if not isinstance(header["domain"], str) or header["domain"] not in DOMAINS:
        return f"its header names no domain: {clipped(header['domain'])}"
    lists = [header[name] for name in _ENTRY_HEADER_LISTS]
    if not all(type(header[name]) is int for name in _ENTRY_HEADER_INTS) or not all(
        type(values) is list and all(type(value) is int for value in values) for values in lists
    ):
        return "its header holds a value of another type than the schema's"
    if header["num_instances"] != len(entry.instance_ids):
        return f"its header counts {header['num_instances']} instances but it lists {len(entry.instance_ids)}"
    return None


def _unchanged(path: Path, status: os.stat_result) -> bool:
    """Whether ``path`` still has the size and modification time of ``status``."""
    try:
        now = path.stat()
    except OSError:
        return False
    return (now.st_mtime_ns, now.st_size) == (status.st_mtime_ns, status.st_size)


def entry_texts(compiled: CompiledInstance) -> tuple[bytes, bytes, bytes]:
    """The three JSON texts an entry of :mod:`ace_gym.dataset_cache` holds for a validated
    instance (given compiled, as validation returns it): :meth:`CompiledInstance.entry`,
    :func:`entry_item_texts` and :func:`entry_document`."""
    return compiled.entry(), entry_item_texts(compiled), entry_document(compiled)


def entry_item_texts(compiled: CompiledInstance) -> bytes:
    """A validated instance's item dicts as lines of ASCII JSON, every line padded with spaces
    to one width (its line break included): a header (``keys``: the keys of the first item, in
    its order; and, when some item lists its keys in another order, ``order_exceptions``: that
    order by item number), then a line per item: the JSON list of its values in ``keys`` order,
    so that item ``k``'s line is the ``k + 1``-th times the first line's length in bytes.
    :class:`ItemRows` builds the item dicts back from it, one line parsed per item. Validation
    guarantees a non-empty pool whose items have the same keys."""
    items = compiled.items
    keys = list(items[0])
    header: dict[str, Any] = {"keys": keys}
    if list(chain.from_iterable(items)) != keys * len(items):  # one pass in C; rarely true
        header["order_exceptions"] = {k: list(item) for k, item in enumerate(items) if list(item) != keys}
    # each key's values written at once (validation makes them all ints or all strings), as
    # json.dumps writes them: a call of json.dumps per item cost three times as much
    columns = [_column_json([item[key] for item in items]) for key in keys]
    lines = [json.dumps(header), *["[" + ", ".join(values) + "]" for values in zip(*columns, strict=True)]]
    width = max(map(len, lines))
    return "".join([line.ljust(width) + "\n" for line in lines]).encode("ascii")


def _column_json(values: list[Any]) -> Iterable[str]:
    """``json.dumps`` (ASCII) of each of ``values``, all ints or all strings."""
    return map(str, values) if type(values[0]) is int else map(encode_basestring_ascii, values)


def entry_document(compiled: CompiledInstance) -> bytes:
    """The fields of a validated instance but its ``item_pool`` (which :meth:`CompiledInstance.entry`
    and :func:`entry_item_texts` hold), as JSON: what :func:`_instance_from_checked` reads."""
    return compiled.instance.model_dump_json(exclude={"item_pool"}).encode()


def _instance_from_checked(document: dict[str, Any], compiled: CompiledInstance) -> Instance:
    """An :class:`Instance` from the :func:`entry_document` of one that passed validation (a cache
    entry's) and its compiled form (the item pool: its ids and item dicts), built without
    validating again."""
    from ace_gym.dataset_schema import Instance, InstanceMeta, Position, SlotEntry

    return Instance.model_construct(
        **{
            **document,
            "item_pool": dict(zip(compiled.item_ids, compiled.items, strict=True)),
            "meta": InstanceMeta.model_construct(**document["meta"]),
            "hidden_slots": [Position.model_construct(**cell) for cell in document["hidden_slots"]],
            "slots": [SlotEntry.model_construct(**slot) for slot in document["slots"]],
        }
    )


def _path_argument(field: str, value: object, expected: str) -> Path:
    """``value`` as a Path if it is a str or str path; ConfigError naming ``field`` otherwise."""
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise ConfigError(field, value, f"must be {expected} (str or os.PathLike), not {type(value).__name__}")
    if not text or "\0" in text:
        raise ConfigError(field, value, f"must be {expected}, {'not empty' if not text else 'without NUL characters'}")
    return Path(text)


def _not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a dataset file (naming the absolute path of a relative
    one), or None if it is a regular file."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return f"no such file{_absolute_note(path)}"
    except OSError as error:
        return f"cannot be opened{_absolute_note(path)}: {error.strerror or error}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return f"is a directory{_absolute_note(path)}, not a dataset file"
    return f"is not a regular file{_absolute_note(path)}"


def _absolute_note(path: Path) -> str:
    """`` (/absolute/path)`` for a relative path, for error messages; empty for an absolute one."""
    return "" if path.is_absolute() else f" ({path.absolute()})"


def _read_json_bytes(path: Path, size: int) -> bytearray:
    """The file's JSON text (gunzipped for ``.gz``), read in chunks that stop at MAX_DATASET_BYTES."""
    limit, source, packed = MAX_DATASET_BYTES, str(path), path.suffix == ".gz"
    too_large = DatasetError(
        source,
        "$",
        f"holds more than MAX_DATASET_BYTES = {limit} bytes of JSON{' once decompressed' if packed else ''}",
    )
    if not packed and size > limit:
        raise too_large
    data = bytearray()  # grows in place: no second copy of the text, unlike joining chunks
    try:
        with gzip.open(path, "rb") if packed else path.open("rb") as stream:
            while chunk := stream.read(_READ_CHUNK):
                data += chunk
                if len(data) > limit:
                    raise too_large
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise DatasetError(source, "$", f"not a valid gzip file ({error})") from None
    except OSError as error:
        raise DatasetError(source, "$", f"cannot be read ({error.strerror or error})") from None
    return data


def parse_dataset(raw: bytes | bytearray | str, source: str, cache_key: tuple[Any, ...] | None = None) -> Dataset:
    """Validate a dataset from JSON text; ``source`` names it in errors."""
    from pydantic import ValidationError

    from ace_gym.dataset_schema import DatasetFile

    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    key_bound = _key_count_bound(data)  # before the model exists: its scratch arrays add no peak memory
    try:
        model = DatasetFile.model_validate_json(raw)
    except ValidationError as error:
        raise _first_problem(error, raw, source) from None
    _check_distinct_keys(data, key_bound, model, source)
    compiled = check_dataset(model, source)
    return Dataset(model, source, cache_key, compiled)


def _first_problem(error: ValidationError, raw: bytes | bytearray | str, source: str) -> DatasetError:
    """The first validation problem at its path in the JSON document, with every message there.

    pydantic adds union-member tags (``int``, ``str``, ``list[str]``) to ``loc`` and reports one
    error per member; they are not part of the document, so the path is cut where the document
    ends and the members' messages are joined.
    """
    try:
        document: Any = json.loads(raw)
    except (ValueError, RecursionError):
        document = None
    problems = error.errors()
    located = [(_document_loc(p["loc"], p["type"], document), p["msg"]) for p in problems]
    first = located[0][0]
    messages = dict.fromkeys(msg for loc, msg in located if loc == first)
    return DatasetError(source, _json_path(first), "; ".join(messages))


def _document_loc(loc: Sequence[int | str], error_type: str, document: Any) -> tuple[int | str, ...]:
    if document is None:
        return tuple(loc)
    node, kept = document, []
    for k, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            if error_type == "missing" and k == len(loc) - 1 and isinstance(node, dict):
                kept.append(part)  # a required key absent from the document
            break
        kept.append(part)
    return tuple(kept)


def _json_path(loc: Sequence[int | str]) -> str:
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


# --------------------------------------------------------------------------------------------
# repeated keys


_QUOTE, _COLON = ord('"'), ord(":")
_JSON_SPACE = np.frombuffer(b" \t\n\r", dtype=np.uint8)


def _check_distinct_keys(data: bytes | bytearray, key_bound: int, model: DatasetFile, source: str) -> None:
    """DatasetError if a JSON object of ``data`` repeats a key: the schema saw only its last value.

    A cheap screen first. Every key's closing quote is followed, after optional whitespace, by
    a colon, and only escaped quotes inside strings can look the same; so counting such
    quote-colon pairs (``key_bound``, from :func:`_key_count_bound`) bounds the document's key
    count from above, and when the bound equals the number of keys the validated model holds, no
    key was repeated. Otherwise one exact pass over the document settles it.
    """
    if key_bound == _model_key_count(model):
        return
    repeated = _first_repeated_key(data)
    if repeated is not None:
        loc, key = repeated
        raise DatasetError(
            source,
            _json_path((*loc, key)),
            f"key {clipped(key)} appears more than once in one JSON object (a JSON reader keeps only its last value)",
        )


def _key_count_bound(data: bytes | bytearray) -> int:
    """How many ``"`` bytes are followed, after optional JSON whitespace, by ``:``."""
    array = np.frombuffer(data, dtype=np.uint8)
    before = np.flatnonzero(array[1:] == _COLON)  # index of the byte before each colon
    previous = array[before]
    count = int(np.count_nonzero(previous == _QUOTE))
    spaced = np.isin(previous, _JSON_SPACE)
    if spaced.any():  # whitespace before a colon (rare): find the last byte that is not whitespace
        solid = np.flatnonzero(~np.isin(array, _JSON_SPACE))
        last = np.searchsorted(solid, before[spaced], side="right") - 1
        count += int(np.count_nonzero(array[solid[last[last >= 0]]] == _QUOTE))
    return count


def _model_key_count(model: DatasetFile) -> int:
    """How many keys the JSON objects behind a validated model hold (each repeated key once)."""
    total = len(model.model_fields_set)
    for instance in model.instances:
        meta = instance.meta
        total += len(instance.model_fields_set) + len(meta.model_fields_set)
        total += sum(_nested_key_count(value) for value in (meta.model_extra or {}).values())
        total += len(instance.global_constraints) + len(instance.item_pool)
        total += sum(map(len, instance.item_pool.values()))
        total += sum(len(position.model_fields_set) for position in instance.hidden_slots)
        total += sum(len(slot.model_fields_set) + len(slot.slot_constraints) for slot in instance.slots)
    return total


def _nested_key_count(value: object) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_nested_key_count(v) for v in value.values())
    if isinstance(value, list):
        return sum(_nested_key_count(v) for v in value)
    return 0


class _RepeatedKey:
    """Stands in, in the exact pass, for a JSON object that repeats ``key``."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key


def _object_or_repeat(pairs: list[tuple[str, Any]]) -> dict[str, Any] | _RepeatedKey:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    counts = Counter(key for key, _ in pairs)
    return _RepeatedKey(next(key for key, _ in pairs if counts[key] > 1))


def _first_repeated_key(data: bytes | bytearray) -> tuple[tuple[int | str, ...], str] | None:
    """Location and key of the first object (document order) that repeats a key, or None."""
    try:
        document = json.loads(
            data, object_pairs_hook=_object_or_repeat, parse_int=len, parse_float=len, parse_constant=len
        )  # numbers are irrelevant here: len() skips converting them
    except (ValueError, RecursionError):
        return None  # the schema already accepted this text; the exact pass cannot judge it
    stack: list[tuple[tuple[int | str, ...], Any]] = [((), document)]
    while stack:
        loc, node = stack.pop()
        if isinstance(node, _RepeatedKey):
            return loc, node.key
        if isinstance(node, dict):
            stack.extend(((*loc, key), value) for key, value in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(((*loc, k), value) for k, value in reversed(list(enumerate(node))))
    return None


# --------------------------------------------------------------------------------------------
# consistency checks


def accepted_ranges(domain: Domain) -> dict[str, tuple[int, int]]:
    """``[low, high]`` a dataset file may hold for each numeric attribute of ``domain``.

    The declared range, with its low end extended down to the ``floor`` of any lower-bound
    global rule on the attribute's values (``sum_min``): the published release's targeted decoy
    sampling reaches there.
    """
    ranges = {}
    for attribute in domain.attributes:
        if isinstance(attribute, NumericAttribute):
            floors = [
                rule.floor
                for rule in domain.global_rules
                if rule.attribute == attribute.name and rule.floor is not None and _sums_from_below(rule)
            ]
            ranges[attribute.name] = (min([attribute.low, *floors]), attribute.high)
    return ranges


def _sums_from_below(rule: GlobalRule) -> bool:
    kind = kind_of(rule)
    return not kind.upper and kind.reading is Reading.VALUE


def threshold_limit(rule: GlobalRule, ranges: dict[str, tuple[int, int]], rows: int, cols: int) -> int:
    """The largest aggregate ``rule`` can reach on a ``rows`` x ``cols`` grid of items within
    ``ranges`` (:func:`accepted_ranges`)."""
    high = ranges[rule.attribute][1] if rule.attribute in ranges else 0  # categorical: only counted
    return kind_of(rule).largest_aggregate(high, rows, cols)


def check_dataset(model: DatasetFile, source: str) -> list[CompiledInstance]:
    """Consistency checks the schema cannot express; raises DatasetError on the first problem.
    Returns the instances compiled (:func:`check_instance`)."""
    if model.domain not in DOMAINS:
        raise DatasetError(source, "$.domain", f"unknown domain {model.domain!r}{did_you_mean(model.domain, DOMAINS)}")
    if model.num_instances != len(model.instances):
        raise DatasetError(
            source, "$.num_instances", f"is {model.num_instances} but the file holds {len(model.instances)} instances"
        )
    if not model.instances:
        raise DatasetError(source, "$.instances", "the file holds no instances")
    seen: set[str] = set()
    compiled = []
    for k, instance in enumerate(model.instances):
        where = f"$.instances[{k}]"
        _check_against_header(instance, model, source, where)
        if instance.instance_id in seen:
            raise DatasetError(source, f"{where}.instance_id", f"duplicate instance id {clipped(instance.instance_id)}")
        seen.add(instance.instance_id)
        if instance.domain != model.domain:
            raise DatasetError(source, f"{where}.domain", f"{clipped(instance.domain)} in a {model.domain!r} file")
        compiled.append(check_instance(instance, DOMAINS[model.domain], source, where))
    return compiled


def _check_against_header(instance: Instance, model: DatasetFile, source: str, where: str) -> None:
    """The instance's grid size, hidden-slot count, decoy budget and K as the file header declares them."""
    for name in ("rows", "cols"):
        if getattr(instance.meta, name) != getattr(model, name):
            raise DatasetError(
                source,
                f"{where}.meta.{name}",
                f"is {getattr(instance.meta, name)} but the file declares {model.rows}x{model.cols}",
            )
    for name, listed in (("hidden_slots", model.hidden_slots), ("branch_budget", model.branch_budget)):
        if getattr(instance.meta, name) not in listed:
            raise DatasetError(
                source,
                f"{where}.meta.{name}",
                f"is {getattr(instance.meta, name)} but the file header lists {name} {clipped(listed)}",
            )
    if instance.meta.requested_candidates_per_slot != model.candidates_per_slot:
        raise DatasetError(
            source,
            f"{where}.meta.requested_candidates_per_slot",
            f"is {instance.meta.requested_candidates_per_slot} but the file header has candidates_per_slot "
            f"{model.candidates_per_slot}",
        )


def check_instance(instance: Instance, domain: Domain, source: str, where: str = "$") -> CompiledInstance:
    """Check one instance against its domain and itself (the rules of the module docstring);
    raises DatasetError naming the JSON path of the first problem. Returns the instance
    compiled: once its structure is checked, the rules on its truth are checked on the arrays."""

    def fail(path: str, problem: str) -> DatasetError:
        return DatasetError(source, where + path, problem)

    if len(instance.instance_id) > MAX_INSTANCE_ID_LENGTH:
        raise fail(
            ".instance_id",
            f"is {len(instance.instance_id)} characters long, more than MAX_INSTANCE_ID_LENGTH = {MAX_INSTANCE_ID_LENGTH}",
        )
    _check_shape(instance, fail)
    ranges = accepted_ranges(domain)
    item_table = _check_items(instance, domain, ranges, fail)
    _check_global_thresholds(instance, domain, ranges, fail)
    _check_cells(instance, fail)
    for s, slot in enumerate(instance.slots):
        _check_slot(instance, slot, domain, ranges, _under(fail, f".slots[{s}]"))
    _check_branches(instance, fail)
    compiled = CompiledInstance(instance, domain, item_table)
    slot_rules = [slot.rules for slot in compiled.slots]
    _check_truth(instance, compiled, fail)
    _check_instruction(instance, domain, slot_rules, fail)
    return compiled


Fail = Callable[[str, str], DatasetError]
SlotRules = tuple[tuple[str, str, str, int], ...]


def _under(fail: Fail, prefix: str) -> Fail:
    """``fail`` for paths below ``prefix``."""

    def fail_under(path: str, problem: str) -> DatasetError:
        return fail(prefix + path, problem)

    return fail_under


def _check_shape(instance: Instance, fail: Fail) -> None:
    """A positive grid size, and truth and partial grids of that size."""
    rows, cols = instance.meta.rows, instance.meta.cols
    if rows <= 0 or cols <= 0:
        raise fail(".meta", f"grid size must be positive, got {rows}x{cols}")
    for name in ("truth_solution", "partial_solution"):
        grid = getattr(instance, name)
        if len(grid) != rows or any(len(row) != cols for row in grid):
            raise fail(f".{name}", f"must be a {rows}x{cols} grid")


def _check_cells(instance: Instance, fail: Fail) -> None:
    """Truth ids from the pool, visible cells showing the truth, and the hidden cells (the null
    cells of the partial grid) listed in row-major order by ``hidden_slots``, ``slots`` and meta."""
    for r, row in enumerate(instance.truth_solution):
        for c, item_id in enumerate(row):
            if item_id not in instance.item_pool:
                raise fail(f".truth_solution[{r}][{c}]", f"id {clipped(item_id)} is not in item_pool")
            shown = instance.partial_solution[r][c]
            if shown is not None and shown != item_id:
                raise fail(f".partial_solution[{r}][{c}]", f"is {clipped(shown)} but the truth is {clipped(item_id)}")
    hidden = [(r, c) for r, row in enumerate(instance.partial_solution) for c, shown in enumerate(row) if shown is None]
    if [(p.row, p.col) for p in instance.hidden_slots] != hidden:
        raise fail(".hidden_slots", "must list the null cells of partial_solution in row-major order")
    if [(s.row, s.col) for s in instance.slots] != hidden:
        raise fail(".slots", "must hold one entry per hidden cell, in hidden_slots order")
    if instance.meta.hidden_slots != len(hidden):
        raise fail(
            ".meta.hidden_slots", f"is {instance.meta.hidden_slots} but the instance has {len(hidden)} hidden cells"
        )


def _check_items(
    instance: Instance, domain: Domain, ranges: dict[str, tuple[int, int]], fail: Fail
) -> dict[str, list[int | str]]:
    """Item keys and types as published; numeric values in range, categorical values declared.
    Returns the pool's values by item key (in the domain's key order), over the items in order."""
    pool = instance.item_pool
    if not pool:
        raise fail(".item_pool", "holds no items")
    columns = _well_formed_columns(pool, domain) or _checked_columns(pool, domain, fail)
    for attribute in domain.attributes:
        name, column = attribute.name, columns[attribute.name]
        if isinstance(attribute, NumericAttribute):
            low, high = ranges[name]
            if low <= min(column) and max(column) <= high:  # type: ignore[operator]
                continue
            item_id, value = next((i, v) for i, v in zip(pool, column, strict=True) if not low <= v <= high)  # type: ignore[operator]
            raise fail(
                f".item_pool.{item_id}.{name}",
                f"is {clipped(value)}, outside the accepted range [{low}, {high}] of {domain.name} {name}",
            )
        allowed = set(attribute.values)
        if allowed.issuperset(column):
            continue
        item_id, value = next((i, v) for i, v in zip(pool, column, strict=True) if v not in allowed)
        raise fail(
            f".item_pool.{item_id}.{name}",
            f"{clipped(value)} is not a {name} of the {domain.name} domain "
            f"({', '.join(attribute.values)}){did_you_mean(str(value), attribute.values)}",
        )
    return columns


def _well_formed_columns(pool: dict[str, dict[str, int | str]], domain: Domain) -> dict[str, list[int | str]] | None:
    """The pool's columns by item key if every item is well formed (exactly the domain's keys,
    the pool key as id, ints for numeric attributes and strings otherwise), else None.
    Whole-column operations only: this is the fast path of every load."""
    items = list(pool.values())
    try:
        columns = {key: [item[key] for item in items] for key in domain.item_keys}
    except KeyError:
        return None
    if set(map(len, items)) != {len(domain.item_keys)} or columns[domain.id_key] != list(pool):
        return None
    numeric = set(domain.numeric_attributes)
    if any(set(map(type, column)) != {int if key in numeric else str} for key, column in columns.items()):
        return None
    return columns


def _checked_columns(pool: dict[str, dict[str, int | str]], domain: Domain, fail: Fail) -> dict[str, list[int | str]]:
    """Item by item: the domain's keys, the pool key as id, the value types; then the columns."""
    keys = set(domain.item_keys)
    numeric = set(domain.numeric_attributes)
    for item_id, item in pool.items():
        if set(item) != keys:
            missing, extra = sorted(keys - set(item)), sorted(set(item) - keys)
            raise fail(
                f".item_pool.{item_id}",
                f"item keys differ from the {domain.name} domain (missing {missing}, unexpected {clipped(extra)})",
            )
        if item[domain.id_key] != item_id:
            raise fail(f".item_pool.{item_id}.{domain.id_key}", f"is {clipped(item[domain.id_key])}, not the pool key")
        for key, value in item.items():
            if (key in numeric) != (type(value) is int):
                kind = "an integer" if key in numeric else "a string"
                raise fail(f".item_pool.{item_id}.{key}", f"must be {kind}, got {clipped(value)}")
    return {key: [item[key] for item in pool.values()] for key in domain.item_keys}


def _check_global_thresholds(
    instance: Instance, domain: Domain, ranges: dict[str, tuple[int, int]], fail: Fail
) -> None:
    """Every global rule of the domain, and no other, with an integer threshold the grid can reach."""
    names = {rule.name for rule in domain.global_rules}
    for name in instance.global_constraints:
        if name != "global" and name not in names:
            raise fail(
                f".global_constraints.{name}", f"unknown global rule for {domain.name}{did_you_mean(name, names)}"
            )
    for rule in domain.global_rules:
        bound = instance.global_constraints.get(rule.name)
        if not isinstance(bound, int):
            raise fail(f".global_constraints.{rule.name}", "missing or not an integer")
        top = threshold_limit(rule, ranges, instance.meta.rows, instance.meta.cols)
        if not 0 <= bound <= top:
            raise fail(
                f".global_constraints.{rule.name}",
                f"is {clipped(bound)}, outside [0, {top}], the values a {rule.kind} aggregate takes on a "
                f"{instance.meta.rows}x{instance.meta.cols} grid",
            )


def _check_slot(
    instance: Instance, slot: SlotEntry, domain: Domain, ranges: dict[str, tuple[int, int]], fail: Fail
) -> None:
    """One hidden slot: marked hidden, its truth and candidate partition, its active rules and their bounds."""
    if not slot.is_hidden:
        raise fail(".is_hidden", "is false, but every slot is a hidden cell")
    _check_candidates(instance, slot, fail)
    if slot.allocated_budget != len(slot.decoy_ids):
        raise fail(".allocated_budget", f"is {slot.allocated_budget} but the slot has {len(slot.decoy_ids)} decoys")
    if slot.is_branch_slot != bool(slot.decoy_ids):
        raise fail(".is_branch_slot", "must be true exactly when the slot has decoys")
    active = _active_rule_names(slot, domain, fail)
    _check_slot_bounds(slot, domain, active, ranges, fail)


def _check_candidates(instance: Instance, slot: SlotEntry, fail: Fail) -> None:
    """The truth among K distinct candidates from the pool, and every candidate other than the
    truth labelled exactly once, as a decoy or a filter candidate."""
    if slot.truth_id != instance.truth_solution[slot.row][slot.col]:
        raise fail(".truth_id", "differs from truth_solution at this cell")
    if not _candidates_well_formed(instance, slot):
        _check_candidates_by_rule(instance, slot, fail)


def _candidates_well_formed(instance: Instance, slot: SlotEntry) -> bool:
    """Whether every rule of :func:`_check_candidates_by_rule` holds, in a few set operations:
    K distinct pool ids, which the truth, the decoys and the filters list exactly once."""
    candidates = set(slot.candidate_ids)
    labelled = [slot.truth_id, *slot.decoy_ids, *slot.filter_candidate_ids]
    return (
        len(labelled) == len(candidates) == len(slot.candidate_ids) == instance.meta.candidates_per_slot
        and set(labelled) == candidates
        and instance.item_pool.keys() >= candidates
    )


def _check_candidates_by_rule(instance: Instance, slot: SlotEntry, fail: Fail) -> None:
    """:func:`_check_candidates` rule by rule: DatasetError naming the first problem."""
    candidates = set(slot.candidate_ids)
    if slot.truth_id not in candidates:
        raise fail(".candidate_ids", "does not contain the truth id")
    if len(candidates) != len(slot.candidate_ids):
        raise fail(".candidate_ids", "contains duplicate ids")
    if len(candidates) != instance.meta.candidates_per_slot:
        raise fail(
            ".candidate_ids",
            f"holds {len(candidates)} ids but meta.candidates_per_slot is {instance.meta.candidates_per_slot}",
        )
    pool = instance.item_pool.keys()
    decoys, filters = set(slot.decoy_ids), set(slot.filter_candidate_ids)
    for field, ids in (("candidate_ids", candidates), ("decoy_ids", decoys), ("filter_candidate_ids", filters)):
        if not pool >= ids:
            stray = next(i for i in getattr(slot, field) if i not in pool)
            raise fail(f".{field}", f"id {clipped(stray)} is not in item_pool")
        if not candidates >= ids:
            stray = next(i for i in getattr(slot, field) if i not in candidates)
            raise fail(f".{field}", f"id {clipped(stray)} is not among the slot's candidate_ids")
        if field != "candidate_ids" and slot.truth_id in ids:
            raise fail(f".{field}", "contains the truth id")
    labelled = len(slot.decoy_ids) + len(slot.filter_candidate_ids)
    if labelled + 1 != len(candidates) or len(decoys | filters) != labelled:
        raise fail(
            ".filter_candidate_ids",
            "the truth, decoy_ids and filter_candidate_ids must list every candidate id exactly once",
        )


def _active_rule_names(slot: SlotEntry, domain: Domain, fail: Fail) -> list[str]:
    """``slot_constraints.active_rule_names``: a non-empty list of distinct slot rules of the domain."""
    active = slot.slot_constraints.get("active_rule_names")
    if not isinstance(active, list) or not active:
        raise fail(".slot_constraints.active_rule_names", "must be a non-empty list of rule names")
    rule_names = [rule.name for rule in domain.slot_rules]
    for k, name in enumerate(active):
        if name not in rule_names:
            raise fail(
                ".slot_constraints.active_rule_names",
                f"unknown slot rule {clipped(name)}{did_you_mean(name, rule_names)}",
            )
        if name in active[:k]:
            raise fail(".slot_constraints.active_rule_names", f"lists {name!r} twice")
    return active


def _check_slot_bounds(
    slot: SlotEntry, domain: Domain, active: list[str], ranges: dict[str, tuple[int, int]], fail: Fail
) -> None:
    """An integer bound within the attribute's range for each active rule; besides them only the
    slot's own ``row`` and ``col``."""
    for rule in domain.slot_rules:
        if rule.name not in active:
            continue
        bound = slot.slot_constraints.get(rule.name)
        if not isinstance(bound, int):
            raise fail(f".slot_constraints.{rule.name}", "missing or not an integer")
        low, high = ranges[rule.attribute]
        if not low <= bound <= high:
            raise fail(
                f".slot_constraints.{rule.name}",
                f"is {clipped(bound)}, outside the accepted range [{low}, {high}] of {rule.attribute}",
            )
    for key, value in slot.slot_constraints.items():
        if key in ("row", "col"):
            if value != getattr(slot, key):
                raise fail(
                    f".slot_constraints.{key}", f"is {clipped(value)} but the slot's {key} is {getattr(slot, key)}"
                )
        elif key != "active_rule_names" and key not in active:
            raise fail(f".slot_constraints.{key}", "is not listed in active_rule_names")


def _check_branches(instance: Instance, fail: Fail) -> None:
    """Branch slots (the slots with decoys) ranked 0..k-1 row-major, and meta's totals of them."""
    allocations: list[int] = []
    for s, slot in enumerate(instance.slots):
        rank = len(allocations) if slot.decoy_ids else None
        if slot.branch_rank != rank:
            raise fail(
                f".slots[{s}].branch_rank",
                f"is {clipped(slot.branch_rank)} but must be {rank} (slots with decoys are ranked 0, 1, ... row-major; "
                "others null)",
            )
        if slot.decoy_ids:
            allocations.append(len(slot.decoy_ids))
    meta = instance.meta
    if meta.branch_slot_count != len(allocations):
        raise fail(".meta.branch_slot_count", f"is {meta.branch_slot_count} but {len(allocations)} slots have decoys")
    if meta.branch_budget_allocations != allocations:
        raise fail(
            ".meta.branch_budget_allocations",
            f"is {clipped(meta.branch_budget_allocations)} but the branch slots hold {clipped(allocations)} decoys",
        )
    if meta.branch_budget != sum(allocations):
        raise fail(".meta.branch_budget", f"is {meta.branch_budget} but the slots hold {sum(allocations)} decoys")


def _check_truth(instance: Instance, compiled: CompiledInstance, fail: Fail) -> None:
    """The truth grid passes every active slot rule and every global rule, by the scorer's code:
    on ``compiled`` (the instance's arrays) at once, and rule by rule to name the first problem."""
    if not _truth_passes(compiled):
        _check_truth_by_rule(instance, compiled, fail)


def _truth_passes(compiled: CompiledInstance) -> bool:
    """Whether the truth grid passes every active slot rule and every global rule of ``compiled``."""
    truth = compiled.truth.tolist()
    return all(truth[slot.cell] in slot.valid_items for slot in compiled.slots) and (
        first_global_violation(compiled.global_rules, compiled.truth, compiled.cols) is None
    )


def _check_truth_by_rule(instance: Instance, compiled: CompiledInstance, fail: Fail) -> None:
    """:func:`_check_truth` rule by rule: DatasetError naming the first rule the truth breaks (the
    slot rules read on the model, the global rules on ``compiled``)."""
    pool = instance.item_pool
    slot_rules = [slot.rules for slot in compiled.slots]
    tested = [
        (s, name, attribute, kind, bound, pool[slot.truth_id][attribute])
        for s, (slot, rules) in enumerate(zip(instance.slots, slot_rules, strict=True))
        for name, attribute, kind, bound in rules
    ]
    kinds = [kind for _, _, _, kind, _, _ in tested]
    bounds = np.asarray([bound for *_, bound, _ in tested], dtype=np.int64)
    values = np.asarray([value for *_, value in tested], dtype=np.int64)
    passed = slot_rules_mask(values, kinds, bounds)
    if not passed.all():
        s, name, attribute, _, bound, value = tested[int(np.flatnonzero(~passed)[0])]
        raise fail(
            f".slots[{s}].slot_constraints.{name}",
            f"is {bound} but the slot's truth {clipped(instance.slots[s].truth_id)} has {attribute} {value}: "
            "the truth breaks its own slot rule",
        )
    for rule in compiled.global_rules:  # the rules the array pass evaluated, so that both passes agree
        if not rule.satisfied(aggregate(rule, compiled.truth, compiled.cols), complete=True):
            raise fail(f".global_constraints.{rule.name}", f"the truth grid breaks this rule: {rule.reason}")


def stated_instruction(instance: Instance, domain: Domain, slot_rules: Sequence[SlotRules] | None = None) -> str:
    """The task instruction ``instance``'s constraints render to (its global bounds and each slot's
    active rules, or ``slot_rules`` per slot when given)."""
    bounds = {rule.name: instance.global_constraints[rule.name] for rule in domain.global_rules}
    rules_of = slot_rules if slot_rules is not None else [active_slot_rules(slot, domain) for slot in instance.slots]
    stated = [
        (slot.row, slot.col, [(attribute, kind, bound) for _, attribute, kind, bound in rules])
        for slot, rules in zip(instance.slots, rules_of, strict=True)
    ]
    return render_task_instruction(domain, instance.meta.rows, instance.meta.cols, bounds, stated)  # type: ignore[arg-type]


def _check_instruction(instance: Instance, domain: Domain, slot_rules: list[SlotRules], fail: Fail) -> None:
    """``task_instruction`` is the text the constraints render to, line for line."""
    expected = stated_instruction(instance, domain, slot_rules)
    if instance.task_instruction == expected:
        return
    have, want = instance.task_instruction.split("\n"), expected.split("\n")
    line = next(n for n, pair in enumerate(zip_longest(have, want)) if pair[0] != pair[1])
    said = clipped(have[line]) if line < len(have) else "nothing"
    if line >= len(want):
        raise fail(".task_instruction", f"line {line + 1} reads {said} after the text the constraints give")
    raise fail(
        ".task_instruction",
        f"line {line + 1} ({_rule_of_line(want[line], instance, domain, slot_rules)}) reads {said} "
        f"but the constraints give {clipped(want[line], 200)}",
    )


def _rule_of_line(line: str, instance: Instance, domain: Domain, slot_rules: list[SlotRules]) -> str:
    """Which rule an instruction line states (a global rule or a slot's rule), if any."""
    for rule in domain.global_rules:
        if global_rule_text(rule, instance.global_constraints[rule.name], domain) in line:  # type: ignore[arg-type]
            return f"global rule {rule.name}"
    for slot, rules in zip(instance.slots, slot_rules, strict=True):
        for name, attribute, kind, bound in rules:
            if slot_rule_text(domain, slot.row, slot.col, attribute, kind, bound) in line:
                return f"slot ({slot.row}, {slot.col}) rule {name}"
    return "no rule: fixed wording"

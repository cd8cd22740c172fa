"""A validated instance as a dataset cache entry holds it (:mod:`ace_gym.instance.cache` stores
the entries): three JSON texts (:func:`entry_texts`), and the instance read back from them without
validating again or building the pydantic model. Its compiled form (:func:`compiled_entry`: the
:class:`~ace_gym.instance.compiled.CompiledParts` as ints and strings, so that setting an instance
up is one parse and no lookups), its item texts (:func:`entry_item_texts`: what the item dicts hold
beyond the compiled columns, read on the first item lookup only, :class:`ItemRows`) and its other
fields (:func:`entry_document`, read only when the pydantic model is asked for,
:func:`instance_from_entry`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from itertools import chain
from json.encoder import encode_basestring_ascii
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from ace_gym.domains import Domain
from ace_gym.instance.compiled import CompiledInstance, CompiledParts

if TYPE_CHECKING:
    from ace_gym.dataset_schema import Instance


def entry_texts(compiled: CompiledInstance) -> tuple[bytes, bytes, bytes]:
    """The three JSON texts an entry holds for a validated instance (given compiled, as
    validation returns it): :func:`compiled_entry`, :func:`entry_item_texts` and
    :func:`entry_document`."""
    return compiled_entry(compiled), entry_item_texts(compiled), entry_document(compiled)


def compiled_entry(compiled: CompiledInstance) -> bytes:
    """The :class:`CompiledParts` of ``compiled`` as the JSON :func:`compiled_from_entry` reads:
    packed into ``arrays`` (:func:`_packed`): the item columns, the categorical codes, each
    slot's candidates and validity (0/1), the truth and the initial grid, each slot's row, col,
    which of the domain's slot rules it has (0/1) and their bounds (0 where it has none), and
    the global rules' bounds in the domain's order; beside them the reason texts of the global
    rules and the task instruction."""
    from pydantic_core import to_json  # written once a file passed validation: pydantic is loaded

    domain, parts = compiled.domain, compiled.parts()
    categorical = [parts.categorical[name] for name in domain.categorical_attributes]
    names = [rule.name for rule in domain.slot_rules]
    slot_table = []
    for row, col, rules in parts.slots:
        bound_of = {name: bound for name, _, _, bound in rules}
        slot_table.append([row, col, *[name in bound_of for name in names], *[bound_of.get(name, 0) for name in names]])
    arrays, dtype = _packed(
        [
            *[parts.numeric[name] for name in domain.numeric_attributes],
            *[codes for codes, _ in categorical],
            parts.candidates,
            parts.valid,
            parts.truth,
            parts.initial,
            np.asarray(slot_table, dtype=np.int64),
            np.asarray([bound for bound, _ in parts.global_bounds], dtype=np.int64),
        ]
    )
    return to_json(
        {
            "header": list(parts.header),
            "item_ids": parts.item_ids,
            "vocabularies": [vocabulary for _, vocabulary in categorical],
            "slots": len(parts.slots),
            "k": parts.candidates.shape[1] if parts.slots else 0,
            "arrays": arrays,
            "dtype": dtype,
            "global_reasons": [reason for _, reason in parts.global_bounds],
            "task_instruction": parts.task_instruction,
        }
    )


def compiled_from_entry(
    entry: Mapping[str, Any],
    domain: Domain,
    instance: Callable[[], Instance],
    item_rows: ItemRows,
) -> CompiledInstance:
    """The compiled instance a :func:`compiled_entry` holds (written from an instance that passed
    validation), read without building the pydantic model or looking any id up; ``instance()``
    builds that model when it is first used, and ``item_rows`` (over the instance's
    :func:`entry_item_texts`) builds each item dict on its first lookup."""
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
    # a slot's row of the table: its row, col, whether it has each slot rule (0/1), their bounds
    flags = range(2, 2 + rule_count)  # the columns of the 0/1s; a bound is rule_count columns on
    truth, initial = grids.astype(np.int32)
    parts = CompiledParts(
        header=tuple(header),  # type: ignore[arg-type]
        item_ids=tuple(entry["item_ids"]),
        numeric=dict(zip(numeric_names, numeric_table.astype(np.int64), strict=True)),
        categorical={
            name: (column, tuple(vocabulary))
            for name, column, vocabulary in zip(
                categorical_names, codes.astype(np.int32), entry["vocabularies"], strict=True
            )
        },
        truth=truth,
        initial=initial,
        slots=[
            (row[0], row[1], tuple([(*heads[k - 2], row[k + rule_count]) for k in flags if row[k]]))
            for row in slot_table.tolist()
        ],
        candidates=candidates.astype(np.int32),
        valid=valid.astype(bool),
        global_bounds=tuple(zip(global_bounds[0].tolist(), entry["global_reasons"], strict=True)),
        task_instruction=entry["task_instruction"],
    )
    for column in (*parts.numeric.values(), *[codes for codes, _ in parts.categorical.values()]):
        column.flags.writeable = False
    return CompiledInstance.from_parts(domain, parts, instance, item_rows)


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
    if list(chain.from_iterable(items)) != keys * len(items):  # rarely true
        header["order_exceptions"] = {k: list(item) for k, item in enumerate(items) if list(item) != keys}
    # each key's values written at once (validation makes them all ints or all strings), as
    # json.dumps writes them
    columns = [_column_json([item[key] for item in items]) for key in keys]
    lines = [json.dumps(header), *["[" + ", ".join(values) + "]" for values in zip(*columns, strict=True)]]
    width = max(map(len, lines))
    return "".join([line.ljust(width) + "\n" for line in lines]).encode("ascii")


def _column_json(values: list[Any]) -> Iterable[str]:
    """``json.dumps`` (ASCII) of each of ``values``, all ints or all strings."""
    return map(str, values) if type(values[0]) is int else map(encode_basestring_ascii, values)


def entry_document(compiled: CompiledInstance) -> bytes:
    """The fields of a validated instance but its ``item_pool`` (which :meth:`CompiledInstance.entry`
    and :func:`entry_item_texts` hold), as JSON: what :func:`instance_from_entry` reads."""
    return compiled.instance.model_dump_json(exclude={"item_pool"}).encode()


def instance_from_entry(document: dict[str, Any], compiled: CompiledInstance) -> Instance:
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


class ItemRows:
    """The item dicts of a compiled instance from a cache entry, each built on its first lookup
    (then kept) from the instance's :func:`entry_item_texts`: the item keys' order, the items
    listing them in another order, and each item's line of values, found by its number and parsed
    when that item is built. Each dict equals
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
            found = dict(zip(self._keys, _JSON_VALUE.raw_decode(self._line(k))[0], strict=True))
            order = self._orders.get(k)
            if order is not None:
                found = {key: found[key] for key in order}
            found = self._built.setdefault(k, found)  # two threads building it keep one
        return found

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


_PACKED_TYPES = ("<i2", "<i4", "<i8")
"""The little-endian integer types :func:`_packed` chooses from, smallest first."""


def _packed(arrays: Sequence[np.ndarray]) -> tuple[str, str]:
    """``arrays`` (integer or boolean) flattened and joined in the smallest type of
    :data:`_PACKED_TYPES` that holds every value, as hex text, and that type's name: a JSON form
    no longer than the numbers written out, which reads back (:func:`_unpacked`) with one decode
    and no per-value work."""
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

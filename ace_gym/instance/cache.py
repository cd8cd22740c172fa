"""The on-disk cache of validated dataset files, and the format of its entries: so that a process
need not validate again a file this machine has validated before (as Python's bytecode cache
spares compiling a module). Everything an entry holds is written and read here.

An entry's name (its key) is the SHA-256 of the dataset file's bytes as stored and a fingerprint of
the validator (the source of the modules whose rules a file is checked against, the Python version,
the entry layout), so a changed file or changed rules never meet an old entry. An entry is written,
atomically, only after a file passed every check of :mod:`ace_gym.instance`. Its first line is the
CRC-32 of everything after it: an index line (the layout, the key, the file's SHA-256 and the
validator fingerprint it was written for, the file's header fields, its instance ids and where each
text ends) and, for each instance, three JSON texts (:func:`entry_texts`): its compiled form
(:func:`compiled_entry`: the :class:`~ace_gym.instance.compiled.CompiledParts` as ints and strings,
so that setting an instance up is one parse and no lookups), its item texts
(:func:`entry_item_texts`: what the item dicts hold beyond the compiled columns, read on the first
item lookup only) and its other fields (:func:`entry_document`, read only when the pydantic model
is asked for).

An entry is served only for the file it was written for: its index must name the key, the file
hash and the fingerprint the reader asks with (an entry of another file copied into a file's
place, even with its checksum recomputed, is not served), and its checksum must hold. Anything
else (absent, not a regular file, over :data:`MAX_ENTRY_BYTES`, another layout, corrupt, written
for another file, an index the caller's check refuses) is a miss: the file is validated in full
and its entry written anew. A cache folder that cannot be written is skipped. Nothing is
unpickled. The checksum guards against corruption and misplaced entries; against a writer who
builds a whole entry for the file, an entry is read only when this process's user (or root) owns
it and neither its group nor others may write it (a cache folder shared between users then serves
each user the entries that user wrote).

The folder is ``$ACE_GYM_CACHE_DIR``, else ``$XDG_CACHE_HOME/ace-gym``, else ``~/.cache/ace-gym``;
``ACE_GYM_CACHE_DIR=""`` (set and empty) turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from itertools import chain
from json.encoder import encode_basestring_ascii
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ace_gym.atomic import AtomicFile, read_regular_file
from ace_gym.domains import DOMAINS, Domain
from ace_gym.instance.compiled import CompiledInstance, CompiledParts
from ace_gym.text import clipped

if TYPE_CHECKING:
    from ace_gym.dataset_schema import Instance

logger = logging.getLogger(__name__)

LAYOUT = 7
"""Version of the entry layout below; part of every entry's name."""
MAX_ENTRY_BYTES = 512 * 2**20
"""The largest entry written or read (an entry of a bundled file takes about 0.6 times its JSON)."""
_CHECKSUM_LINE = 9
"""Bytes of an entry's first line: its CRC-32 as 8 hex digits, and a line break."""
_VALIDATOR_MODULES = (
    "instance",
    "dataset_schema.py",
    "constraints.py",
    "prompts.py",
    "errors.py",
    "domains",
)
"""Sources (under the ace_gym package folder) of every rule a dataset file is checked against."""


class CachedDataset(NamedTuple):
    """An entry: the file's header fields (every ``DatasetFile`` field but ``instances``), its
    instance ids, and ``data`` (the entry file's bytes) holding three JSON texts per instance,
    piece ``j`` being ``data[bounds[j]:bounds[j+1]]``: instance ``k``'s compiled form (piece
    ``3k``), its item texts (``3k+1``) and its other fields (``3k+2``)."""

    header: dict[str, Any]
    instance_ids: tuple[str, ...]
    bounds: tuple[int, ...]
    data: bytes

    def compiled_json(self, index: int) -> bytes:
        """Instance ``index``'s :func:`compiled_entry`."""
        return self._piece(3 * index)

    def item_texts_start(self, index: int) -> int:
        """Where instance ``index``'s :func:`entry_item_texts` starts in
        ``data`` (read in place, a line at a time: never copied whole)."""
        return self.bounds[3 * index + 1]

    def instance_json(self, index: int) -> bytes:
        """Instance ``index``'s :func:`entry_document`."""
        return self._piece(3 * index + 2)

    def _piece(self, piece: int) -> bytes:
        return self.data[self.bounds[piece] : self.bounds[piece + 1]]


def cache_folder() -> Path | None:
    """Where entries live (see the module docstring), or None when the cache is off."""
    configured = os.environ.get("ACE_GYM_CACHE_DIR")
    if configured is not None:
        return Path(configured) / "datasets" if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ace-gym" / "datasets"


@lru_cache(maxsize=1)
def validator_fingerprint() -> str:
    """SHA-256 (hex, shortened) of the validator's sources, the Python version and :data:`LAYOUT`."""
    package = Path(__file__).parent.parent  # ace_gym
    digest = hashlib.sha256(f"{LAYOUT} {sys.version}".encode())
    for name in _VALIDATOR_MODULES:
        target = package / name
        for source in sorted(target.glob("*.py")) if target.is_dir() else [target]:
            digest.update(source.name.encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def _binding(file_sha256: str) -> dict[str, Any]:
    """What the index of the entry of a file with these bytes under this validator records of
    them: the layout, the entry's key (its name without ``.json``), the file's hash and the
    validator's fingerprint."""
    fingerprint = validator_fingerprint()
    return {
        "layout": LAYOUT,
        "key": f"{file_sha256}-{fingerprint}",
        "file_sha256": file_sha256,
        "validator_fingerprint": fingerprint,
    }


def read_entry(
    file_sha256: str, check: Callable[[CachedDataset], str | None] = lambda entry: None
) -> CachedDataset | None:
    """The entry written for a file with these bytes under this validator, or None: absent, not a
    regular file or too large (never read: a FIFO or device in its place does not block or read
    without end), owned by another user or writable by others, another layout, corrupt, written
    for another file or validator, or refused by ``check`` (which says why an entry that checks
    out here cannot be the file's, or returns None).
    Every miss but an absent entry is logged as a warning."""
    folder = cache_folder()
    if folder is None:
        return None
    binding = _binding(file_sha256)
    path = folder / f"{binding['key']}.json"
    try:
        data = read_regular_file(path, MAX_ENTRY_BYTES, trusted_only=True)
    except FileNotFoundError:
        return None
    except OSError as error:
        logger.warning("ignoring the dataset cache entry %s: %s", path, error.strerror or error)
        return None
    try:
        entry = _checked_entry(data, binding)
        problem = check(entry)
    except ValueError as error:
        problem = str(error)
    except (KeyError, TypeError, RecursionError) as error:
        problem = f"its index is malformed ({type(error).__name__}: {error})"
    if problem is not None:
        logger.warning("ignoring the dataset cache entry %s: %s", path, problem)
        return None
    return entry


def _checked_entry(data: bytes, binding: dict[str, Any]) -> CachedDataset:
    """The entry ``data`` holds if its checksum holds, its index records the values of
    ``binding`` and is well formed; ValueError saying why not."""
    checked = memoryview(data)[_CHECKSUM_LINE:]
    if data[:_CHECKSUM_LINE] != b"%08x\n" % zlib.crc32(checked):
        raise ValueError("its checksum does not hold")
    start = data.find(b"\n", _CHECKSUM_LINE) + 1  # the body follows the index line; sliced, never copied whole
    index = json.loads(data[_CHECKSUM_LINE:start])
    if not isinstance(index, dict):
        raise ValueError("its index is not a JSON object")
    differing = [name for name, value in binding.items() if index.get(name) != value]
    if differing:  # e.g. another file's entry copied into this one's place
        raise ValueError(f"it records another {', '.join(differing)} than asked for")
    instance_ids, ends = index["instance_ids"], index["ends"]
    if not isinstance(index["header"], dict) or not _all_of_type(instance_ids, str) or not _all_of_type(ends, int):
        raise ValueError("its index is malformed")
    if len(ends) != 3 * len(instance_ids) or ends != sorted(ends) or ends[0] < 0 or ends[-1] != len(data) - start:
        raise ValueError("its index does not hold three texts per instance")
    return _entry(index["header"], instance_ids, data, start, ends)


def _all_of_type(values: object, kind: type) -> bool:
    """Whether ``values`` is a non-empty list of ``kind`` values (bool is no int here)."""
    return isinstance(values, list) and bool(values) and all(type(value) is kind for value in values)


def write_entry(
    file_sha256: str,
    header: dict[str, Any],
    instance_ids: Sequence[str],
    texts: Iterable[tuple[bytes, bytes, bytes]],
) -> CachedDataset | None:
    """Store a validated file's entry (``texts``: each instance's three JSON texts, in the order
    :class:`CachedDataset` holds them; not iterated when the cache is off) and return it as
    :func:`read_entry` would read it back; None when the cache is off or the entry would exceed
    :data:`MAX_ENTRY_BYTES`. Best effort: a folder that cannot be written is logged and skipped
    (the entry is still returned)."""
    folder = cache_folder()
    if folder is None:
        return None
    binding = _binding(file_sha256)
    path = folder / f"{binding['key']}.json"
    pieces = [text for instance_texts in texts for text in instance_texts]
    ends, end = [], 0
    for text in pieces:
        end += len(text)
        ends.append(end)
    index = {
        **binding,
        "header": header,
        "instance_ids": list(instance_ids),
        "ends": ends,
    }
    index_line = json.dumps(index).encode() + b"\n"
    checksum = zlib.crc32(index_line)
    for text in pieces:
        checksum = zlib.crc32(text, checksum)
    data = b"".join([b"%08x\n" % checksum, index_line, *pieces])
    if len(data) > MAX_ENTRY_BYTES:
        logger.info("dataset cache not written at %s: %d bytes, over MAX_ENTRY_BYTES", path, len(data))
        return None
    try:
        with AtomicFile(path, durable=False) as entry:
            entry.handle.write(data)
    except OSError as error:
        logger.info("dataset cache not written at %s: %s", path, error)
    return _entry(header, instance_ids, data, len(data) - end, ends)


def _entry(
    header: dict[str, Any], instance_ids: Sequence[str], data: bytes, start: int, ends: Sequence[int]
) -> CachedDataset:
    """The entry in ``data`` whose body starts at ``start`` and whose texts end at ``ends`` (offsets in the body)."""
    return CachedDataset(header, tuple(instance_ids), (start, *[start + end for end in ends]), data)


_ENTRY_HEADER_INTS = ("num_instances", "rows", "cols", "candidates_per_slot")
_ENTRY_HEADER_LISTS = ("hidden_slots", "branch_budget")
"""With ``domain``, the fields of an entry's header: every :class:`DatasetFile` field but ``instances``."""


def _entry_header_problem(entry: CachedDataset) -> str | None:
    """Why ``entry``'s header cannot be the one written for a validated file (its fields, their
    types, a known domain, the instance count), or None: what
    :meth:`ace_gym.instance.loading.Dataset.from_cache_entry` and its ``model`` rely on, checked
    without pydantic."""
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

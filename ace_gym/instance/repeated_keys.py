"""Repeated-key detection: a JSON object that repeats a key (a reader keeps its last value only)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ace_gym.errors import DatasetError
from ace_gym.text import clipped

if TYPE_CHECKING:
    from ace_gym.dataset_schema import DatasetFile


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


def _json_path(loc: Sequence[int | str]) -> str:
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path

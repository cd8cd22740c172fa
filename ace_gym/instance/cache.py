"""The on-disk cache of validated dataset files: so that a process need not validate again a file
this machine has validated before (as Python's bytecode cache spares compiling a module). This
module stores and finds entries; what an entry holds per instance, and how an instance is read
back from it, is :mod:`ace_gym.instance.cached_instance`.

An entry's name (its key) is the SHA-256 of the dataset file's bytes as stored and a fingerprint of
the validator (the source of the modules whose rules a file is checked against, the Python version,
the entry layout), so a changed file or changed rules never meet an old entry. An entry is written,
atomically, only after a file passed every check of :mod:`ace_gym.instance`. Its first line is the
CRC-32 of everything after it: an index line (the layout, the key, the file's SHA-256 and the
validator fingerprint it was written for, the file's header fields, its instance ids and where each
text ends) and, for each instance, its three JSON texts
(:func:`~ace_gym.instance.cached_instance.entry_texts`).

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
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from ace_gym.atomic import AtomicFile, read_regular_file
from ace_gym.domains import DOMAINS
from ace_gym.text import clipped

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
    instance ids, and ``data`` (the entry file's bytes) holding three JSON texts per instance
    (:mod:`ace_gym.instance.cached_instance`), piece ``j`` being ``data[bounds[j]:bounds[j+1]]``:
    instance ``k``'s compiled form (piece ``3k``), its item texts (``3k+1``) and its other fields
    (``3k+2``)."""

    header: dict[str, Any]
    instance_ids: tuple[str, ...]
    bounds: tuple[int, ...]
    data: bytes

    def compiled_json(self, index: int) -> bytes:
        """Instance ``index``'s :func:`~ace_gym.instance.cached_instance.compiled_entry`."""
        return self._piece(3 * index)

    def item_texts_start(self, index: int) -> int:
        """Where instance ``index``'s :func:`~ace_gym.instance.cached_instance.entry_item_texts` starts in
        ``data`` (read in place, a line at a time: never copied whole)."""
        return self.bounds[3 * index + 1]

    def instance_json(self, index: int) -> bytes:
        """Instance ``index``'s :func:`~ace_gym.instance.cached_instance.entry_document`."""
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


def entry_header_problem(entry: CachedDataset) -> str | None:
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

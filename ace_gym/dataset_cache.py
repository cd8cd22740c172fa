"""A content-addressed cache of validated dataset files, so that a process need not validate again
a file this machine has validated before (as Python's bytecode cache spares compiling a module).

An entry's name is the SHA-256 of the dataset file's bytes as stored and a fingerprint of the
validator (the source of the modules whose rules a file is checked against, the Python version),
so a changed file or changed rules never meet an old entry. An entry is written, atomically, only
after a file passed every check of :mod:`ace_gym.instance`; it holds the file's header fields, its
instance ids and, for each instance, three JSON texts (:func:`ace_gym.instance.entry_texts`): its
compiled form (:meth:`ace_gym.instance.CompiledInstance.entry`: the arrays and texts the tools work
on, as ints and strings, so that setting an instance up is one parse and no lookups), its item
texts (:func:`ace_gym.instance.entry_item_texts`: what the item dicts hold beyond the compiled
columns, read on the first item lookup only) and its other fields
(:func:`ace_gym.instance.entry_document`, read only when the pydantic model is asked for), with a
CRC-32 of those texts.
An entry that cannot be read, has another layout or fails its CRC is ignored (the file is then
validated in full); a cache folder that cannot be written is skipped. Nothing is unpickled.

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
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from ace_gym.atomic import AtomicFile

logger = logging.getLogger(__name__)

LAYOUT = 6
"""Version of the entry layout below; part of every entry's name."""
_VALIDATOR_MODULES = (
    "instance.py",
    "dataset_schema.py",
    "constraints.py",
    "prompts.py",
    "errors.py",
    "domains",
    "tools/names.py",
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
        """Instance ``index``'s :meth:`ace_gym.instance.CompiledInstance.entry`."""
        return self._piece(3 * index)

    def item_texts_start(self, index: int) -> int:
        """Where instance ``index``'s :func:`ace_gym.instance.entry_item_texts` starts in
        ``data`` (read in place, a line at a time: never copied whole)."""
        return self.bounds[3 * index + 1]

    def instance_json(self, index: int) -> bytes:
        """Instance ``index``'s :func:`ace_gym.instance.entry_document`."""
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
    package = Path(__file__).parent
    digest = hashlib.sha256(f"{LAYOUT} {sys.version}".encode())
    for name in _VALIDATOR_MODULES:
        target = package / name
        for source in sorted(target.glob("*.py")) if target.is_dir() else [target]:
            digest.update(source.name.encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def _entry_path(file_sha256: str) -> Path | None:
    folder = cache_folder()
    return None if folder is None else folder / f"{file_sha256}-{validator_fingerprint()}.json"


def read_entry(file_sha256: str) -> CachedDataset | None:
    """The entry for a file with these bytes under this validator, or None (absent, unreadable,
    another layout, or corrupt)."""
    path = _entry_path(file_sha256)
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    start = data.find(b"\n") + 1  # the body follows the index line; sliced, never copied whole
    try:
        index = json.loads(data[:start])
        ends, count = index["ends"], len(index["instance_ids"])
        body = memoryview(data)[start:]
        if index["layout"] != LAYOUT or zlib.crc32(body) != index["crc32"] or ends[-1:] != [len(body)]:
            raise ValueError("entry does not check out")
        if len(ends) != 3 * count:
            raise ValueError("entry does not hold three texts per instance")
        return _entry(index["header"], index["instance_ids"], data, start, ends)
    except (ValueError, KeyError, TypeError):
        logger.warning("ignoring the unreadable dataset cache entry %s", path)
        return None


def write_entry(
    file_sha256: str,
    header: dict[str, Any],
    instance_ids: Sequence[str],
    texts: Iterable[tuple[bytes, bytes, bytes]],
) -> CachedDataset | None:
    """Store a validated file's entry (``texts``: each instance's three JSON texts, in the order
    :class:`CachedDataset` holds them; not iterated when the cache is off) and return it as
    :func:`read_entry` would read it back; None when the cache is off. Best effort: a folder that
    cannot be written is logged and skipped (the entry is still returned)."""
    path = _entry_path(file_sha256)
    if path is None:
        return None
    pieces = [text for instance_texts in texts for text in instance_texts]
    body = b"".join(pieces)
    ends, end = [], 0
    for text in pieces:
        end += len(text)
        ends.append(end)
    index = {"layout": LAYOUT, "crc32": zlib.crc32(body), "header": header, "instance_ids": list(instance_ids)}
    index["ends"] = ends
    data = json.dumps(index).encode() + b"\n" + body
    try:
        with AtomicFile(path, durable=False) as entry:
            entry.handle.write(data)
    except OSError as error:
        logger.info("dataset cache not written at %s: %s", path, error)
    return _entry(header, instance_ids, data, len(data) - len(body), ends)


def _entry(
    header: dict[str, Any], instance_ids: Sequence[str], data: bytes, start: int, ends: Sequence[int]
) -> CachedDataset:
    """The entry in ``data`` whose body starts at ``start`` and whose texts end at ``ends`` (offsets in the body)."""
    return CachedDataset(header, tuple(instance_ids), (start, *[start + end for end in ends]), data)

"""Result files of an evaluation run: an append-only JSONL of episode records, and atomic JSON.

``episodes.jsonl`` survives being killed at any instant: each record is one line written with a
single ``os.write`` on an ``O_APPEND`` descriptor and fsynced before the next episode counts as
done. A kill can therefore only leave a torn *last* line, which :meth:`EpisodeLog.open` cuts off
before appending again, so re-running an evaluation loses nothing and duplicates nothing.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"


def read_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Every complete record of a JSONL file, in file order; a torn or garbled line is skipped
    (logged), a missing file yields nothing."""
    path = Path(path)
    if not path.exists():
        return
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                logger.warning("%s: ignoring torn last line %d (%d bytes)", path, number, len(line))
                return
            try:
                record = json.loads(line)
            except ValueError:
                logger.warning("%s: ignoring unreadable line %d", path, number)
                continue
            if isinstance(record, dict):
                yield record


class EpisodeLog:
    """An append-only, crash-safe JSONL file of episode records keyed by ``record["key"]``.

    Use as a context manager or call :meth:`close`. ``keys`` holds the keys already present;
    :meth:`append` writes one record atomically (one write + fsync) and adds its key.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _cut_torn_tail(self.path)
        self.keys: set[str] = {str(r["key"]) for r in read_records(self.path) if "key" in r}
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        written = os.write(self._fd, line)
        if written != len(line):  # a regular file only writes short when the disk is full
            raise OSError(f"{self.path}: short write ({written} of {len(line)} bytes)")
        os.fsync(self._fd)
        self.keys.add(str(record["key"]))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> EpisodeLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _cut_torn_tail(path: Path) -> None:
    """Truncate a file after its last newline (the remains of a write cut short by a kill)."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return
        position = size
        while position > 0:
            step = min(65536, position)
            handle.seek(position - step)
            chunk = handle.read(step)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                position = position - step + newline + 1
                break
            position -= step
        if position != size:
            logger.warning("%s: cutting a torn last line (%d bytes)", path, size - position)
            handle.truncate(position)
            handle.flush()
            os.fsync(handle.fileno())


def write_json_atomic(path: str | os.PathLike[str], value: Any) -> None:
    """Write ``value`` as indented JSON to ``path`` via a temp file + ``os.replace`` (never half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(value, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

"""Result files of an evaluation run: an append-only JSONL of episode records, and the JSON summary.

``episodes.jsonl`` survives being killed at any instant: each record is one line written with a
single ``os.write`` on an ``O_APPEND`` descriptor and fsynced before the next episode counts as
done. A kill can therefore only leave a torn *last* line, which :class:`EpisodeLog` cuts off
before appending again, so re-running an evaluation loses nothing and duplicates nothing. A write
that fails (a full disk) is undone before the error propagates. One :class:`EpisodeLog` at a time
holds a file: it takes an exclusive lock, and a second writer gets :class:`FileInUseError`
naming the process that holds it.

Every record is writable: text is serialised as UTF-8, and a lone surrogate (which UTF-8 cannot
encode; a model can emit one) is written as its JSON escape ``\\udXXX``, which reads back as the
same Python string.

Reading checks each line against what a summary needs (:func:`record_problem`) and that it nests
no deeper than :data:`~ace_gym.text.MAX_JSON_DEPTH` levels (so that every consumer can walk it); a
complete line that fails raises :class:`MalformedRecordsError` naming the lines, unless the caller
asks to skip them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ace_gym.atomic import open_regular, write_atomic
from ace_gym.errors import AceGymError, InUseError
from ace_gym.text import MAX_JSON_DEPTH, nested_deeper_than

logger = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
RECORD_TEXT_FIELDS = ("key", "policy", "domain")
RECORD_INT_FIELDS = ("hidden_slots", "decoy_budget")
MAX_RECORD_BYTES = 256 * 2**20
"""The longest line read as a record; a longer one is malformed (it would take gigabytes to parse)."""
MAX_SUMMARY_BYTES = 64 * 2**20
"""The largest ``summary.json`` read back (for its run identity); a larger one is refused (OSError)."""
_MAX_NAMED_LINES = 5


class MalformedRecordsError(AceGymError):
    """Complete lines of an episode file that are not episode records (by :func:`record_problem`)."""

    def __init__(self, path: Path, problems: list[tuple[int, str]], good: int) -> None:
        self.path, self.problems, self.good = path, problems, good
        named = "; ".join(f"line {number}: {problem}" for number, problem in problems[:_MAX_NAMED_LINES])
        more = f"; and {len(problems) - _MAX_NAMED_LINES} more" if len(problems) > _MAX_NAMED_LINES else ""
        super().__init__(
            f"{path}: {len(problems)} malformed line(s) among {good + len(problems)}: {named}{more}. "
            "The file was not modified; repair or delete those lines, or pass --skip-malformed to ignore them"
        )


class FileInUseError(InUseError):
    """Another process holds the lock of an episode file."""

    def __init__(self, path: Path, pid: int | None) -> None:
        self.path, self.pid = path, pid
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"{path.parent} is in use by {holder} (another evaluation writing {path.name}); "
            "wait for it to finish or use another output directory"
        )


def encode_json(value: Any, *, indent: int | None = None) -> bytes:
    """``value`` as UTF-8 JSON text; lone surrogates become ``\\udXXX`` escapes (lossless)."""
    separators = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(value, ensure_ascii=False, indent=indent, separators=separators)
    return text.encode("utf-8", errors="backslashreplace")  # only surrogates fail, and only inside strings


def record_problem(record: Any) -> str | None:
    """Why ``record`` cannot be summarised, or None: it must be a JSON object with string ``key``,
    ``policy`` and ``domain``; an ACE record integer ``hidden_slots`` and ``decoy_budget`` and a
    ``score`` in [0, 1], an AgentLongBench record (it has ``question_type``) a ``score`` in [0, 1]
    or null; and, when present, a numeric ``tool_failure_rate`` and a ``usage`` object of numbers."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for name in RECORD_TEXT_FIELDS:
        if not isinstance(record.get(name), str):
            return f"{name!r} is missing or not a string"
    problem = _alb_problem(record) if "question_type" in record else _ace_problem(record)
    if problem is not None:
        return problem
    rate = record.get("tool_failure_rate")
    if rate is not None and not is_number(rate):
        return f"'tool_failure_rate' is {rate!r}, not a number"
    usage = record.get("usage", {})
    if not isinstance(usage, dict) or not all(is_number(v) for v in usage.values()):
        return "'usage' is not an object of numbers"
    return None


def _ace_problem(record: dict[str, Any]) -> str | None:
    for name in RECORD_INT_FIELDS:
        if type(record.get(name)) is not int:
            return f"{name!r} is missing or not an integer"
    score = record.get("score")
    if not is_number(score) or not 0.0 <= score <= 1.0:  # type: ignore[operator]
        return f"'score' is {score!r}, not a number in [0, 1]"
    return None


def _alb_problem(record: dict[str, Any]) -> str | None:
    """An AgentLongBench QA record has no grid; an unscorable answer has score None."""
    score = record.get("score")
    if score is not None and not (is_number(score) and 0.0 <= score <= 1.0):
        return f"'score' is {score!r}, not null or a number in [0, 1]"
    return None


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite JSON number (or bool) that a float holds."""
    if type(value) not in (int, float, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def read_records(
    path: str | os.PathLike[str],
    *,
    skipped: list[int] | None = None,
    check: Callable[[dict[str, Any]], str | None] | None = None,
    duplicates: list[int] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every valid record of a JSONL episode file, in file order; a missing file yields nothing.

    The file must be a regular file (:func:`~ace_gym.atomic.open_regular`: a FIFO or a device
    raises NotRegularFileError, an OSError). A torn last line (no newline: a write cut short, or
    one in progress) is ignored with a warning. Other lines that are not records (not JSON, nested
    deeper than :data:`~ace_gym.text.MAX_JSON_DEPTH` levels, longer than :data:`MAX_RECORD_BYTES`, failing
    :func:`record_problem` or the caller's own ``check``): without ``skipped``,
    :class:`MalformedRecordsError` naming them is raised once the valid records were yielded;
    with it, their line numbers are appended to ``skipped`` and each is logged. With
    ``duplicates``, a record whose key an earlier record has is left out and its line number
    appended (the first record of each key is kept, as the summary keeps it).
    """
    path = Path(path)
    if not path.exists():
        return
    problems: list[tuple[int, str]] = []
    good = 0
    keys: set[str] = set()
    with open_regular(path) as handle:
        for number, line in enumerate(_bounded_lines(handle, MAX_RECORD_BYTES), start=1):
            if line is not None and not line.endswith(b"\n"):
                logger.warning("%s: ignoring torn last line %d (%d bytes)", path, number, len(line))
                break
            record, problem = _parse_record(line, check)
            if problem is None:
                if duplicates is not None:
                    if record["key"] in keys:
                        duplicates.append(number)
                        continue
                    keys.add(record["key"])
                good += 1
                yield record
            elif skipped is not None:
                logger.warning("%s: skipping malformed line %d: %s", path, number, problem)
                skipped.append(number)
            else:
                problems.append((number, problem))
    if problems:
        raise MalformedRecordsError(path, problems, good)


def unique_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Records with distinct keys (the first of each key wins), in input order."""
    seen: set[Any] = set()
    out = []
    for record in records:
        if record.get("key") not in seen:
            seen.add(record.get("key"))
            out.append(record)
    return out


def duplicates_note(path: Path, lines: list[int]) -> str:
    """One line saying that the records on ``lines`` of ``path`` were left out as duplicates."""
    named = ", ".join(map(str, lines[:_MAX_NAMED_LINES])) + (", ..." if len(lines) > _MAX_NAMED_LINES else "")
    return (
        f"{path}: left out {len(lines)} record(s) whose key an earlier line has (lines {named}); "
        "the first record of each key is used"
    )


def _parse_record(line: bytes | None, check: Callable[[dict[str, Any]], str | None] | None) -> tuple[Any, str | None]:
    """The record a complete line holds and why it is not a valid one (None when it is)."""
    if line is None:
        return None, f"longer than {MAX_RECORD_BYTES} bytes"
    try:
        record = json.loads(line)
    except RecursionError:  # nested deeper than the parser goes; a RuntimeError, not a ValueError
        return None, "not JSON (nested too deeply)"
    except ValueError as error:  # also an integer of too many digits, or bytes that are no UTF-8
        return None, f"not JSON ({error})"
    if nested_deeper_than(record, MAX_JSON_DEPTH):  # every reader (replay, export, repr, ==) would recurse too deep
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels"
    problem = record_problem(record)
    if problem is None and check is not None:
        problem = check(record)
    return record, problem


def _bounded_lines(handle: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """The lines of ``handle``; None for a complete line longer than ``limit`` bytes (read past,
    never held in memory whole). A last line without a newline is yielded as it is (its tail
    only, when longer than ``limit``)."""
    while line := handle.readline(limit + 1):
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):
            tail, line = line, handle.readline(limit)
        yield None if line else tail


class EpisodeLog:
    """An append-only, crash-safe JSONL file of episode records keyed by ``record["key"]``.

    Opening takes an exclusive lock (``fcntl.flock`` on ``.<name>.lock`` beside the file, which
    holds the owner's pid; released when the process dies, and removed, still held, when closed)
    or raises :class:`FileInUseError`; then cuts a torn last line and reads the keys present
    (:func:`read_records`: malformed lines raise unless ``skip_malformed``). Use as a context
    manager or call :meth:`close`. :meth:`append` writes one record atomically (one write + fsync)
    and adds its key.
    """

    def __init__(self, path: str | os.PathLike[str], *, skip_malformed: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock(self.path)
        self._fd = -1
        try:
            _cut_torn_tail(self.path)
            skipped: list[int] | None = [] if skip_malformed else None
            self.keys: set[str] = {str(r["key"]) for r in read_records(self.path, skipped=skipped)}
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except BaseException:
            self.close()
            raise

    def append(self, record: Mapping[str, Any]) -> None:
        line = encode_json(record) + b"\n"
        size = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, line)
            if written != len(line):  # a regular file only writes short when the disk is full
                raise OSError(f"{self.path}: short write ({written} of {len(line)} bytes)")
            os.fsync(self._fd)
        except OSError:  # e.g. a full disk: leave the file as it was, whole lines only
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            raise
        self.keys.add(str(record["key"]))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            _unlock(self.path, self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> EpisodeLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def _lock(path: Path) -> int:
    """Take the exclusive lock of ``path``; returns the lock file's descriptor. A lock file that
    its holder removed while this process waited for it is no lock: open the new one again."""
    while True:
        descriptor = os.open(_lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip()
            os.close(descriptor)
            raise FileInUseError(path, int(holder) if holder.isdigit() else None) from None
        except BaseException:
            os.close(descriptor)
            raise
        if _is_lock_file(path, descriptor):
            break
        os.close(descriptor)  # removed by the holder that closed before us
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode("ascii"), 0)
    return descriptor


def _is_lock_file(path: Path, descriptor: int) -> bool:
    """Whether ``descriptor`` is still the file at ``path``'s lock path."""
    try:
        named = os.stat(_lock_path(path))
    except FileNotFoundError:
        return False
    held = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _unlock(path: Path, descriptor: int) -> None:
    """Remove the lock file while still holding it (so no other process can hold the removed
    file: :func:`_lock` checks), then release it."""
    try:
        if _is_lock_file(path, descriptor):
            with contextlib.suppress(OSError):  # e.g. a folder made read-only during the run
                os.unlink(_lock_path(path))
    finally:
        os.close(descriptor)


def _cut_torn_tail(path: Path) -> None:
    """Truncate a file after its last newline (the remains of a write cut short by a kill)."""
    if not path.exists():
        return
    with open_regular(path, writable=True) as handle:
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
    """Write ``value`` as indented JSON to ``path`` atomically (:func:`~ace_gym.atomic.write_atomic`,
    :func:`encode_json`)."""
    write_atomic(path, lambda handle: handle.write(encode_json(value, indent=2) + b"\n"))

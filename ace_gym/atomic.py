"""Atomic file writes: a file appears at its path whole, or not at all; and safe opening of a
file for reading.

Every file ace-gym produces for later reading (datasets, summaries, heatmaps, exported
AgentLongBench rows, a vector env's observation hand-off) is written through
:class:`AtomicFile`: under a uniquely named temporary file in the target's folder, then moved over
the target with ``os.replace``. A reader never sees a partial file, concurrent writers never share
a temporary file, and a failure (a full disk, Ctrl-C) leaves the old file and no temporary one.
A writer holds an exclusive ``flock`` on its temporary file until it is in place, so the
temporary file of a writer that was killed (``kill -9``, a power cut) is told apart from a live
one and removed by :func:`remove_stale_temporaries`.

A file ace-gym reads back from a folder others may write to (a dataset cache entry, a run's
records) is opened with :func:`open_regular` or read with :func:`read_regular_file`: a FIFO, a
device or a link to one is refused with :class:`NotRegularFileError` before a byte is read, so
that a read never blocks on a FIFO nor runs on without end from ``/dev/zero``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO


class AtomicFile:
    """A file being written to ``path`` atomically.

    ``handle`` is the open temporary file (binary, or UTF-8 text with ``text=True``).
    :meth:`commit` flushes it, fsyncs it when ``durable`` (results that must survive a power cut;
    not needed for data handed between live processes), makes it readable by all (0644) and moves
    it over ``path``; :meth:`discard` removes it. As a context manager it commits on a clean exit
    and discards on an exception. The folder of ``path`` is created if missing.
    """

    def __init__(self, path: str | os.PathLike[str], *, text: bool = False, durable: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        descriptor, self._temporary = _locked_temporary(self.path)
        try:
            self.handle: IO[Any] = os.fdopen(descriptor, "w", encoding="utf-8") if text else os.fdopen(descriptor, "wb")
        except BaseException:
            os.close(descriptor)
            Path(self._temporary).unlink(missing_ok=True)
            raise

    def commit(self) -> Path:
        """Move the written file into place (replacing any file there); returns ``path``."""
        try:
            self.handle.flush()
            if self.durable:
                os.fsync(self.handle.fileno())
            os.fchmod(self.handle.fileno(), 0o644)  # mkstemp creates 0600; what we write is meant to be shared
            os.replace(self._temporary, self.path)  # before closing: the lock marks a live writer until here
            self.handle.close()
        except BaseException:
            self.discard()
            raise
        return self.path

    def discard(self) -> None:
        """Remove and close the temporary file; ``path`` is left as it was."""
        Path(self._temporary).unlink(missing_ok=True)
        self.handle.close()

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def _locked_temporary(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path`` (``.<name>.<random>.tmp``), exclusively locked:
    its descriptor and path. Where the file system has no ``flock`` it is left unlocked."""
    while True:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError:
            return descriptor, temporary  # no locks here: remove_stale_temporaries leaves the file alone
        except BaseException:
            os.close(descriptor)
            Path(temporary).unlink(missing_ok=True)
            raise
        if os.fstat(descriptor).st_nlink:
            return descriptor, temporary
        os.close(descriptor)  # removed between its creation and the lock as a dead writer's: take another


def remove_stale_temporaries(folder: str | os.PathLike[str], name_prefix: str) -> list[Path]:
    """Remove the temporary files that killed :class:`AtomicFile` writers of files named
    ``name_prefix*`` left in ``folder``; returns their paths. A file a live writer holds (its lock
    is taken) is left alone, as is one whose lock cannot be tested."""
    removed = []
    for path in sorted(Path(folder).glob(f".{glob.escape(name_prefix)}*.tmp")):
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # gone since the listing, a link, or unreadable
            continue
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                continue
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with contextlib.suppress(FileNotFoundError):  # a writer moved it into place meanwhile
                path.unlink()
                removed.append(path)
        except OSError:  # held by a live writer (BlockingIOError), or no locks on this file system
            continue
        finally:
            os.close(descriptor)
    return removed


class NotRegularFileError(OSError):
    """A file to be read is a FIFO, a device, a socket or a folder, not a regular file."""


def open_regular(path: str | os.PathLike[str], *, writable: bool = False) -> BinaryIO:
    """Open ``path`` (symlinks followed) for binary reading (and writing in place when
    ``writable``: mode ``rb+``) when it is a regular file.

    A FIFO, device, socket or folder raises :class:`NotRegularFileError` (an OSError naming the
    path and what it is) without waiting for a writer or reading from it; a missing file raises
    FileNotFoundError."""
    kind = _special_kind(os.stat(path).st_mode)
    if kind is None:
        flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_NONBLOCK  # never waits, even if swapped for a FIFO
        descriptor = os.open(path, flags)
        kind = _special_kind(os.fstat(descriptor).st_mode)
        if kind is None:
            os.set_blocking(descriptor, True)
            return os.fdopen(descriptor, "rb+" if writable else "rb")
        os.close(descriptor)
    raise NotRegularFileError(errno.EINVAL, f"is {kind}, not a regular file", os.fspath(path))


def read_regular_file(path: str | os.PathLike[str], limit: int, *, trusted_only: bool = False) -> bytes:
    """The bytes of the regular file at ``path`` (see :func:`open_regular`), at most ``limit`` of
    them. Raises OSError when it is not a regular file or holds more than ``limit`` bytes (errno
    EFBIG; a file that grows while read is read no further than ``limit + 1``); with
    ``trusted_only``, also when another user than this process's (or root) owns it or its group or
    others may write it (errno EPERM): a file someone else could have written is not read."""
    too_large = OSError(errno.EFBIG, f"holds more than {limit} bytes", os.fspath(path))
    with open_regular(path) as stream:
        status = os.fstat(stream.fileno())
        if trusted_only and not _written_by_this_user_only(status):
            raise OSError(errno.EPERM, "is owned by another user or writable by others", os.fspath(path))
        size = status.st_size
        if size > limit:
            raise too_large
        data = stream.read(size + 1)  # to the end, in one read
        if len(data) > size:  # it grew meanwhile: read on, to one byte past the limit at most
            data += stream.read(limit - size)
    if len(data) > limit:
        raise too_large
    return data


def _written_by_this_user_only(status: os.stat_result) -> bool:
    """Whether only this process's user (or root) can have written a file of this status."""
    if not hasattr(os, "getuid"):  # no POSIX owners (Windows): nothing to tell
        return True
    return status.st_uid in (os.getuid(), 0) and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def _special_kind(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), "a special file")


def write_atomic(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object], *, durable: bool = True) -> Path:
    """Create or replace ``path`` with what ``write(binary_handle)`` writes, atomically
    (:class:`AtomicFile`); returns ``path``."""
    with AtomicFile(path, durable=durable) as target:
        write(target.handle)
    return target.path

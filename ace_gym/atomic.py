"""Atomic file writes (a file appears at its path whole, or not at all), and bounded reads of
regular files.

Every file ace-gym produces for later reading (datasets, summaries, heatmaps, exported
AgentLongBench rows, a vector env's observation hand-off) is written through
:class:`AtomicFile`: under a uniquely named temporary file in the target's folder, then moved over
the target with ``os.replace``. A reader never sees a partial file, concurrent writers never share
a temporary file, and a failure (a full disk, Ctrl-C) leaves the old file and no temporary one.

A file ace-gym reads back from a folder others may write to (a dataset cache entry, a run's
records) is opened with :func:`open_regular_file` or read with :func:`read_regular_file`: a FIFO,
a device or a link to one is refused before a byte is read, so that a read never blocks on a FIFO
nor runs on without end from ``/dev/zero``.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
"""Non-blocking: opening a FIFO that has no writer returns at once (and is then refused)."""


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
        descriptor, self._temporary = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
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
            self.handle.close()
            os.chmod(self._temporary, 0o644)  # mkstemp creates 0600; what we write is meant to be shared
            os.replace(self._temporary, self.path)
        except BaseException:
            self.discard()
            raise
        return self.path

    def discard(self) -> None:
        """Close and remove the temporary file; ``path`` is left as it was."""
        self.handle.close()
        Path(self._temporary).unlink(missing_ok=True)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def write_atomic(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object], *, durable: bool = True) -> Path:
    """Create or replace ``path`` with what ``write(binary_handle)`` writes, atomically
    (:class:`AtomicFile`); returns ``path``."""
    with AtomicFile(path, durable=durable) as target:
        write(target.handle)
    return target.path


def open_regular_file(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` (links followed) opened for binary reading if it is a regular file. Raises
    OSError when it cannot be opened or is not a regular file (a FIFO, a device, a socket, a
    directory): checked on the open descriptor, before anything is read, and without blocking."""
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"is {_file_kind(mode)}, not a regular file", os.fspath(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path`` (see :func:`open_regular_file`), at most
    ``limit`` of them. Raises OSError when it is not a regular file or holds more than ``limit``
    bytes (errno EFBIG; a file that grows while read is read no further than ``limit + 1``)."""
    too_large = OSError(errno.EFBIG, f"holds more than {limit} bytes", os.fspath(path))
    with open_regular_file(path) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > limit:
            raise too_large
        data = stream.read(size + 1)  # to the end, in one read
        if len(data) > size:  # it grew meanwhile: read on, to one byte past the limit at most
            data += stream.read(limit - size)
    if len(data) > limit:
        raise too_large
    return data


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for is_kind, name in kinds.items() if is_kind(mode)), "a special file")

"""Atomic file writes: a file appears at its path whole, or not at all.

Every file ace-gym produces for later reading (datasets, summaries, heatmaps, exported
AgentLongBench rows, a vector env's observation hand-off) is written through
:class:`AtomicFile`: under a uniquely named temporary file in the target's folder, then moved over
the target with ``os.replace``. A reader never sees a partial file, concurrent writers never share
a temporary file, and a failure (a full disk, Ctrl-C) leaves the old file and no temporary one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


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

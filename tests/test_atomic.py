"""Atomic file writes: whole files or nothing, no temporary files left behind; bounded reads of
regular files only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ace_gym.atomic import AtomicFile, open_regular_file, read_regular_file, write_atomic


def test_write_atomic__creates_the_folder_and_a_file_readable_by_all(tmp_path: Path) -> None:
    path = write_atomic(tmp_path / "new" / "result.json", lambda handle: handle.write(b"{}\n"))
    assert path.read_bytes() == b"{}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(path.parent) == ["result.json"]


def test_write_atomic__a_failing_writer_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_bytes(b"old")

    def half_then_fail(handle: object) -> None:
        handle.write(b"half")  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, half_then_fail)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["result.json"]


def test_atomic_file__a_failing_replace_leaves_the_old_file_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("old")

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    target = AtomicFile(path, text=True)
    target.handle.write("new\n")
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space"):
        target.commit()
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["rows.jsonl"]


def test_atomic_file__context_manager_commits_on_success_and_discards_on_error(tmp_path: Path) -> None:
    with AtomicFile(tmp_path / "kept.txt", text=True) as target:
        target.handle.write("ünïcode\n")
        assert not (tmp_path / "kept.txt").exists()  # nothing visible before the commit
    with pytest.raises(RuntimeError), AtomicFile(tmp_path / "dropped.txt") as target:
        target.handle.write(b"partial")
        raise RuntimeError
    assert os.listdir(tmp_path) == ["kept.txt"]
    assert (tmp_path / "kept.txt").read_text(encoding="utf-8") == "ünïcode\n"


def test_read_regular_file__reads_up_to_its_limit_and_refuses_more(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"x" * 10)
    assert read_regular_file(path, 10) == b"x" * 10
    with pytest.raises(OSError, match="holds more than 9 bytes"):
        read_regular_file(path, 9)


def test_open_regular_file__refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    """Issue 27 §3: reading a FIFO blocked until a writer came. A writer is held open here, so
    that a regression fails the test instead of blocking it."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no os.mkfifo on this system")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    keeper = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a reader and writer: no open of it blocks
    try:
        with pytest.raises(OSError, match="is a FIFO, not a regular file"):
            open_regular_file(fifo).close()
    finally:
        os.close(keeper)


@pytest.mark.parametrize("special", ["/dev/zero", "directory"])
def test_read_regular_file__refuses_a_device_or_folder_unread_links_followed(special: str, tmp_path: Path) -> None:
    """Issue 27 §3: a link to /dev/zero in a cache entry's place read without end."""
    target = tmp_path if special == "directory" else Path(special)
    if not target.exists():
        pytest.skip(f"no {special} on this system")
    link = tmp_path / "link"
    link.symlink_to(target)
    kind = "a directory" if special == "directory" else "a character device"
    with pytest.raises(OSError, match=f"is {kind}, not a regular file"):
        read_regular_file(link, 2**40)  # a read of /dev/zero would fill the memory long before 1 TiB

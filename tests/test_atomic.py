"""Atomic file writes: whole files or nothing, no temporary files left behind; bounded reads of
regular files only."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ace_gym.atomic import (
    AtomicFile,
    NotRegularFileError,
    open_regular,
    read_regular_file,
    remove_stale_temporaries,
    write_atomic,
)
from tests.core_helpers import killed_writer


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


def test_remove_stale_temporaries__removes_a_killed_writers_file_and_keeps_a_live_writers(tmp_path: Path) -> None:
    dead = killed_writer(tmp_path / "heatmap_course.png")
    other = killed_writer(tmp_path / "rows.jsonl")
    live = AtomicFile(tmp_path / "heatmap_meal.png")
    live.handle.write(b"being written")
    assert remove_stale_temporaries(tmp_path, "heatmap_") == [dead]
    assert not dead.exists() and other.exists()  # only the files of the names asked for
    live.commit()  # a live writer's file was left alone
    assert (tmp_path / "heatmap_meal.png").read_bytes() == b"being written"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["heatmap_meal.png", other.name])


def test_atomic_file__a_temporary_file_removed_before_it_was_locked_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_mkstemp = tempfile.mkstemp
    taken = []

    def mkstemp_then_cleaned(**kwargs: Any) -> tuple[int, str]:
        descriptor, name = real_mkstemp(**kwargs)
        if not taken:  # a cleaner takes the first file for a dead writer's before the writer locks it
            taken.append(remove_stale_temporaries(tmp_path, "result"))
        return descriptor, name

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_cleaned)
    write_atomic(tmp_path / "result.json", lambda handle: handle.write(b"{}"))
    assert len(taken[0]) == 1 and os.listdir(tmp_path) == ["result.json"]


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_open_and_read_regular__refuse_a_fifo_a_folder_or_a_device_unread(tmp_path: Path, kind: str) -> None:
    """Issue 27 §3: a FIFO in a file's place blocked its reader until a writer came, a link to
    /dev/zero read without end. A FIFO's writer is held open here, so that a regression fails the
    test instead of blocking it."""
    path = tmp_path / "episodes.jsonl"
    keeper = None
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no os.mkfifo on this system")
        os.mkfifo(path)
        keeper = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a reader and writer: no open of it blocks
    elif kind == "folder":
        path.mkdir()
    elif not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    else:
        path.symlink_to("/dev/zero")  # links are followed: this is a device
    what = {"fifo": "a FIFO", "folder": "a folder", "device": "a character device"}[kind]
    try:
        with pytest.raises(NotRegularFileError, match=f"is {what}, not a regular file") as raised:
            open_regular(path)
        assert raised.value.filename == str(path)
        with pytest.raises(NotRegularFileError):
            read_regular_file(path, 2**40)  # a read of /dev/zero would fill the memory long before 1 TiB
    finally:
        if keeper is not None:
            os.close(keeper)
    path.parent.joinpath("plain").write_bytes(b"line\n")
    with open_regular(path.parent / "plain") as handle:
        assert handle.read() == b"line\n"


def test_read_regular_file__trusted_only_refuses_a_file_others_may_write(tmp_path: Path) -> None:
    path = tmp_path / "entry"
    path.write_bytes(b"data")
    path.chmod(0o644)
    assert read_regular_file(path, 10, trusted_only=True) == b"data"
    path.chmod(0o664)  # its group may write it
    assert read_regular_file(path, 10) == b"data"
    with pytest.raises(OSError, match="owned by another user or writable by others"):
        read_regular_file(path, 10, trusted_only=True)

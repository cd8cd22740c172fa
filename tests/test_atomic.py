"""Atomic file writes: whole files or nothing, no temporary files left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ace_gym.atomic import AtomicFile, write_atomic


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

"""The repository stands on its own: nothing in it reads or cites material outside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.missing_modules import modules_not_installed_by, without_modules

ROOT = Path(__file__).resolve().parents[2]
# spelled in pieces so that this file does not match itself
OUTSIDE = ("../" + "shared", "shared" + "/reference", "shared" + "/spec", "shared" + "/papers", "spec" + " §")


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    names = listed.stdout.split() if listed.returncode == 0 else [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")]
    suffixes = {".py", ".md", ".toml", ".sh", ".txt", ".cfg", ".yaml", ".yml", ""}
    files = [ROOT / name for name in names]
    return [path for path in files if path.is_file() and path.suffix in suffixes and ".ci/venv" not in str(path)]


def test_repository__refers_to_nothing_outside_itself() -> None:
    offenders = []
    for path in _tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{path.relative_to(ROOT)}: {needle!r}" for needle in OUTSIDE if needle in text]
    assert not offenders, "\n".join(offenders)


COLLECT = """
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"]))
"""


@pytest.mark.slow
def test_suite__collects_without_error_where_only_the_dev_extra_is_installed() -> None:
    """The README's second command on a machine with ``pip install -e ".[dev]"`` alone: a test of an
    optional dependency is skipped, never a collection error (test_errors.py once imported the
    serve extra's fastapi at collection)."""
    script = without_modules(modules_not_installed_by(["dev"])) + COLLECT
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]

"""Shared fixtures: the published reference material lives in ../shared beside the project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REFERENCE = SHARED / "reference"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"reference material missing: {path} (tests expect ../shared beside the project)")
    return path


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return _require(REFERENCE)


def load_traces() -> list[dict]:
    with _require(REFERENCE / "parity_traces_5x5.jsonl").open() as handle:
        return [json.loads(line) for line in handle]

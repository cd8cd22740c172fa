"""Shared fixtures: the published reference material lives in ../shared beside the project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ace_gym.envs import AceEnv

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


def trace_env(trace: dict) -> AceEnv:
    """A core env configured like the recorded trace (same data file and task_config)."""
    config = trace["task_config"]
    return AceEnv(
        trace["domain"],
        dataset=REFERENCE / "data_5x5" / trace["dataset_file"],
        extra_query_num=config["extra_query_num"],
        global_check_alpha=config["global_check_alpha"],
        check_include_reason=config["check_include_reason"],
        max_query_ids=config["max_query_ids"],
        max_query_fields=config["max_query_fields"],
    )

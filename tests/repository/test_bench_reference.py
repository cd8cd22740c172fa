"""benchmarks/bench_reference.py without a release checkout: ace-gym's column alone, every row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EPISODE_ROWS = (
    "whole episode (24 traces, mean)",
    "trace mix, raw dispatcher (1554 calls)",
    "trace mix, through env.step",
)
TOOL_KINDS = (
    "done",
    "check_<domain>_global_constraints",
    "get_global_check_budget",
    "get_current_grid_state",
    "get_<domain>_item_attributes",
    "get_<domain>_item_info",
    "query_<domain>_candidate_from_attribute",
    "set_slot",
    "check_<domain>_slot_constraints",
    "get_slot_id",
    "get_hidden_slot_query_budget",
)
ROWS = (
    *(
        f"{episodes}, {when}"
        for episodes in EPISODE_ROWS
        for when in (
            "first on its instance (per-instance store empty)",
            "replayed (per-instance store filled by an earlier identical episode",
        )
    ),
    "final score on a filled grid, H=1",
    "final score on a filled grid, H=15",
    "done through env.step",
    "first query on a (slot, field)",
    "cold get_current_grid_state",
    *(f"first {tool} on a new instance from the cache (mean of 6 domains)" for tool in TOOL_KINDS),
    *(
        f"{load}, {when}"
        for load in ("load one 5x5 file", "load all six 5x5 files", "load one file + set up every instance")
        for when in ("first use (validates)", "validated before (cache)")
    ),
)


def test_bench_reference__without_reference_prints_ace_gym_column_alone() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_reference.py"), "--quick"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert "ace-gym alone" in lines[0]
    assert "release" not in lines[2]  # the header: no release column, no ratio
    for row in ROWS:
        line = next(line for line in lines if line.startswith(row))
        value, unit = line.split()[-2:]
        assert float(value) > 0
        assert unit in ("ms", "µs")

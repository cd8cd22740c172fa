"""benchmarks/bench_reference.py without a release checkout: ace-gym's column alone, every row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = (
    "whole episode",
    "trace mix, raw dispatcher",
    "trace mix, through env.step",
    "final score on a filled grid, H=1",
    "final score on a filled grid, H=15",
    "done through env.step",
    "first query on a (slot, field)",
    "cold get_current_grid_state",
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
        value, unit = line[64:].split()
        assert float(value) > 0
        assert unit in ("ms", "µs")

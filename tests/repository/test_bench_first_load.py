"""benchmarks/bench_first_load.py: every stage of a first use timed, and the floor rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROWS = (
    "read + gunzip the file",
    "parse the JSON (pydantic_core.from_json)",
    "strict schema (model_validate_json)",
    "repeated-key screen",
    "consistency checks + compile",
    "cache entry texts",
    "cache entry write",
    "whole first use (read_dataset, empty cache)",
    "floor: read + parse (any loader)",
    "floor: read + strict schema (our guarantees)",
)


def test_bench_first_load__prints_every_stage_and_the_floor_without_touching_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_first_load.py"), "--runs", "1", "--domain", "meal"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ACE_GYM_CACHE_DIR": str(cache)},
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].startswith("first use of meal_dataset_")
    for row in ROWS:
        line = next(line for line in lines if line.startswith(row))
        value, unit, share = line[48:].split()
        assert float(value) > 0 and unit == "ms" and 0 < float(share.removesuffix("%"))
    assert not cache.exists()  # entries go to a scratch folder, never the configured cache

"""benchmarks/bench_model_costs.py: the generation and SFT-step costs it measures, on a tiny model."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_model_costs", ROOT / "benchmarks" / "bench_model_costs.py")
assert _spec is not None and _spec.loader is not None
bench_model_costs = importlib.util.module_from_spec(_spec)
sys.modules["bench_model_costs"] = bench_model_costs
_spec.loader.exec_module(bench_model_costs)


def test_tiny_run__prints_a_row_per_measurement_and_precision(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--tiny", "--device", "cpu", "--batch", "2", "--prompt", "120", "--new-tokens", "2"]
    assert bench_model_costs.main([*argv, "--sft-batch", "1", "--sft-tokens", "120", "--repeats", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| generate", "| SFT"))]
    assert [row.split(" | ")[1] for row in rows] == ["float32", "bfloat16", "float32", "bfloat16 autocast"]
    prefill, _per_token = (float(part) for part in rows[0].split(" | ")[2].split(" / "))  # both numbers, no sign
    assert prefill > 0  # the per-token difference of a tiny model is noise: only its form is checked


@pytest.mark.parametrize(("argv", "field"), [(["--prompt", "50"], "prompt"), (["--batch", "0"], "batch")])
def test_sizes_that_cannot_run_are_config_errors_naming_the_field(argv: list[str], field: str) -> None:
    from ace_gym.errors import ConfigError

    with pytest.raises(ConfigError, match=field):
        bench_model_costs.parse_args(["--device", "cpu", *argv])

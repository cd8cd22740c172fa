"""benchmarks/bench_model_costs.py: the generation and SFT-step costs it measures, on a tiny model."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.benchmark_scripts import load_benchmark

bench_model_costs = load_benchmark("bench_model_costs")


def test_tiny_run__prints_a_row_per_measurement_and_precision(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--tiny", "--device", "cpu", "--batch", "2", "--prompt", "120", "--new-tokens", "2"]
    assert bench_model_costs.main([*argv, "--sft-batch", "1", "--sft-tokens", "120", "--repeats", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| generate", "| SFT"))]
    assert [row.split(" | ")[1] for row in rows] == ["float32", "bfloat16", "float32", "bfloat16 autocast"]
    prefill, per_token = (float(part) for part in rows[0].split(" | ")[2].split(" / "))
    assert prefill > 0 and per_token >= 0  # times on a monotonic clock: only their form and sign are checked


@pytest.mark.parametrize(("argv", "field"), [(["--prompt", "50"], "prompt"), (["--batch", "0"], "batch")])
def test_sizes_that_cannot_run_are_config_errors_naming_the_field(argv: list[str], field: str) -> None:
    from ace_gym.errors import ConfigError

    with pytest.raises(ConfigError, match=field):
        bench_model_costs.parse_args(["--device", "cpu", *argv])

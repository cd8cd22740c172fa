"""benchmarks/bench_learning.py --quick: the learning run's pipeline end to end (SFT on solver
traces, GRPO through the env, held-out evaluation, results.json and learning.png)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("datasets")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_learning", ROOT / "benchmarks" / "bench_learning.py")
assert _spec is not None and _spec.loader is not None
bench_learning = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_learning)


@pytest.mark.slow  # 12 s on an idle 2-core machine, 23 s beside another CPU job (TRL's GRPO step is most)
def test_quick_run__sft_loss_falls_grpo_plays_the_env_and_every_stage_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    assert bench_learning.main(["--quick", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))

    losses = results["sft_loss"]
    assert len(losses) == bench_learning.QUICK["sft_steps"] and losses[-1] < losses[0]

    stages = results["stages"]
    assert [s["stage"] for s in stages] == ["before SFT", "after SFT", "GRPO step 1"]
    held_out = stages[0]["episodes"]
    assert held_out > 0
    for measured in [*stages, *results["baselines"].values()]:
        assert measured["episodes"] == held_out  # every row on the same held-out instances
        for name in bench_learning.METRICS:
            assert isinstance(measured[name], float) and measured[name] >= 0.0
    assert set(results["baselines"]) == {"greedy", "random", "solver-batch"}
    assert results["baselines"]["solver-batch"]["success_rate"] == 1.0  # the held-out instances are solvable
    assert results["baselines"]["random"]["invalid_call_rate"] > 0.0  # the rate counts the env's refusals

    (step,) = [entry for entry in results["grpo_log"] if "ace/train/episodes" in entry]
    assert step["ace/train/episodes"] == bench_learning.QUICK["group_size"] * bench_learning.QUICK["prompts_per_step"]
    assert step["ace/train/turns"] >= 1 and step["num_tokens"] > 0  # the GRPO batch was played through the env

    png = (tmp_path / "learning.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_episode_metrics__counts_solved_episodes_unread_turns_and_refused_calls() -> None:
    def turn(calls: list[bool], parse_errors: tuple[str, ...] = ()) -> dict:
        return {"info": {"calls": [{"ok": ok} for ok in calls], "parse_errors": list(parse_errors)}}

    solved = {"score": 1.0, "domain": "course", "hidden_slots": 1, "decoy_budget": 0, "usage": {"turns": 2}}
    solved["turns"] = [turn([True, False]), turn([True])]
    failed = {"score": 0.0, "domain": "course", "hidden_slots": 2, "decoy_budget": 0, "usage": {"turns": 2}}
    failed["turns"] = [turn([]), turn([True], ("bad json",))]
    metrics = bench_learning.episode_metrics([solved, failed])
    assert metrics["success_rate"] == 0.5 and metrics["mean_score"] == 0.5
    assert metrics["parse_error_rate"] == 0.5  # the turn without a call and the turn with a bad call
    assert metrics["invalid_call_rate"] == 0.25  # one of the four executed calls was refused
    assert metrics["mean_turns"] == 2.0 and metrics["tool_calls"] == 4

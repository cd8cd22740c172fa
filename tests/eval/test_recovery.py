"""Failure-recovery metrics: per-failure records, the summary by failure rate, and the two probes
whose recovery is known (a policy that retries every failed call recovers all of them at every
rate, one that never retries recovers none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ace_gym.cli import main
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.recovery import failure_log, recovery_counts, recovery_metrics
from ace_gym.eval.replay import replay_record
from ace_gym.eval.summary import format_table, summarize
from ace_gym.exit_codes import EXIT_CONFIG, EXIT_OK
from ace_gym.planning.probes import is_transient_failure
from ace_gym.policies import make_policy
from ace_gym.runs.results import read_records
from ace_gym.wrappers import FAILURE_ENVELOPES

RATES = (0.1, 0.3, 0.6)
ALL_MODES = {"failure_modes": list(FAILURE_ENVELOPES)}
DONE_NEVER_FAILS = {**ALL_MODES, "tool_rates": {"done": 0.0}}  # a give-up `done` must not count as a retry


def records(policy: str, failure_injection: dict[str, Any]) -> list[dict[str, Any]]:
    specs = [
        EpisodeSpec.of(
            domain,
            instance_index=index,
            seed=seed,
            tool_failure_rate=rate,
            max_turns=400,
            failure_injection=failure_injection,
        )
        for rate in RATES
        for domain in ("course", "meal")
        for index in (0, 3)
        for seed in (0, 1)
    ]
    return list(run_episodes(specs, make_policy(policy)))


def test_failure_log__says_for_each_failure_whether_and_after_how_many_turns_it_was_recovered() -> None:
    def turn(*calls: dict[str, Any]) -> dict[str, Any]:
        return {"info": {"calls": list(calls)}}

    failed = {"failure_injected": True, "tool": "done", "failure_mode": "rate_limit"}
    log = failure_log(
        [turn({**failed, "failure_id": 1}), turn({}), turn({**failed, "failure_id": 2}, {"recovers": [1, 2]})]
    )
    assert log == [
        {"id": 1, "turn": 0, "tool": "done", "mode": "rate_limit", "recovered": True, "turns_to_recover": 2},
        {"id": 2, "turn": 2, "tool": "done", "mode": "rate_limit", "recovered": True, "turns_to_recover": 0},
    ]
    assert recovery_counts(log) == {"injected_failures": 2, "recovered_failures": 2, "recovery_turns": 2}
    assert recovery_metrics([recovery_counts(log), recovery_counts([])]) == {
        "failures": 2,
        "recovered": 2,
        "recovery_rate": 1.0,
        "turns_to_recover": 1.0,
    }
    assert recovery_metrics([]) == {"failures": 0, "recovered": 0, "recovery_rate": None, "turns_to_recover": None}


def test_retrying_probe__recovers_every_failure_of_every_mode_at_every_rate() -> None:
    played = records("probe-retry-failures", ALL_MODES)
    assert all(record["score"] == 1.0 for record in played)
    assert {f["mode"] for record in played for f in record["failures"]} == set(FAILURE_ENVELOPES)
    summary = summarize(played)
    for rate in RATES:
        stats = summary["per_failure_rate"][f"{rate:g}"]
        assert stats["failures"] > 0 and stats["recovery_rate"] == 1.0 and stats["turns_to_recover"] >= 1.0
    assert "recovery from injected tool failures: 0.1: " in format_table(summary)


def test_never_retrying_probe__recovers_no_failure_at_any_rate() -> None:
    played = records("probe-no-retry", DONE_NEVER_FAILS)
    summary = summarize(played)
    for rate in RATES:
        stats = summary["per_failure_rate"][f"{rate:g}"]
        assert stats["failures"] > 0 and stats["recovery_rate"] == 0.0 and stats["turns_to_recover"] is None
    assert all(len(record["failures"]) <= 1 for record in played)  # gave up at the first one


def test_failure_modes__are_seeded_and_replay_identically() -> None:
    first, second = (records("probe-retry-failures", ALL_MODES)[:4] for _ in range(2))
    assert [r["failures"] for r in first] == [r["failures"] for r in second]
    assert [replay_record(record) for record in first] == [None] * 4


def test_published_failure_only__by_default() -> None:
    (record,) = run_episodes(
        [EpisodeSpec.of("course", instance_index=0, tool_failure_rate=0.6, max_turns=200)], make_policy("solver")
    )
    assert {f["mode"] for f in record["failures"]} == {"failed"}
    # the stack names the rate alone: the wrapper's default modes, the published failure
    assert record["replay"]["spec"]["stack"]["wrappers"][0] == {"name": "failure_injection", "kwargs": {"rate": 0.6}}


@pytest.mark.parametrize("mode", sorted(FAILURE_ENVELOPES))
def test_is_transient_failure__reads_every_injected_envelope_as_one(mode: str) -> None:
    assert is_transient_failure(FAILURE_ENVELOPES[mode])
    assert not is_transient_failure('{"status": "success", "messages": "ok", "data": {"id": "C1"}}')
    assert not is_transient_failure('{"status": "failed", "messages": "Invalid tool arguments, row", "data": {}}')


def test_eval_cli__failure_modes_flag_reaches_every_episode_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    flags = ["--domains", "meal", "--hidden-slots", "5", "--decoy-budgets", "0", "--tool-failure-rates", "0.5"]
    argv = ["eval", "--no-progress", "--policy", "probe-retry-failures", "--out", str(out), *flags]
    assert main([*argv, "--failure-modes", "timeout,rate_limit"]) == EXIT_OK
    played = list(read_records(out / "episodes.jsonl"))
    assert {f["mode"] for record in played for f in record["failures"]} == {"timeout", "rate_limit"}
    assert json.loads((out / "summary.json").read_text())["per_failure_rate"]["0.5"]["recovery_rate"] == 1.0
    assert main(["replay", str(out)]) == EXIT_OK
    bad = ["eval", "--no-progress", "--policy", "solver", "--out", str(tmp_path / "bad"), *flags]
    assert main([*bad, "--failure-modes", "timout"]) == EXIT_CONFIG
    assert "did you mean 'timeout'" in capsys.readouterr().err

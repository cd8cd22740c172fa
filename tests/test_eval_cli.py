"""``ace-gym eval`` / ``ace-gym report`` end to end: outputs, resume after SIGKILL, report rebuild."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

import ace_gym.agents
from ace_gym.cli import main
from ace_gym.eval.results import read_records

SLICE = ["--domains", "course,travel", "--hidden", "1,5", "--budget", "0,4"]  # 2 domains x 4 instances


def run_cli(*args: str) -> int:
    return main(["eval", "--no-progress", *args])


def test_eval__writes_records_summary_heatmaps_and_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert (
        run_cli("--policy", "solver", "--out", str(out), *SLICE, "--trials", "2", "--tool-failure-rates", "0,0.1") == 0
    )
    records = list(read_records(out / "episodes.jsonl"))
    assert len(records) == 2 * 4 * 2 * 2 and all(r["score"] == 1 for r in records)
    assert len({r["key"] for r in records}) == len(records)
    assert {(r["hidden_slots"], r["decoy_budget"]) for r in records} == {(1, 0), (1, 4), (5, 0), (5, 4)}
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) >= {"overall", "per_domain", "cells"}
    assert summary["overall"]["score"] == 1.0 and set(summary["per_domain"]) == {"course", "travel"}
    assert len(summary["cells"]) == 8 and all(c["episodes"] == 4 for c in summary["cells"])
    assert set(summary["per_failure_rate"]) == {"0", "0.1"}
    assert sorted(p.name for p in out.glob("*.png")) == ["heatmap_course.png", "heatmap_travel.png"]
    printed = capsys.readouterr().out
    assert "policy: solver" in printed and "average" in printed and "course" in printed


def test_eval__rerun_skips_finished_episodes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "greedy", "--out", str(out), *SLICE) == 0
    first = (out / "episodes.jsonl").read_bytes()
    assert run_cli("--policy", "greedy", "--out", str(out), *SLICE) == 0
    assert (out / "episodes.jsonl").read_bytes() == first
    assert "resuming: 8 of 8 episodes" in capsys.readouterr().err


def test_eval__reads_a_folder_of_generated_dataset_files(tmp_path: Path) -> None:
    from ace_gym.generators import dataset_file_name, generate_dataset

    for domain in ("shopping", "workforce"):
        name = dataset_file_name(domain, 4, 6, [3, 8], [0, 6], 25, 5)
        generate_dataset(
            domain, rows=4, cols=6, hidden_slots=[3, 8], decoy_budgets=[0, 6], seed=5, path=tmp_path / name
        )
    out = tmp_path / "run"
    assert (
        run_cli("--policy", "solver", "--dataset", str(tmp_path), "--domains", "shopping,workforce", "--out", str(out))
        == 0
    )
    records = list(read_records(out / "episodes.jsonl"))
    assert len(records) == 8 and all(r["score"] == 1 for r in records)
    assert {r["dataset"] for r in records} == {str(p.resolve()) for p in tmp_path.glob("*_dataset_*")}


def test_eval__refuses_to_mix_policies_or_budgets_in_one_directory(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "greedy", "--out", str(out), "--domains", "meal", "--hidden", "1", "--budget", "0") == 0
    assert run_cli("--policy", "solver", "--out", str(out), "--domains", "meal", "--hidden", "1", "--budget", "0") == 2
    assert (
        run_cli("--policy", "greedy", "--out", str(out), "--domains", "meal", "--hidden", "1", "--extra-query-num", "0")
        == 2
    )


def test_eval__unknown_policy_or_domain_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert run_cli("--policy", "solvr", "--out", str(tmp_path / "a")) == 2
    assert "did you mean 'solver'" in capsys.readouterr().err
    assert run_cli("--policy", "solver", "--domains", "cours", "--out", str(tmp_path / "b")) == 2
    assert "did you mean 'course'" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_eval__llm_policy_is_built_by_make_engine_with_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from tests.test_eval_rollout import SolverChatEngine

    made = []

    def make_engine(spec: str, **options: object) -> SolverChatEngine:
        made.append((spec, options))
        return SolverChatEngine()

    fake_llm = types.ModuleType("ace_gym.agents.llm")
    fake_llm.make_engine = make_engine  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ace_gym.agents.llm", fake_llm)
    out = tmp_path / "run"
    assert (
        run_cli(
            "--policy",
            "openai:tiny@http://localhost:1",
            "--out",
            str(out),
            *SLICE,
            "--engine-option",
            "temperature=0.5",
        )
        == 0
    )
    assert made == [("openai:tiny@http://localhost:1", {"temperature": 0.5})]
    records = list(read_records(out / "episodes.jsonl"))
    assert len(records) == 8 and all(r["score"] == 1 for r in records)
    assert all(r["usage"]["completion_tokens"] > 0 for r in records)
    assert json.loads((out / "summary.json").read_text())["overall"]["tokens"] > 0
    # re-running a finished evaluation rebuilds the report without loading the model again
    assert (
        run_cli(
            "--policy",
            "openai:tiny@http://localhost:1",
            "--out",
            str(out),
            *SLICE,
            "--engine-option",
            "temperature=0.5",
        )
        == 0
    )
    assert len(made) == 1


def test_eval__llm_policy_without_the_llm_package_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "ace_gym.agents.llm", None)  # import fails as if not installed
    monkeypatch.delattr(ace_gym.agents, "llm", raising=False)
    assert run_cli("--policy", "vllm:/models/tiny", "--out", str(tmp_path / "run"), *SLICE) == 2
    assert "pip install 'ace-gym[vllm]'" in capsys.readouterr().err


def test_report__rebuilds_summary_and_heatmaps_from_the_records(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "greedy", "--out", str(out), *SLICE) == 0
    summary = json.loads((out / "summary.json").read_text())
    table = capsys.readouterr().out
    for produced in [out / "summary.json", *out.glob("*.png")]:
        produced.unlink()
    assert main(["report", str(out)]) == 0
    rebuilt = json.loads((out / "summary.json").read_text())
    assert rebuilt == summary and rebuilt["overall"]["episodes"] == 8
    assert capsys.readouterr().out == table
    assert sorted(p.name for p in out.glob("*.png")) == ["heatmap_course.png", "heatmap_travel.png"]
    assert main(["report", str(tmp_path / "nothing")]) == 2


@pytest.mark.slow
def test_eval__sigkill_mid_run_then_rerun_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-m", "ace_gym", "eval", "--policy", "solver", "--domains", "course,meal,travel"]
    command += ["--out", str(out), "--no-progress"]
    log = out / "episodes.jsonl"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= 10:
            break
        time.sleep(0.02)
    assert process.poll() is None, "the eval finished before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    survived = log.read_bytes()
    survived = survived[: survived.rfind(b"\n") + 1]  # a torn last line is allowed, nothing else
    kept = [json.loads(line) for line in survived.splitlines()]
    assert 10 <= len(kept) < 105

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming: {len(kept)} of 105 episodes" in rerun.stderr
    final = log.read_bytes()
    assert final.startswith(survived) and final.endswith(b"\n")
    records = [json.loads(line) for line in final.splitlines()]
    keys = [r["key"] for r in records]
    assert len(keys) == len(set(keys)) == 105
    assert all(r["score"] == 1 for r in records)
    assert json.loads((out / "summary.json").read_text())["episodes"] == 105

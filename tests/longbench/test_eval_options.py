"""``ace-gym eval --env ALB-QA-v0`` and ``ace-gym report`` end to end, with fake and tiny real engines."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from ace_gym.cli import build_parser, main
from ace_gym.exit_codes import EXIT_CONFIG, EXIT_IN_USE, EXIT_MALFORMED
from ace_gym.longbench.eval_options import build_specs
from ace_gym.runs.results import EpisodeLog, read_records
from tests.longbench.answers import OracleEngine

ARGS = ["--env", "ALB-QA-v0", "--buckets", "6000,12000", "--knowledge", "kf,ki", "--samples", "1", "--seed", "3"]


def _install_engine(monkeypatch: pytest.MonkeyPatch, factory) -> list[str]:
    made: list[str] = []

    def make_engine(spec: str, **options: object):
        made.append(spec)
        return factory()

    fake = types.ModuleType("ace_gym.agents.llm")
    fake.make_engine = make_engine  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ace_gym.agents.llm", fake)
    return made


def test_eval_env__writes_records_summary_heatmaps_and_table_then_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    argv = ["eval", "--no-progress", "--policy", "openai:m@http://localhost:1", "--out", str(out), *ARGS]
    specs = build_specs(build_parser().parse_args(argv))
    assert len(specs) == 2 * 2 * 8
    made = _install_engine(monkeypatch, lambda: OracleEngine(specs))
    assert main(argv) == 0 and made == ["openai:m@http://localhost:1"]
    records = list(read_records(out / "episodes.jsonl"))
    assert len(records) == 32 and all(r["score"] == 1.0 for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["settings"]) == {"kf-c", "ki-c"} and summary["overall"]["score"] == 1.0
    assert sorted(p.name for p in out.glob("*.png")) == ["heatmap_kf-c.png", "heatmap_ki-c.png"]
    printed = capsys.readouterr().out
    assert "Find Target Offsets(Tool)" in printed and "6000" in printed and "12000" in printed
    first = (out / "episodes.jsonl").read_bytes()
    assert main(argv) == 0 and made == ["openai:m@http://localhost:1"]  # finished: no model loaded again
    assert (out / "episodes.jsonl").read_bytes() == first
    assert "resuming: 32 of 32" in capsys.readouterr().err
    assert summary["run"]["env"] == "ALB-QA-v0" and summary["run"]["policy"] == "openai:m@http://localhost:1"
    for produced in out.glob("heatmap_*"):
        produced.unlink()
    assert main(["report", str(out)]) == 0 and json.loads((out / "summary.json").read_text()) == summary
    assert sorted(p.name for p in out.glob("*.png")) == ["heatmap_kf-c.png", "heatmap_ki-c.png"]


def test_eval_env__refuses_scripted_policies_and_mixed_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert main(["eval", "--no-progress", "--policy", "solver", "--out", str(out), *ARGS]) == EXIT_CONFIG
    assert "needs an LLM policy" in capsys.readouterr().err
    (out).mkdir(exist_ok=True)
    (out / "episodes.jsonl").write_text(
        json.dumps({"key": "k", "policy": "other", "question_type": "x", "domain": "d"}) + "\n"
    )
    _install_engine(monkeypatch, lambda: None)
    assert main(["eval", "--no-progress", "--policy", "hf:/m", "--out", str(out), *ARGS]) == EXIT_CONFIG
    assert "holds episodes of another run (other)" in capsys.readouterr().err


def test_eval_env__guards_the_run_like_the_ace_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Lock (exit 3), run identity (exit 2 naming what differs), malformed lines (exit 5 unless
    skipped), more buckets added to the same run."""
    out = tmp_path / "run"
    small = ["--env", "ALB-QA-v0", "--buckets", "6000", "--question-types", "count_frequency_tool", "--samples", "1"]
    argv = ["eval", "--no-progress", "--policy", "openai:m@http://localhost:1", "--out", str(out), *small]
    grown = [*argv[:-6], "--buckets", "6000,12000", *argv[-4:]]
    specs = build_specs(build_parser().parse_args(grown))
    _install_engine(monkeypatch, lambda: OracleEngine(specs))
    with EpisodeLog(out / "episodes.jsonl"):
        assert main(argv) == EXIT_IN_USE
    assert "in use by pid" in capsys.readouterr().err
    assert main(argv) == 0 and len(list(read_records(out / "episodes.jsonl"))) == 1
    assert main([*argv, "--table-seed", "1"]) == EXIT_CONFIG
    assert "holds another run: table_seed 0 (this eval: 1)" in capsys.readouterr().err
    assert main([*argv, "--policy", "hf:/m"]) == EXIT_CONFIG
    assert "holds another run: policy 'openai:m@http://localhost:1' (this eval: 'hf:/m')" in capsys.readouterr().err
    assert main(grown) == 0 and len(list(read_records(out / "episodes.jsonl"))) == 2

    with (out / "episodes.jsonl").open("ab") as handle:
        handle.write(b"not json\n")
    capsys.readouterr()
    assert main(grown) == EXIT_MALFORMED
    assert "line 3: not JSON" in capsys.readouterr().err
    assert main(["report", str(out)]) == EXIT_MALFORMED
    assert main([*grown, "--skip-malformed"]) == 0
    assert json.loads((out / "summary.json").read_text())["skipped_lines"] == [3]


@pytest.mark.slow
def test_eval_env__runs_a_tiny_local_model_with_its_own_tokenizer(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from ace_gym.agents.llm.tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    out = tmp_path / "run"
    argv = [
        "eval",
        "--no-progress",
        "--policy",
        f"hf:{model}",
        "--out",
        str(out),
        "--env",
        "ALB-QA-v0",
        "--buckets",
        "3000",
        "--samples",
        "2",
        "--question-types",
        "count_correctness_env,find_duplicates_tool",
        "--tokenizer",
        f"hf:{model}",
        "--engine-option",
        "max_new_tokens=6",
        "--engine-option",
        "temperature=0",
    ]
    assert main(argv) == 0
    records = list(read_records(out / "episodes.jsonl"))
    assert len(records) == 4 and all(r["usage"]["prompt_tokens"] > 1000 for r in records)
    assert all(r["tokens"] <= 3000 and 0 < r["usage"]["completion_tokens"] <= 6 for r in records)
    assert all(r["score"] in (0.0, 1.0) and r["finish_reason"] in ("stop", "length") for r in records)
    assert json.loads((out / "summary.json").read_text())["episodes"] == 4

"""The official JSONL layout: our samples exported into it, rows read back from it and scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ace_gym.errors import ConfigError, DatasetError
from ace_gym.longbench.official import OfficialExporter, load_official, read_official_file, setting_of
from ace_gym.longbench.question_types import (
    FIND_DUPLICATES,
    FIND_TARGET_OFFSETS,
    INTERSECTION,
    QUESTION_TYPES,
    SLUGS,
)
from ace_gym.longbench.samples import SampleConfig, build_sample
from ace_gym.longbench.scoring import answer_text


def test_export__writes_the_official_layout_and_reads_back_scoring_gold_answers_1(tmp_path: Path, tokenizer) -> None:
    samples = [
        build_sample(SampleConfig(fmt=fmt, target_tokens=40000, answers="paper"), question_type, seed, tokenizer)
        for fmt in ("concise", "verbose")
        for question_type in QUESTION_TYPES
        for seed in (0, 1)
    ]
    with OfficialExporter(tmp_path) as exporter:
        for sample in samples:
            exporter.add(sample)
    assert len(exporter.paths) == 16
    assert (tmp_path / "kf-c" / "40000" / "final_guess" / "intersection.jsonl").exists()
    assert (tmp_path / "kf-v" / "40000" / "tool_response" / f"{SLUGS[FIND_TARGET_OFFSETS]}.jsonl").exists()
    assert not list(tmp_path.rglob(".*"))  # no temporary files left
    rows = list(load_official(tmp_path))
    assert len(rows) == len(samples)
    by_key = {(s.config.fmt, s.question.question_type, s.seed): s for s in samples}
    for row in rows:
        sample = by_key[(row.fmt, row.question_type, row.sample_id)]
        assert row.knowledge == "kf" and row.length == "40000"
        assert row.messages[0] == {"role": "system", "content": sample.game_prompt}
        assert row.messages[1:] == sample.history and row.question == sample.question.text
        assert row.answer == sample.question.answer and row.rounds == sample.question.rounds
        assert row.id == f"{sample.seed}_r{sample.question.rounds.get('round', len(sample.trajectory.rounds))}"
        prompt = row.prompt()
        assert prompt[1:-1] == sample.history and prompt[-1] == {"role": "user", "content": sample.question.text}
        assert row.score(answer_text(row.answer)) == 1.0
        assert row.score("no answer") == 0.0


def test_exporter__refuses_a_balanced_question_the_official_scoring_would_misread(tmp_path: Path, tokenizer) -> None:
    """A balanced Find Duplicates counts names; the official layout's scoring reads yes or no."""
    sample = build_sample(SampleConfig(target_tokens=40000), FIND_DUPLICATES, 0, tokenizer)
    assert isinstance(sample.question.answer, int) and sample.question.scored_as != FIND_DUPLICATES
    with pytest.raises(ConfigError, match="answers='paper'"), OfficialExporter(tmp_path) as exporter:
        exporter.add(sample)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_exporter__an_error_leaves_no_files(tmp_path: Path, tokenizer) -> None:
    sample = build_sample(SampleConfig(target_tokens=8000), INTERSECTION, 0, tokenizer)
    with pytest.raises(RuntimeError), OfficialExporter(tmp_path) as exporter:
        exporter.add(sample)
        raise RuntimeError("stop")
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def _write(path: Path, rows: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROW = {
    "id": "0_r7",
    "sample_id": 0,
    "question_type": "Count Correctness(Env)",
    "messages": [{"role": "system", "content": "game"}, {"role": "user", "content": "Round 1: ..."}],
    "question": "How many?",
    "answer": 3,
    "round": 7,
}


def test_loader__reads_synthetic_rows_in_the_official_schema(tmp_path: Path) -> None:
    path = _write(tmp_path / "bench" / "ki-v" / "1M" / "env_response" / "count_correctness_env.jsonl", [ROW, ROW])
    _write(tmp_path / "bench" / "notes" / "other.jsonl", [{"x": 1}])  # no setting in the path: ignored
    rows = list(load_official(tmp_path))
    assert len(rows) == 2 and (rows[0].knowledge, rows[0].fmt, rows[0].length) == ("ki", "verbose", "1M")
    assert rows[0].rounds == {"round": 7} and rows[0].prompt()[0]["role"] == "system"
    assert [m["content"] for m in rows[0].prompt()[1:]] == ["Round 1: ...", "How many?"]
    assert rows[0].score("<answer>three, I mean 3</answer>") == 1.0
    assert list(load_official(tmp_path, settings=["kf-c"])) == []
    assert setting_of(path) == ("ki", "verbose")


@pytest.mark.parametrize(
    "rows",
    [
        ["not an object"],
        [{k: v for k, v in ROW.items() if k != "answer"}],
        [{**ROW, "question_type": "Count(Tool)"}],
        [{**ROW, "messages": "hi"}],
        [{**ROW, "question": 3}],
        [ROW, {**ROW, "question_type": INTERSECTION}],
    ],
)
def test_loader__malformed_rows_are_dataset_errors(tmp_path: Path, rows: list[object]) -> None:
    path = _write(tmp_path / "kf-c" / "32k" / "env_response" / "x.jsonl", rows)
    with pytest.raises(DatasetError):
        read_official_file(path)


def test_loader__a_path_without_setting_or_bad_json_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError):
        setting_of(tmp_path / "32k" / "x.jsonl")
    path = tmp_path / "kf-c" / "32k" / "x.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("{broken\n")
    with pytest.raises(DatasetError):
        read_official_file(path)

"""Result files and summaries: crash-safe episode log, atomic JSON, aggregation, table, heatmaps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ace_gym.errors import ConfigError
from ace_gym.eval.plots import write_heatmaps
from ace_gym.eval.results import EpisodeLog, read_records, write_json_atomic
from ace_gym.eval.summary import format_table, score_grid, summarize


def record(key: str, domain: str = "course", hidden: int = 1, budget: int = 0, score: int = 1, **usage: float) -> dict:
    return {
        "key": key,
        "policy": "p",
        "domain": domain,
        "hidden_slots": hidden,
        "decoy_budget": budget,
        "score": score,
        "tool_failure_rate": 0.0,
        "usage": {"turns": 10, "tool_calls": 12, "time_s": 0.5, "prompt_tokens": 100, "completion_tokens": 20, **usage},
    }


def test_episode_log__appends_one_line_per_record_and_remembers_keys(tmp_path: Path) -> None:
    path = tmp_path / "run" / "episodes.jsonl"
    with EpisodeLog(path) as log:
        log.append(record("a"))
        log.append(record("b", score=0))
    with EpisodeLog(path) as log:
        assert log.keys == {"a", "b"}
        log.append(record("c"))
    assert [r["key"] for r in read_records(path)] == ["a", "b", "c"]
    assert path.read_bytes().count(b"\n") == 3


def test_episode_log__cuts_a_torn_last_line_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    whole = json.dumps(record("a")) + "\n"
    path.write_text(whole + json.dumps(record("b"))[:37])  # killed in the middle of writing "b"
    assert [r["key"] for r in read_records(path)] == ["a"]
    with EpisodeLog(path) as log:
        assert log.keys == {"a"}
        log.append(record("b"))
    assert [r["key"] for r in read_records(path)] == ["a", "b"]
    assert path.read_text().startswith(whole)


def test_episode_log__torn_file_without_any_newline_is_emptied(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text('{"key": "a", "sco')
    with EpisodeLog(path) as log:
        assert log.keys == set()
    assert path.read_bytes() == b""


def test_read_records__skips_garbled_lines_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(record("a")) + "\nnot json\n[1, 2]\n" + json.dumps(record("b")) + "\n")
    assert [r["key"] for r in read_records(path)] == ["a", "b"]
    assert list(read_records(tmp_path / "absent.jsonl")) == []


def test_write_json_atomic__replaces_the_file_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    write_json_atomic(path, {"v": 1})
    write_json_atomic(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_summarize__cells_domains_and_overall_follow_the_paper_means() -> None:
    records = [
        record("1", "course", 1, 0, 1),
        record("2", "course", 1, 0, 0),  # cell (course, 1, 0): 0.5
        record("3", "course", 5, 2, 1),  # cell (course, 5, 2): 1.0 -> course 0.75
        record("4", "meal", 1, 0, 0, turns=30),  # meal 0.0
        record("4", "meal", 1, 0, 1),  # duplicate key: ignored
    ]
    summary = summarize(records)
    assert summary["episodes"] == 4
    cells = {(c["domain"], c["hidden_slots"], c["decoy_budget"]): c for c in summary["cells"]}
    assert cells[("course", 1, 0)]["score"] == 0.5 and cells[("course", 1, 0)]["episodes"] == 2
    assert summary["per_domain"]["course"]["score"] == 0.75
    assert summary["per_domain"]["meal"]["score"] == 0.0
    assert summary["overall"]["score"] == 0.375  # mean of the domain scores, not of episodes
    assert summary["overall"]["steps"] == (10 + 10 + 10 + 30) / 4
    assert summary["overall"]["tokens"] == 120.0
    for stats in [summary["overall"], *summary["per_domain"].values(), *summary["cells"]]:
        assert {"episodes", "score", "steps", "tool_calls", "time_s", "tokens"} <= set(stats)
    assert score_grid(summary, "course") == ([1, 5], [0, 2], [[0.5, None], [None, 1.0]])


def test_summarize__refuses_records_of_several_policies() -> None:
    with pytest.raises(ConfigError):
        summarize([record("a"), {**record("b"), "policy": "q"}])


def test_format_table__one_row_per_domain_and_the_average() -> None:
    table = format_table(summarize([record("1", "course"), record("2", "meal", score=0)]))
    lines = table.splitlines()
    assert lines[0] == "policy: p"
    assert [line.split()[0] for line in lines[3:5]] == ["course", "meal"]
    assert lines[-1].split()[:3] == ["average", "2", "0.500"]


def test_write_heatmaps__one_png_per_domain(tmp_path: Path) -> None:
    summary = summarize([record("1", "course", 1, 0), record("2", "course", 5, 2, 0), record("3", "travel", 1, 4)])
    paths = write_heatmaps(summary, tmp_path)
    assert sorted(p.name for p in paths) == ["heatmap_course.png", "heatmap_travel.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heatmap_course.png", "heatmap_travel.png"]

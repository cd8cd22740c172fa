"""Result files and summaries: crash-safe episode log, atomic JSON, aggregation, table, heatmaps."""

from __future__ import annotations

import fcntl
import json
import math
import os
import statistics
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from ace_gym.atomic import NotRegularFileError
from ace_gym.errors import ConfigError
from ace_gym.eval.plots import PNG_DPI, heatmap_figure, write_heatmaps
from ace_gym.eval.summary import TABLE_LEGEND, format_table, score_grid, summarize
from ace_gym.runs.results import EpisodeLog, FileInUseError, MalformedRecordsError, read_records, write_json_atomic
from ace_gym.text import MAX_JSON_DEPTH
from tests.core_helpers import nested_dict


def record(
    key: str,
    domain: str = "course",
    hidden: int = 1,
    budget: int = 0,
    score: float = 1.0,
    rate: float = 0.0,
    **usage: float,
) -> dict:
    return {
        "key": key,
        "policy": "p",
        "dataset": "5x5",
        "domain": domain,
        "hidden_slots": hidden,
        "decoy_budget": budget,
        "score": score,
        "tool_failure_rate": rate,
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


def test_read_records__names_malformed_lines_or_skips_them_on_request(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    bad = ["not json", "[1, 2]", json.dumps({**record("c"), "score": "1"}), json.dumps({**record("d"), "usage": []})]
    path.write_text("\n".join([json.dumps(record("a")), *bad, json.dumps(record("b"))]) + "\n")
    with pytest.raises(MalformedRecordsError) as raised:
        list(read_records(path))
    assert [number for number, _ in raised.value.problems] == [2, 3, 4, 5]
    assert "line 3: a JSON list, not an object" in str(raised.value) and "'score' is '1'" in str(raised.value)
    skipped: list[int] = []
    assert [r["key"] for r in read_records(path, skipped=skipped)] == ["a", "b"] and skipped == [2, 3, 4, 5]
    assert list(read_records(tmp_path / "absent.jsonl")) == []


def test_read_records__lines_too_deep_or_with_too_big_a_number_are_malformed_lines_not_crashes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "episodes.jsonl"
    bad = [
        "[" * 100_000 + "]" * 100_000,  # RecursionError in the parser
        '{"key": ' * 100_000 + "1" + "}" * 100_000,
        json.dumps({**record("c"), "tool_failure_rate": 10**400}),  # no float holds it (OverflowError)
        '{"key": ' + "7" * 5000 + "}",  # more digits than int() takes (ValueError)
    ]
    path.write_text("\n".join([json.dumps(record("a")), *bad, json.dumps(record("b"))]) + "\n")
    with pytest.raises(MalformedRecordsError) as raised:
        list(read_records(path))
    assert [number for number, _ in raised.value.problems] == [2, 3, 4, 5]
    assert "line 2: not JSON (nested too deeply)" in str(raised.value)
    assert "line 4: 'tool_failure_rate' is" in str(raised.value)
    skipped: list[int] = []
    assert [r["key"] for r in read_records(path, skipped=skipped)] == ["a", "b"] and skipped == [2, 3, 4, 5]


def test_read_records__a_record_nested_past_the_bound_is_malformed_even_where_the_parser_reads_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "episodes.jsonl"
    at_bound = {**record("a"), "arguments": nested_dict(MAX_JSON_DEPTH - 2)}  # MAX_JSON_DEPTH levels in all
    past_bound = {**record("b"), "arguments": nested_dict(MAX_JSON_DEPTH - 1)}
    path.write_text("".join(json.dumps(value) + "\n" for value in (at_bound, past_bound, record("c"))))
    with pytest.raises(MalformedRecordsError) as raised:
        list(read_records(path))
    assert f"line 2: nested deeper than {MAX_JSON_DEPTH} levels" in str(raised.value)
    skipped: list[int] = []
    assert [r["key"] for r in read_records(path, skipped=skipped)] == ["a", "c"] and skipped == [2]


def test_read_records__a_line_longer_than_the_bound_is_malformed_and_never_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "episodes.jsonl"
    long = json.dumps({**record("d"), "padding": "x" * 1000})
    path.write_text("\n".join([json.dumps(record("a")), long, json.dumps(record("b"))]) + "\n")
    monkeypatch.setattr("ace_gym.runs.results.MAX_RECORD_BYTES", 256)
    with pytest.raises(MalformedRecordsError, match="line 2: longer than 256 bytes"):
        list(read_records(path))
    skipped: list[int] = []
    assert [r["key"] for r in read_records(path, skipped=skipped)] == ["a", "b"] and skipped == [2]


def test_read_records__a_torn_last_line_longer_than_the_bound_is_still_torn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(record("a")) + "\n" + json.dumps(record("b")) * 3)
    monkeypatch.setattr("ace_gym.runs.results.MAX_RECORD_BYTES", 256)
    assert [r["key"] for r in read_records(path)] == ["a"]


def test_read_records__leaves_out_later_records_of_a_key_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    lines = [record("a"), record("b"), {**record("a"), "score": 0.0}, record("c"), record("b")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    duplicates: list[int] = []
    kept = list(read_records(path, duplicates=duplicates))
    assert [(r["key"], r["score"]) for r in kept] == [("a", 1.0), ("b", 1.0), ("c", 1.0)] and duplicates == [3, 5]
    assert len(list(read_records(path))) == 5  # without the list, every record


def test_read_records__a_caller_check_makes_more_lines_malformed(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(record("a")) + "\n" + json.dumps({**record("b"), "seed": "x"}) + "\n")
    with pytest.raises(MalformedRecordsError, match="line 2: seed is no integer"):
        list(read_records(path, check=lambda r: None if type(r.get("seed", 0)) is int else "seed is no integer"))


def test_read_records__an_episode_file_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    os.mkfifo(path)  # opening it to read waits for a writer
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            list(read_records(path))
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=60)  # a bound for the old behaviour (waiting forever), not a timing
    if reader.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # let the waiting reader go
        pytest.fail("read_records waited on a FIFO")
    assert isinstance(outcome[0], NotRegularFileError) and "is a FIFO, not a regular file" in str(outcome[0])
    with pytest.raises(NotRegularFileError):
        EpisodeLog(path)


def test_episode_log__writes_and_reads_back_lone_surrogates(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    text = "model said \ud800 and \\\udfff then \U0001f600"
    with EpisodeLog(path) as log:
        log.append({**record("a"), "messages": [{"role": "assistant", "content": text}]})
    (back,) = read_records(path)
    assert back["messages"][0]["content"] == text
    path.read_bytes().decode("utf-8")  # the file itself is valid UTF-8
    write_json_atomic(tmp_path / "summary.json", {"policy": text})
    assert json.loads((tmp_path / "summary.json").read_bytes())["policy"] == text


def test_episode_log__a_second_writer_gets_file_in_use_naming_the_pid(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    with EpisodeLog(path), pytest.raises(FileInUseError, match=f"in use by pid {os.getpid()}"):
        EpisodeLog(path)
    with EpisodeLog(path) as log:  # released on close
        log.append(record("a"))


def test_episode_log__closing_removes_the_lock_file_and_a_waiter_on_the_removed_one_takes_the_new(
    tmp_path: Path,
) -> None:
    path = tmp_path / "episodes.jsonl"
    lock = tmp_path / ".episodes.jsonl.lock"
    first = EpisodeLog(path)
    assert lock.read_text() == f"{os.getpid()}\n"
    waiter = os.open(lock, os.O_RDWR)  # another process opened the lock file before the holder closed
    try:
        first.close()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.jsonl"]  # nothing left behind
        fcntl.flock(waiter, fcntl.LOCK_EX | fcntl.LOCK_NB)  # it gets the removed file's lock ...
        with EpisodeLog(path):  # ... which is no lock: a new writer takes the file's lock
            assert lock.exists()
            other = os.open(lock, os.O_RDWR)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(other)
    finally:
        os.close(waiter)
    assert not lock.exists()


def test_episode_log__failed_write_leaves_whole_lines_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "episodes.jsonl"
    real_write = os.write
    with EpisodeLog(path) as log:
        log.append(record("a"))
        monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:10]))  # a short write: disk full
        with pytest.raises(OSError, match="short write"):
            log.append(record("b"))
        monkeypatch.setattr(os, "write", real_write)
        log.append(record("c"))
    assert [r["key"] for r in read_records(path)] == ["a", "c"]


def test_write_json_atomic__replaces_the_file_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    write_json_atomic(path, {"v": 1})
    write_json_atomic(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_write_heatmaps__concurrent_writers_use_their_own_temp_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process writes the same heatmap between our temp file and our rename."""
    summary = summarize([record("1"), record("2", hidden=5, score=0.0)])
    real_replace = os.replace
    interleaved: list[bool] = []

    def replace_after_another_writer(source: Any, target: Any) -> None:
        if not interleaved:
            interleaved.append(True)
            write_heatmaps(summary, tmp_path)  # the other writer, start to finish
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace_after_another_writer)
    paths = write_heatmaps(summary, tmp_path)
    assert all(p.exists() for p in paths)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_summarize__cells_domains_and_overall_follow_the_paper_means() -> None:
    records = [
        record("1", "course", 1, 0, 1.0),
        record("2", "course", 1, 0, 0.0),  # cell (course, 1, 0): 0.5
        record("3", "course", 5, 2, 1.0),  # cell (course, 5, 2): 1.0 -> course 0.75
        record("4", "meal", 1, 0, 0.0, turns=30),  # meal 0.0
        record("4", "meal", 1, 0, 1.0),  # duplicate key: ignored
    ]
    summary = summarize(records)
    assert summary["episodes"] == 4
    cells = {(c["domain"], c["hidden_slots"], c["decoy_budget"]): c for c in summary["cells"]}
    assert cells[("course", 1, 0)]["score"] == 0.5 and cells[("course", 1, 0)]["episodes"] == 2
    assert summary["per_domain"]["course"]["score"] == 0.75
    assert summary["per_domain"]["meal"]["score"] == 0.0
    assert summary["overall"]["score"] == 0.375  # mean of the domain scores, not of episodes
    assert summary["overall"]["turns"] == summary["overall"]["steps"] == (10 + 10 + 10 + 30) / 4  # steps: old name
    assert summary["overall"]["tokens"] == 120.0
    for stats in [summary["overall"], *summary["per_domain"].values(), *summary["cells"]]:
        assert {"episodes", "score", "score_se", "turns", "steps", "tool_calls", "time_s", "tokens"} <= set(stats)
    assert summary["per_domain"]["course"]["datasets"] == ["5x5"]
    assert score_grid(summary, "course") == ([1, 5], [0, 2], [[0.5, None], [None, 1.0]], [[2, 0], [0, 1]])


def test_summarize__standard_errors_of_cells_domains_and_overall() -> None:
    scores = [1.0] * 20 + [0.0] * 15  # 35 binary episodes, one cell per budget
    records = [record(f"c{i}", "course", 1, i % 5, s) for i, s in enumerate(scores)]
    records += [record(f"m{i}", "meal", 1, 0, s) for i, s in enumerate(scores[:10] + scores[-10:])]
    summary = summarize(records)
    course, meal = summary["per_domain"]["course"], summary["per_domain"]["meal"]
    assert course["score_se"] == pytest.approx(statistics.stdev(scores) / math.sqrt(35))  # balanced cells
    assert 0.07 < course["score_se"] < 0.09
    assert meal["score_se"] == pytest.approx(statistics.stdev([1.0] * 10 + [0.0] * 10) / math.sqrt(20))
    assert summary["overall"]["score_se"] == pytest.approx(math.hypot(course["score_se"], meal["score_se"]) / 2)
    one = summarize([record("a")])
    assert one["overall"]["score_se"] is None and one["cells"][0]["score_se"] is None


def test_summarize__refuses_records_of_several_policies() -> None:
    with pytest.raises(ConfigError):
        summarize([record("a"), {**record("b"), "policy": "q"}])


def test_format_table__one_row_per_domain_with_standard_errors_and_a_legend() -> None:
    table = format_table(summarize([record("1", "course"), record("2", "meal", score=0.0), record("3", "meal")]))
    lines = table.splitlines()
    assert lines[0] == "policy: p"
    assert [line.split()[0] for line in lines[3:5]] == ["course", "meal"]
    assert lines[4].split()[:4] == ["meal", "2", "0.500", "±0.500"]
    assert lines[3].split()[:3] == ["course", "1", "1.000"]  # one episode: no standard error
    average = next(line for line in lines if line.startswith("average"))
    assert average.split()[:3] == ["average", "3", "0.750"]
    assert lines[-len(TABLE_LEGEND) :] == list(TABLE_LEGEND)
    for column in ("score", "episodes", "turns", "calls", "time s", "tokens"):
        assert any(column in line for line in TABLE_LEGEND)


def _png_width_and_dpi(data: bytes) -> tuple[int, float]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    (width,) = struct.unpack(">I", data[16:20])
    at = data.index(b"pHYs")
    x_per_metre, _, unit = struct.unpack(">IIB", data[at + 4 : at + 13])
    assert unit == 1
    return width, x_per_metre * 0.0254


def test_write_heatmaps__one_figure_per_domain_and_failure_rate_in_png_pdf_svg(tmp_path: Path) -> None:
    records = [record("1", "course", 1, 0), record("2", "course", 5, 2, 0.0), record("3", "travel", 1, 4)]
    records += [record("4", "course", 1, 0, 0.0, rate=0.1), record("5", "course", 1, 0, rate=0.1)]
    summary = summarize(records)
    assert [p.name for p in write_heatmaps(summary, tmp_path)] == [
        "heatmap_course_failure0.png",
        "heatmap_course_failure0.1.png",
        "heatmap_travel_failure0.png",
    ]
    with pytest.raises(ConfigError, match="heatmap format"):
        write_heatmaps(summary, tmp_path, ["png", "jpg"])
    paths = write_heatmaps(summary, tmp_path, ["png", "pdf", "svg"])
    stems = ["heatmap_course_failure0", "heatmap_course_failure0.1", "heatmap_travel_failure0"]
    assert sorted(p.name for p in paths) == sorted(f"{s}.{f}" for s in stems for f in ("pdf", "png", "svg"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)
    for path in paths:
        head = path.read_bytes()[:8]
        assert head.startswith({"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}[path.suffix[1:]])
    width, dpi = _png_width_and_dpi((tmp_path / "heatmap_course_failure0.png").read_bytes())
    assert dpi == pytest.approx(PNG_DPI, rel=0.01) and PNG_DPI >= 150 and width >= 3.5 * PNG_DPI


def _texts(figure: Any) -> list[str]:
    return [text.get_text() for text in figure.axes[0].texts]


def test_heatmap_figure__cells_show_score_and_episode_count_and_empty_cells_are_marked() -> None:
    records = [record("1", "course", 1, 0), record("2", "course", 1, 0, 0.0), record("3", "course", 5, 2, 0.0)]
    records += [record("4", "course", 5, 2, rate=0.5)]
    summary = summarize(records)
    pooled_free = _texts(heatmap_figure(summary, "course", "0"))
    assert sorted(pooled_free) == sorted(["0.50\nn=2", "0.00\nn=1", "\u2013", "\u2013"])
    assert sorted(_texts(heatmap_figure(summary, "course", "0.5"))) == sorted(
        ["1.00\nn=1", "\u2013", "\u2013", "\u2013"]
    )
    figure = heatmap_figure(summary, "course", "0")
    assert sum(1 for patch in figure.axes[0].patches if patch.get_hatch()) == 2


@pytest.mark.parametrize("grid", [(1, 1), (6, 9)])
def test_heatmap_figure__title_names_policy_and_dataset_and_is_never_clipped(grid: tuple[int, int]) -> None:
    policy = "openai:Qwen/Qwen3-8B@http://a-rather-long-host-name.example.org:8000/v1 " + json.dumps(
        {"temperature": 0.7, "max_tokens": 4096, "extra_body": {"top_k": 20}}
    )
    records = [
        {**record(f"{h}-{b}", "course", h, b), "policy": policy, "dataset": "/data/sets/course_dataset_r5_c7.json"}
        for h in range(grid[0])
        for b in range(grid[1])
    ]
    figure = heatmap_figure(summarize(records), "course", "0")
    renderer = figure.canvas.get_renderer()
    figure.draw(renderer)
    title = figure._suptitle
    assert title is not None
    text = title.get_text().replace("\n", "")
    assert policy.replace(" ", "") in text.replace(" ", "") and "course_dataset_r5_c7.json" in text
    box, frame = title.get_window_extent(renderer), figure.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    for axes in figure.axes:  # the heatmap and the colorbar, with their labels: inside, below the title
        drawn = axes.get_tightbbox(renderer)
        assert frame.x0 <= drawn.x0 and drawn.x1 <= frame.x1 and frame.y0 <= drawn.y0 and drawn.y1 <= box.y0
    assert figure.get_figwidth() >= 3.5 and figure.get_figheight() >= 3.0  # readable when the grid is tiny

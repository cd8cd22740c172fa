"""``ace-gym export``: a run's episode records as a Hugging Face dataset (Parquet or save_to_disk)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

datasets = pytest.importorskip("datasets")

from ace_gym.agents import ExactSolver  # noqa: E402
from ace_gym.cli import main  # noqa: E402
from ace_gym.eval import EpisodeSpec, run_episodes  # noqa: E402
from ace_gym.eval.export import export_row, features  # noqa: E402
from ace_gym.runs.results import EPISODES_FILE  # noqa: E402
from ace_gym.text import MAX_JSON_DEPTH  # noqa: E402
from tests.core_helpers import nested_dict  # noqa: E402

TOKENS = {
    "prompt_ids": [1, 2, 3],
    "response_ids": [4, 5, 6, 7],
    "assistant_mask": [1, 1, 0, 0],
    "logprobs": [-0.5, -0.25, 0.0, 0.0],
    "turn_starts": [0],
}


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    specs = [
        EpisodeSpec.of("course", instance_index=0, seed=1),
        EpisodeSpec.of("meal", instance_index=0, seed=2, trial=1),
    ]
    found = list(run_episodes(specs, ExactSolver(), batch_size=2))
    found[1]["tokens"] = TOKENS  # as a token-exact run stores them
    return found


def write_run(folder: Path, records: list[dict[str, Any]], extra_lines: tuple[str, ...] = ()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(record) for record in records] + list(extra_lines)
    (folder / EPISODES_FILE).write_text("".join(f"{line}\n" for line in lines))
    return folder


def assert_row_holds_record(row: dict[str, Any], record: dict[str, Any]) -> None:
    for name in ("key", "policy", "domain", "instance_id", "seed", "trial", "score", "terminated"):
        assert row[name] == record[name]
    assert row["rewards"] == [turn["reward"] for turn in record["turns"]]
    assert json.loads(row["tools"]) == record["tools"]
    assert len(row["messages"]) == len(record["messages"])
    for exported, original in zip(row["messages"], record["messages"], strict=True):
        assert {k: v for k, v in exported.items() if v is not None} == original  # nothing lost, nothing added
    tokens = record.get("tokens") or {}
    for name in TOKENS:
        assert row[name] == tokens.get(name)


@pytest.mark.parametrize("fmt", ["parquet", "hf"])
def test_export__writes_one_row_per_episode_with_messages_tools_rewards_and_tokens(
    records: list[dict[str, Any]], tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", records)
    assert main(["export", str(run), "--format", fmt]) == 0
    if fmt == "parquet":
        dataset = datasets.Dataset.from_parquet(str(run / "episodes.parquet"))
    else:
        dataset = datasets.load_from_disk(str(run / "episodes_hf"))
    assert dataset.features == features()
    assert dataset.num_rows == 2
    for row, record in zip(dataset, records, strict=True):
        assert_row_holds_record(row, record)
    assert capsys.readouterr().out.strip().startswith("2 episodes ->")


def test_export__an_hf_folder_is_replaced_whole_and_no_scratch_is_left(
    records: list[dict[str, Any]], tmp_path: Path
) -> None:
    run = write_run(tmp_path / "run", records)
    out = tmp_path / "data" / "ace"
    assert main(["export", str(run), "--format", "hf", "--out", str(out)]) == 0
    write_run(run, records[:1])
    assert main(["export", str(run), "--format", "hf", "--out", str(out)]) == 0
    assert datasets.load_from_disk(str(out)).num_rows == 1
    assert sorted(p.name for p in out.parent.iterdir()) == ["ace"]


def test_export__a_malformed_line_stops_before_anything_is_written_unless_skipped(
    records: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", records, extra_lines=('{"not": "a record"}',))
    assert main(["export", str(run)]) == 5
    assert "malformed" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == [EPISODES_FILE]
    assert main(["export", str(run), "--skip-malformed"]) == 0
    assert datasets.Dataset.from_parquet(str(run / "episodes.parquet")).num_rows == 2


def test_export__refuses_a_folder_without_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path)]) == 2
    write_run(tmp_path, [])
    assert main(["export", str(tmp_path)]) == 2
    assert "no episode records" in capsys.readouterr().err


def test_export_row__normalises_tool_call_arguments_to_json_strings() -> None:
    message = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "done", "arguments": {}}}]}
    row = export_row({"messages": [message], "turns": [{"reward": 1.0}]})
    (call,) = row["messages"][0]["tool_calls"]
    assert call == {"id": None, "type": "function", "function": {"name": "done", "arguments": "{}"}}
    assert row["rewards"] == [1.0] and row["prompt_ids"] is None


def test_export__records_that_do_not_fit_the_columns_are_malformed_lines_skipped_on_request(
    records: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    misfits = [
        {**records[0], "key": "k-seed", "seed": "x"},  # a string in an integer column
        {**records[0], "key": "k-float", "seed": 1.5},  # would be cut to 1
        {**records[0], "key": "k-big", "instance_index": 2**70},  # beyond int64
        {**records[0], "key": "k-content", "messages": [{"role": "user", "content": {"a": 1}}]},
        {**records[0], "key": "k-turns", "turns": ["not a turn"]},
        {key: value for key, value in records[0].items() if key != "messages"} | {"key": "k-none"},
        {**records[0], "key": "k-tokens", "tokens": {"prompt_ids": [1, "2"]}},
    ]
    run = write_run(tmp_path / "run", records, extra_lines=tuple(json.dumps(r) for r in misfits))
    assert main(["export", str(run)]) == 5
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert "7 malformed line(s) among 9: line 3: 'seed' is 'x', not an integer within int64" in error
    assert "line 6: messages[0] 'content' is {'a': 1}, not a string" in error
    assert main(["export", str(run), "--skip-malformed"]) == 0
    assert datasets.Dataset.from_parquet(str(run / "episodes.parquet"))["key"] == [r["key"] for r in records]


def test_export__a_deeply_nested_line_is_malformed_not_a_crash(
    records: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", records, extra_lines=('{"key": ' * 100_000 + "1" + "}" * 100_000,))
    assert main(["export", str(run)]) == 5
    assert "line 3: not JSON (nested too deeply)" in capsys.readouterr().err
    assert main(["export", str(run), "--skip-malformed"]) == 0
    assert datasets.Dataset.from_parquet(str(run / "episodes.parquet")).num_rows == 2


def test_export__a_record_nested_past_the_bound_is_a_malformed_line_not_a_traceback(
    records: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = json.loads(json.dumps(records[0]))
    deep["key"] += "-deep"
    call = next(message for message in deep["messages"] if message.get("tool_calls"))["tool_calls"][0]
    call["function"]["arguments"] = nested_dict(MAX_JSON_DEPTH + 50)  # parseable, but deeper than a record may nest
    run = write_run(tmp_path / "run", [*records, deep])
    assert main(["export", str(run)]) == 5
    error = capsys.readouterr().err
    assert f"line 3: nested deeper than {MAX_JSON_DEPTH} levels" in error and "Traceback" not in error
    assert main(["export", str(run), "--skip-malformed"]) == 0
    assert datasets.Dataset.from_parquet(str(run / "episodes.parquet")).num_rows == 2


def test_export__a_key_recorded_twice_is_exported_once_with_a_warning(
    records: list[dict[str, Any]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = write_run(tmp_path / "run", [records[0], records[1], {**records[0], "score": 0.0}, records[1]])
    assert main(["export", str(run)]) == 0
    exported = datasets.Dataset.from_parquet(str(run / "episodes.parquet"))
    assert exported["key"] == [records[0]["key"], records[1]["key"]] and exported["score"] == [1.0, 1.0]
    assert "left out 2 record(s) whose key an earlier line has (lines 3, 4)" in caplog.text


def test_export__an_agentlongbench_record_and_a_lone_surrogate_export(
    records: list[dict[str, Any]], tmp_path: Path
) -> None:
    question = {
        "key": "p|alb|q1",
        "policy": "p",
        "domain": "knowledge_free/native",
        "question_type": "count",
        "tokens": 32000,  # the context's length, not token ids
        "score": None,
        "messages": [{"role": "user", "content": "how many?"}, {"role": "assistant", "content": "7 \ud800"}],
        "terminated": True,
        "truncated": False,
    }
    run = write_run(tmp_path / "run", [question])
    assert main(["export", str(run)]) == 0
    (row,) = datasets.Dataset.from_parquet(str(run / "episodes.parquet"))
    assert row["messages"][1]["content"] == "7 \ufffd" and row["prompt_ids"] is None and row["rewards"] == []

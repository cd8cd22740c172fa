"""Exported rows (ace_gym.instance.parquet): read back through the one validation, and every broken
table is one DatasetError naming the file and the column, row or JSON path."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from ace_gym.errors import ConfigError, DatasetError
from ace_gym.instance import load_dataset, loading, resolve_dataset
from ace_gym.instance.parquet import COLUMNS, dataset_columns

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def course_columns() -> dict[str, list[Any]]:
    model = resolve_dataset("5x5", "course").model
    return dataset_columns(model.model_dump(exclude={"instances"}), [i.model_dump_json() for i in model.instances])


def _write(folder: Path, columns: dict[str, list[Any]], name: str = "course_5x5.parquet") -> Path:
    path = folder / name
    pq.write_table(pa.table(columns), path)
    return path


def test_rows__load_as_the_json_file_they_came_from(course_columns: dict[str, list[Any]], tmp_path: Path) -> None:
    path = _write(tmp_path, course_columns)
    assert list(course_columns) == list(COLUMNS)
    assert load_dataset(path).model == resolve_dataset("5x5", "course").model
    assert resolve_dataset(tmp_path, "course").source == str(path.resolve())  # a config's folder
    assert resolve_dataset(pa.table(course_columns), "course").model == resolve_dataset("5x5", "course").model


def test_rows__in_any_order_are_read_in_instance_index_order(course_columns: dict[str, list[Any]]) -> None:
    reversed_rows = {name: values[::-1] for name, values in course_columns.items()}
    loaded = resolve_dataset(pa.table(reversed_rows), "course")
    assert loaded.instance_ids == tuple(course_columns["instance_id"])


def test_rows__of_a_filtered_table_are_its_instances_in_instance_index_order(
    course_columns: dict[str, list[Any]], tmp_path: Path
) -> None:
    """The card names hidden_slots, decoy_budget... as columns to filter by: a filtered table
    (``load_dataset(...).filter(...)``) holds some of the file's instance indices."""
    kept = [row for row, hidden in enumerate(course_columns["hidden_slots"]) if hidden == 5][::-1]
    assert 0 not in kept and len(kept) == 7
    filtered = {name: [values[row] for row in kept] for name, values in course_columns.items()}
    loaded = resolve_dataset(pa.table(filtered), "course")
    assert loaded.instance_ids == tuple(course_columns["instance_id"][row] for row in sorted(kept))
    assert load_dataset(_write(tmp_path, filtered)).instance_ids == loaded.instance_ids
    datasets = pytest.importorskip("datasets")
    import gymnasium as gym

    rows = datasets.Dataset.from_dict(course_columns).filter(lambda row: row["hidden_slots"] == 5)
    env = gym.make("ACE-course-v0", dataset=rows)
    for row in rows:
        _, info = env.reset(seed=0, options={"instance_id": row["instance_id"]})
        assert info["instance_id"] == row["instance_id"] and info["hidden_slots"] == 5


def _changed(columns: dict[str, list[Any]], name: str, row: int, value: Any) -> dict[str, list[Any]]:
    changed = {key: list(values) for key, values in columns.items()}
    changed[name][row] = value
    return changed


def _broken_meta(columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
    document = json.loads(columns["instance"][3])
    document["meta"]["candidates_per_slot"] = "many"
    return _changed(columns, "instance", 3, json.dumps(document))


def _repeated_header_key(columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """A header repeating a key, as a JSON file may: the file is refused, so must the rows be."""
    header = columns["dataset_header"][0]
    repeated = '{"domain": "meal", ' + header[1:]
    return {**columns, "dataset_header": [repeated] * len(columns["dataset_header"])}


@pytest.mark.parametrize(
    ("breaking", "where", "problem"),
    [
        (lambda c: {k: v for k, v in c.items() if k != "instance"}, "column 'instance'", "missing"),
        (lambda c: {k: v for k, v in c.items() if k != "dataset_header"}, "column 'dataset_header'", "missing"),
        (lambda c: _changed(c, "instance", 2, None), "column 'instance' (row 2)", "is null"),
        (lambda c: _changed(c, "instance", 2, "{not json"), "$.instances[2] (column 'instance')", "not valid JSON"),
        (lambda c: _changed(c, "instance_index", 4, 0), "column 'instance_index' (row 4)", "appears twice"),
        (lambda c: _changed(c, "instance_index", 4, -1), "column 'instance_index' (row 4)", "no non-negative integer"),
        (lambda c: _changed(c, "instance_index", 4, 99), "column 'instance_index' (row 4)", "99 is not in 0..34"),
        (lambda c: _changed(c, "hidden_slots", 5, 9), "column 'hidden_slots' (instance_index 5)", "meta.hidden_slots"),
        (lambda c: _changed(c, "dataset_header", 6, "{}"), "column 'dataset_header' (instance_index 6)", "differs"),
        (_broken_meta, "$.instances[3].meta.candidates_per_slot", "integer"),
        (_repeated_header_key, "column 'dataset_header' (instance_index 0)", "repeats the key 'domain'"),
    ],
)
def test_broken_rows__raise_one_dataset_error_naming_the_field_and_the_file(
    course_columns: dict[str, list[Any]], tmp_path: Path, breaking: Any, where: str, problem: str
) -> None:
    path = _write(tmp_path, breaking(course_columns))
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert caught.value.source == str(path.resolve())
    assert caught.value.json_path == where and problem in caught.value.problem


def test_not_a_parquet_file__raises_dataset_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "course_5x5.parquet"
    path.write_bytes(b"PAR1 but not really")
    with pytest.raises(DatasetError, match="not a readable parquet file") as caught:
        load_dataset(path)
    assert caught.value.source == str(path.resolve())


def test_folders__without_one_config_of_the_domain_raise_config_error_naming_the_choices(
    course_columns: dict[str, list[Any]], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"is a directory holding no \.parquet file"):
        resolve_dataset(tmp_path, "course")
    for size in ("5x5", "5x7"):
        (tmp_path / f"course_{size}").mkdir()
        _write(tmp_path / f"course_{size}", course_columns, f"course_{size}.parquet")
    with pytest.raises(ConfigError, match="several configs of domain 'course'") as caught:
        resolve_dataset(tmp_path, "course")
    assert str(tmp_path / "course_5x7") in caught.value.problem
    assert resolve_dataset(tmp_path / "course_5x7", "course").domain.name == "course"
    with pytest.raises(ConfigError, match="holds domain 'course', not 'meal'"):
        resolve_dataset(tmp_path / "course_5x7", "meal")


def test_a_folder_named_as_a_bundled_dataset__hides_it_only_when_it_holds_rows(
    course_columns: dict[str, list[Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dataset="5x5"`` with a results folder ``5x5/`` in the working directory is still the
    bundled data; a folder of exported rows of that name is the rows."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "5x5").mkdir()
    (tmp_path / "5x5" / "episodes.jsonl").write_text("{}\n")
    bundled = resolve_dataset("5x5", "course")
    assert bundled.source != str(tmp_path / "5x5") and len(bundled.model.instances) == 35
    path = _write(tmp_path / "5x5", course_columns)
    assert resolve_dataset("5x5", "course").source == str(path.resolve())


def _invalid_utf8_in(columns: dict[str, list[Any]], name: str, row: int) -> Any:
    """A pyarrow table of ``columns`` whose column ``name`` holds invalid UTF-8 at ``row`` (a
    byte-flipped export: pyarrow checks no UTF-8 when it reads a file)."""
    data = [text.encode() for text in columns[name]]
    data[row] = data[row][:10] + b"\xff\xfe" + data[row][12:]
    offsets = [0]
    for item in data:
        offsets.append(offsets[-1] + len(item))
    array = pa.Array.from_buffers(
        pa.string(),
        len(data),
        [None, pa.py_buffer(pa.array(offsets, pa.int32()).buffers()[1]), pa.py_buffer(b"".join(data))],
    )
    return pa.table({**{k: v for k, v in columns.items() if k != name}, name: array})


@pytest.mark.parametrize("name", ["instance", "dataset_header", "instance_id"])
def test_invalid_utf8_in_a_string_column__is_a_dataset_error_naming_file_column_and_row(
    course_columns: dict[str, list[Any]], tmp_path: Path, name: str
) -> None:
    """Issue 40: gym.make(..., dataset=...) escaped as UnicodeDecodeError."""
    path = tmp_path / "course_5x5.parquet"
    pq.write_table(_invalid_utf8_in(course_columns, name, 7), path)
    with pytest.raises(DatasetError) as caught:
        gym.make("ACE-course-v0", dataset=str(path))
    assert caught.value.source == str(path.resolve())
    assert caught.value.json_path == f"column {name!r} (row 7)" and "not valid UTF-8" in caught.value.problem


def test_a_repeated_column_name__is_a_dataset_error_naming_it_in_a_file_and_a_table(
    course_columns: dict[str, list[Any]], tmp_path: Path
) -> None:
    """Issue 40: a pyarrow Table with a repeated column name raised KeyError."""
    table = pa.table(course_columns)
    repeated = table.append_column("instance", table["instance"])
    with pytest.raises(DatasetError, match="appears 2 times") as caught:
        resolve_dataset(repeated, "course")
    assert caught.value.json_path == "column 'instance'"
    path = tmp_path / "course_5x5.parquet"
    pq.write_table(repeated, path)
    with pytest.raises(DatasetError, match="appears 2 times") as caught:
        load_dataset(path)
    assert caught.value.source == str(path.resolve()) and caught.value.json_path == "column 'instance'"


LIMIT = 4 * 2**20  # MAX_DATASET_BYTES in these tests: 4 MiB (the 35 course instances take 1.4 MB)


def _padded_header(columns: dict[str, list[Any]], padding: int) -> dict[str, list[Any]]:
    header = json.loads(columns["dataset_header"][0])
    header["padding"] = "x" * padding
    return {**columns, "dataset_header": [json.dumps(header)] * len(columns["dataset_header"])}


def test_a_short_file_whose_rows_repeat_a_long_string__is_refused_before_its_rows_are_materialised(
    course_columns: dict[str, list[Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: a 216 KB file of 300 MB padding was refused only after 2.2 GB of RSS."""
    monkeypatch.setattr(loading, "MAX_DATASET_BYTES", LIMIT)
    path = _write(tmp_path, _padded_header(course_columns, 200_000))  # 35 rows: 7 MB more decoded
    assert path.stat().st_size < LIMIT  # stored once, dictionary-encoded
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError, match="once decoded, more than MAX_DATASET_BYTES") as caught:
            load_dataset(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.source == str(path.resolve())
    assert peak < LIMIT  # no row became a Python string


def test_a_column_over_the_bound_in_the_files_metadata__is_refused_before_it_is_read(
    course_columns: dict[str, list[Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loading, "MAX_DATASET_BYTES", LIMIT)
    document = json.loads(course_columns["instance"][0])
    document["padding"] = "".join(f"{k:07d}" for k in range(500_000))  # 3.5 MB in one row: no dictionary saves it
    path = _write(tmp_path, _changed(course_columns, "instance", 0, json.dumps(document)))
    with pytest.raises(DatasetError, match="uncompressed in the file, more than MAX_DATASET_BYTES"):
        load_dataset(path)

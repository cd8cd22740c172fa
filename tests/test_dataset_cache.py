"""The validated-dataset cache: a file validated before loads from its entry, equal to a full
validation; anything that does not match (changed file, corrupt entry) is validated in full."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import pytest

from ace_gym.dataset_cache import cache_folder
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import DatasetError
from ace_gym.instance import parse_dataset, read_dataset
from tests.conftest import published_file


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ACE_GYM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "datasets"


def _copy(domain: str, folder: Path) -> Path:
    path = folder / f"{domain}.json"
    path.write_bytes(published_file(domain).read_bytes())
    return path


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.json")) if cache.exists() else []


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_read_dataset__second_read_comes_from_the_entry_equal_to_a_full_validation(
    domain: str, cache: Path, tmp_path: Path
) -> None:
    path = _copy(domain, tmp_path)
    first = read_dataset(path)
    assert len(_entries(cache)) == 1
    second = read_dataset(path)
    validated = parse_dataset(path.read_bytes(), str(path))
    assert second._entry is not None and first._entry is None
    assert second.instance_ids == validated.instance_ids
    assert second[-1] == validated[-1]
    assert second[1:3] == validated[1:3]
    assert second.model == validated.model
    assert second.compiled(0).truth.tolist() == validated.compiled(0).truth.tolist()


def test_read_dataset__changed_file_is_validated_again(cache: Path, tmp_path: Path) -> None:
    path = _copy("course", tmp_path)
    read_dataset(path)
    document = json.loads(path.read_bytes())
    document["num_instances"] += 1
    path.write_text(json.dumps(document))
    with pytest.raises(DatasetError) as raised:
        read_dataset(path)
    assert raised.value.json_path == "$.num_instances"
    assert len(_entries(cache)) == 1  # the broken file left no entry


def test_read_dataset__corrupt_entry_is_ignored_and_the_file_validated(
    cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _copy("meal", tmp_path)
    expected = read_dataset(path).model
    (entry,) = _entries(cache)
    data = bytearray(entry.read_bytes())
    data[-10] ^= 1
    entry.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="ace_gym.dataset_cache"):
        again = read_dataset(path)
    assert again._entry is None and again.model == expected
    assert "ignoring the unreadable dataset cache entry" in caplog.text
    assert read_dataset(path)._entry is not None  # the entry was written anew


def test_read_dataset__empty_cache_dir_setting_turns_the_cache_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACE_GYM_CACHE_DIR", "")
    monkeypatch.chdir(tmp_path)
    path = _copy("travel", tmp_path)
    assert cache_folder() is None
    assert read_dataset(path)._entry is None and read_dataset(path)._entry is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["travel.json"]


def test_read_dataset__unwritable_cache_folder_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("ACE_GYM_CACHE_DIR", str(blocker))
    path = _copy("shopping", tmp_path)
    assert len(read_dataset(path)) == len(read_dataset(path)) > 0


def test_dataset_from_entry__pickles_by_reference_to_its_file(cache: Path, tmp_path: Path) -> None:
    path = _copy("workforce", tmp_path)
    read_dataset(path)
    dataset = read_dataset(path)
    assert pickle.loads(pickle.dumps(dataset)).instance_ids == dataset.instance_ids

"""The validated-dataset cache: a file validated before loads from its entry, equal to a full
validation; anything that does not match (changed file, corrupt entry) is validated in full."""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import pickle
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import DatasetError
from ace_gym.instance import (
    CompiledInstance,
    Dataset,
    bundled_dataset_path,
    cached_instance,
    forget_loaded_datasets,
    parse_dataset,
    read_dataset,
    resolve_dataset,
)
from ace_gym.instance import cache as dataset_cache
from ace_gym.instance.cache import _ENTRY_HEADER_INTS, _ENTRY_HEADER_LISTS, cache_folder
from ace_gym.instance.cached_instance import _packed, _unpacked
from ace_gym.tools import EpisodeState, ToolConfig, tool_names, toolset
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
    for dataset in (first, second):  # the first read too keeps the entry it wrote, not the models
        assert dataset._entry is not None and dataset._model is None
        assert dataset.instance_ids == validated.instance_ids
        assert dataset[-1] == validated[-1]
        assert dataset[1:3] == validated[1:3]
        assert dataset.model == validated.model
        assert dataset.compiled(0).truth.tolist() == validated.compiled(0).truth.tolist()


def test_read_dataset__a_first_read_holds_less_memory_than_its_json(cache: Path, tmp_path: Path) -> None:
    """Issue 10: a dataset in memory no larger than its JSON, on the first use too (its pydantic
    models took about twice the JSON; the entry it wrote takes under half)."""
    path = _copy("course", tmp_path)
    gc.collect()
    tracemalloc.start()
    try:
        dataset = read_dataset(path)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        del dataset
        gc.collect()
        held -= tracemalloc.get_traced_memory()[0]  # what dropping the dataset freed
    finally:
        tracemalloc.stop()
    assert _entries(cache) and 0 < held <= path.stat().st_size


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
    written = entry.read_bytes()
    data = bytearray(written)
    data[-10] ^= 1
    entry.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="ace_gym.instance.cache"):
        again = read_dataset(path)
    assert again.model == expected
    assert "its checksum does not hold" in caplog.text
    assert entry.read_bytes() == written  # validated in full, and the entry written anew


def test_read_dataset__entry_without_three_texts_per_instance_is_ignored(
    cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _copy("course", tmp_path)
    read_dataset(path)
    (entry,) = _entries(cache)
    index, body = _index_and_body(entry)
    index["ends"] = [end for k, end in enumerate(index["ends"]) if k % 3 != 1]  # two per instance, checksum right
    _write_entry(entry, json.dumps(index).encode() + b"\n" + body)
    with caplog.at_level(logging.WARNING, logger="ace_gym.instance.cache"):
        assert len(read_dataset(path)) == index["header"]["num_instances"]
    assert "its index does not hold three texts per instance" in caplog.text
    assert _index_and_body(entry)[0]["ends"] != index["ends"]  # validated, written anew


def _index_and_body(entry: Path) -> tuple[dict, bytes]:
    """An entry file's index (the line after its checksum line) and body."""
    checksum, _, rest = entry.read_bytes().partition(b"\n")
    assert checksum == b"%08x" % zlib.crc32(rest)
    head, _, body = rest.partition(b"\n")
    return json.loads(head), body


def _write_entry(entry: Path, checked: bytes) -> None:
    """Write an entry of ``checked`` (its index line and body) under its right checksum."""
    entry.write_bytes(b"%08x\n" % zlib.crc32(checked) + checked)


def _entry_of(cache: Path, path: Path) -> Path:
    """The entry a read of ``path`` wrote (the one named by the hash of its bytes)."""
    (entry,) = cache.glob(f"{hashlib.sha256(path.read_bytes()).hexdigest()}-*.json")
    return entry


def _bundled_course_copies(tmp_path: Path) -> tuple[Path, Path]:
    """Copies of the bundled 5x5 (35 instances) and 5x7 (54 instances) course files."""
    copies = []
    for name in ("5x5", "5x7"):
        bundled = bundled_dataset_path(name, "course")
        copy = tmp_path / name / bundled.name
        copy.parent.mkdir()
        copy.write_bytes(bundled.read_bytes())
        copies.append(copy)
    return copies[0], copies[1]


def test_make__another_files_entry_copied_into_its_place_is_not_served(
    cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 §3: the 5x7 file's entry copied over the 5x5 file's made gym.make("ACE-course-v0")
    serve the 54 instances of 5x7 instead of the 35 of 5x5."""
    small, large = (bundled_dataset_path(name, "course") for name in ("5x5", "5x7"))
    assert (len(read_dataset(small)), len(read_dataset(large))) == (35, 54)
    _entry_of(cache, large).replace(_entry_of(cache, small))
    forget_loaded_datasets()
    try:
        with caplog.at_level(logging.WARNING, logger="ace_gym.instance.cache"):
            env = gym.make("ACE-course-v0")
        assert len(env.unwrapped.dataset) == 35
        env.close()
    finally:
        forget_loaded_datasets()  # the next test loads the bundled file afresh
    assert "it records another key, file_sha256 than asked for" in caplog.text
    assert _index_and_body(_entry_of(cache, small))[0]["header"]["num_instances"] == 35  # written anew


@pytest.mark.parametrize("how", ["writable by others", "owned by another user"])
def test_read_dataset__an_entry_someone_else_could_have_written_is_a_miss(
    how: str, cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 §3: whoever could write to a shared cache folder could forge a whole entry for a
    file and change benchmark results; an entry is read only when this user alone can have
    written it."""
    small, _ = _bundled_course_copies(tmp_path)
    read_dataset(small)
    entry = _entry_of(cache, small)
    if how == "writable by others":
        entry.chmod(0o666)
    elif os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    else:
        os.chown(entry, 54321, -1)
    forget_loaded_datasets()
    with caplog.at_level(logging.WARNING, logger="ace_gym.instance.cache"):
        assert len(read_dataset(small)) == 35  # validated again
    assert "is owned by another user or writable by others" in caplog.text
    status = _entry_of(cache, small).stat()  # and written anew, by this user alone
    assert status.st_uid == os.geteuid() and not status.st_mode & 0o022


@pytest.mark.parametrize("forged", [(), ("key",), ("key", "validator_fingerprint"), ("key", "layout", "header")])
def test_read_dataset__another_files_entry_with_its_checksum_recomputed_is_a_miss(
    forged: tuple[str, ...], cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 §3: an entry names the file it was written for (its hash, under the checksum): a
    copy of another file's entry, with index fields set to this file's and its checksum
    recomputed, is still another file's entry."""
    small, large = _bundled_course_copies(tmp_path)
    read_dataset(small)
    read_dataset(large)
    target = _entry_of(cache, small)
    own, _ = _index_and_body(target)
    index, body = _index_and_body(_entry_of(cache, large))
    index.update({name: own[name] for name in forged})
    _write_entry(target, json.dumps(index).encode() + b"\n" + body)
    with caplog.at_level(logging.WARNING, logger="ace_gym.instance.cache"):
        assert len(read_dataset(small)) == 35
    assert "file_sha256 than asked for" in caplog.text


@pytest.mark.parametrize(
    ("written", "changed"), [(b'"rows": 5', b'"rows": 6'), (b'"course"', b'"meal"'), (b'"domain": "course", ', b"")]
)
def test_resolve_dataset__entry_with_its_index_line_changed_is_a_miss(
    written: bytes, changed: bytes, cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 §3: the checksum covered the body only, so a changed index line was served (another
    domain there raised a ConfigError saying the file holds that domain, no domain a KeyError)."""
    small, _ = _bundled_course_copies(tmp_path)
    read_dataset(small)
    entry = _entry_of(cache, small)
    data = entry.read_bytes()
    assert written in data
    entry.write_bytes(data.replace(written, changed, 1))
    with caplog.at_level(logging.WARNING, logger="ace_gym.instance.cache"):
        assert resolve_dataset(small, "course").model.rows == 5
    assert "its checksum does not hold" in caplog.text


_HEADER_TAMPERING: dict[str, Callable[[dict], object]] = {
    "domain missing": lambda header: header.pop("domain"),
    "unknown domain": lambda header: header.update(domain="nowhere"),
    "domain a list": lambda header: header.update(domain=["course"]),
    "rows a string": lambda header: header.update(rows="5"),
    "cols a bool": lambda header: header.update(cols=True),
    "hidden_slots of strings": lambda header: header.update(hidden_slots=["1"]),
    "branch_budget a number": lambda header: header.update(branch_budget=3),
    "extra field": lambda header: header.update(extra=1),
    "count off": lambda header: header.update(num_instances=header["num_instances"] + 1),
}
_INDEX_TAMPERING: dict[str, Callable[[dict], object]] = {
    "header not an object": lambda index: index.update(header=[1]),
    "header missing": lambda index: index.pop("header"),
    "ids missing": lambda index: index.pop("instance_ids"),
    "an id a number": lambda index: index["instance_ids"].__setitem__(0, 7),
    "ends strings": lambda index: index.update(ends=[str(end) for end in index["ends"]]),
    "ends out of order": lambda index: index["ends"].reverse(),
    "ends negative": lambda index: index["ends"].__setitem__(0, -1),
    "layout a string": lambda index: index.update(layout=str(index["layout"])),
    "index empty": lambda index: index.clear(),
}
_LINE_TAMPERING = {
    "index not JSON": b"{not json\n",
    "index deeply nested": b"[" * 100_000 + b"\n",
    "no line break": b"",
}


@pytest.mark.parametrize("tampering", [*_HEADER_TAMPERING, *_INDEX_TAMPERING, *_LINE_TAMPERING])
def test_read_dataset__tampered_index_under_a_right_checksum_is_a_miss_never_an_error(
    tampering: str, cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 §3: a tampered header gave a bare KeyError (no domain) or a misleading
    ConfigError (another domain) instead of falling back to validating the file."""
    path = _copy("course", tmp_path)
    expected = read_dataset(path)
    (entry,) = _entries(cache)
    index, body = _index_and_body(entry)
    if tampering in _LINE_TAMPERING:
        line = _LINE_TAMPERING[tampering]
        checked = line + body if line else json.dumps(index).encode()  # else: an index and no line break
    else:
        (_HEADER_TAMPERING.get(tampering) or _INDEX_TAMPERING[tampering])(
            index["header"] if tampering in _HEADER_TAMPERING else index
        )
        checked = json.dumps(index).encode() + b"\n" + body
    _write_entry(entry, checked)
    with caplog.at_level(logging.WARNING, logger="ace_gym.instance.cache"):
        again = resolve_dataset(path, "course")
    assert again.instance_ids == expected.instance_ids and again.model == expected.model
    assert "ignoring the dataset cache entry" in caplog.text
    assert _index_and_body(entry)[0]["header"] == expected.model.model_dump(exclude={"instances"})  # written anew


def test_entry_header_fields__are_the_schemas_header_fields() -> None:
    """What the header check of a cache entry expects is every DatasetFile field but instances."""
    from ace_gym.dataset_schema import DatasetFile

    fields = {"domain", *_ENTRY_HEADER_INTS, *_ENTRY_HEADER_LISTS}
    assert fields == set(DatasetFile.model_fields) - {"instances"}


def test_read_entry__an_entry_written_under_another_layout_is_never_read(cache: Path, tmp_path: Path) -> None:
    """The layout is part of the fingerprint in an entry's name: an old entry is not even opened."""
    path = _copy("course", tmp_path)
    read_dataset(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert dataset_cache.read_entry(digest) is not None
    layout = dataset_cache.LAYOUT
    try:
        dataset_cache.LAYOUT = layout + 1
        dataset_cache.validator_fingerprint.cache_clear()
        assert dataset_cache.read_entry(digest) is None
    finally:
        dataset_cache.LAYOUT = layout
        dataset_cache.validator_fingerprint.cache_clear()


_ENTRY_REPLACED_BY = """
import os, sys
from pathlib import Path
from ace_gym.instance import read_dataset

path, entry, special = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
entry.unlink()
os.mkfifo(entry) if special == "fifo" else entry.symlink_to(special)
print(len(read_dataset(path)), entry.is_file() and not entry.is_symlink())
"""


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_read_dataset__fifo_or_device_in_an_entrys_place_is_a_miss_never_read(
    special: str, cache: Path, tmp_path: Path
) -> None:
    """Issue 27 §3: a FIFO in an entry's place made gym.make hang, a link to /dev/zero read without
    end. Read in a child process, so that a regression fails the test instead of hanging it."""
    if special == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no os.mkfifo on this system")
    if special != "fifo" and not os.path.exists(special):
        pytest.skip(f"no {special} on this system")
    path = _copy("course", tmp_path)
    count = len(read_dataset(path))
    (entry,) = _entries(cache)
    paths = os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])
    try:
        done = subprocess.run(
            [sys.executable, "-c", _ENTRY_REPLACED_BY, str(path), str(entry), special],
            capture_output=True,
            text=True,
            timeout=120,  # a load takes well under a second; only a regression comes near
            env={**os.environ, "PYTHONPATH": paths},
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"a read with {special} in the cache entry's place did not return")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(count), "True"]  # validated, and a regular entry written in its place
    assert "ignoring the dataset cache entry" in done.stderr and "not a regular file" in done.stderr


@pytest.mark.parametrize("high", [7, 2**15, 2**31, 2**62])
def test_packed__arrays_read_back_whatever_the_size_of_their_values(high: int) -> None:
    arrays = [np.array([0, high, 3], dtype=np.int64), np.array([True, False]), np.arange(6, dtype=np.int32)]
    text, dtype = _packed(arrays)
    first, mask, table = _unpacked(text, dtype, [(1, 3), (1, 2), (2, 3)])
    assert first.tolist() == [[0, high, 3]] and mask.tolist() == [[1, 0]] and table.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert np.dtype(dtype).itemsize == {7: 2, 2**15: 4, 2**31: 8, 2**62: 8}[high]


def test_read_dataset__empty_cache_dir_setting_turns_the_cache_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACE_GYM_CACHE_DIR", "")
    monkeypatch.chdir(tmp_path)
    path = _copy("travel", tmp_path)
    assert cache_folder() is None
    assert read_dataset(path)._entry is None and read_dataset(path)._entry is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["travel.json"]


def test_read_dataset__cache_off_builds_no_entry_text_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACE_GYM_CACHE_DIR", "")
    written = []
    original = cached_instance.compiled_entry
    monkeypatch.setattr(
        cached_instance, "compiled_entry", lambda compiled: written.append(compiled) or original(compiled)
    )
    dataset = read_dataset(_copy("meal", tmp_path))
    assert written == []
    # validation compiles every instance (the rules on the truth are checked on the arrays): kept
    assert [dataset._compiled[k].origin for k in range(len(dataset))] == [(dataset, k) for k in range(len(dataset))]


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


def _compiled_fields(compiled: CompiledInstance) -> dict[str, object]:
    """Everything the tools, the scorer and the env read from a compiled instance, as plain values."""
    return {
        "scalars": (compiled.instance_id, compiled.rows, compiled.cols, compiled.hidden_count, compiled.decoy_budget),
        "item_ids": compiled.item_ids,
        "item_index": compiled.item_index,
        "items": json.dumps(compiled.items),  # key order included: the tools show these dicts
        "task_instruction": compiled.task_instruction,
        "numeric": {name: column.tolist() for name, column in compiled.numeric.items()},
        "categorical": {name: (codes.tolist(), words) for name, (codes, words) in compiled.categorical.items()},
        "grids": (compiled.truth.tolist(), compiled.initial.tolist(), compiled.initial_grid, compiled.visible_ids),
        "cell_slot": (compiled.cell_slot.tolist(), compiled.cell_slot_list),
        "slots": [
            (
                s.row,
                s.col,
                s.cell,
                s.candidate_ids,
                s.candidate_items,
                s.item_of_id,
                s.valid_items,
                s.rules,
                s.rule_count,
                s.slot_valid.tolist(),
                s.allowed_ids_text,
            )
            for s in compiled.slots
        ],
        "global_rules": [(r.name, r.bound, r.contribution.tolist(), r.reason) for r in compiled.global_rules],
        "instance": compiled.instance,
        "arrays": [(array.dtype, array.flags.writeable) for array in _arrays(compiled)],
    }


def _arrays(compiled: CompiledInstance) -> list[np.ndarray]:
    """Every numpy array of a compiled instance (their dtypes and read-only flags must match too)."""
    return [
        *compiled.numeric.values(),
        *[codes for codes, _ in compiled.categorical.values()],
        compiled.truth,
        compiled.initial,
        compiled.cell_slot,
        *[array for slot in compiled.slots for array in (slot.candidates, slot.slot_valid)],
        *[rule.contribution for rule in compiled.global_rules],
    ]


def _validated_and_cached(path: Path) -> tuple[Dataset, Dataset]:
    """The file validated in full (no entry), and read (the first time) from the entry it wrote."""
    validated = parse_dataset(path.read_bytes(), str(path))
    cached = read_dataset(path)
    assert cached._entry is not None and validated._entry is None
    return validated, cached


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_compiled__from_the_entry_equals_compiled_from_a_full_validation(
    domain: str, cache: Path, tmp_path: Path
) -> None:
    validated, cached = _validated_and_cached(_copy(domain, tmp_path))
    for index in range(len(cached)):
        assert _compiled_fields(cached.compiled(index)) == _compiled_fields(validated.compiled(index))


def test_compiled__from_the_entry_builds_its_items_only_when_asked_and_without_its_pydantic_instance(
    cache: Path, tmp_path: Path
) -> None:
    path = _copy("pc_build", tmp_path)
    validated = parse_dataset(path.read_bytes(), str(path))[4]
    compiled = read_dataset(path).compiled(4)
    assert "instance" not in compiled.__dict__ and "items" not in compiled.__dict__
    assert json.dumps(compiled.items) == json.dumps(list(validated.item_pool.values()))
    assert "instance" not in compiled.__dict__  # an episode's tools read the items: no model needed
    assert compiled.instance == validated and "instance" in compiled.__dict__


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_compiled__from_the_entry_builds_each_item_alone_equal_to_a_full_validation(
    domain: str, cache: Path, tmp_path: Path
) -> None:
    validated, cached = _validated_and_cached(_copy(domain, tmp_path))
    for index in (0, len(cached) - 1):
        compiled = cached.compiled(index)
        count = len(compiled.item_ids)
        alone = {k: compiled.item(k) for k in reversed(range(count))}  # each built by itself, last first
        assert "items" not in compiled.__dict__
        assert json.dumps([alone[k] for k in range(count)]) == json.dumps(validated.compiled(index).items)
        assert all(built is alone[k] for k, built in enumerate(compiled.items))  # the same dicts
        for key in alone[0]:  # what the query tool reads, from the columns where they hold the key
            assert compiled.item_values(key, range(count)) == [alone[k][key] for k in range(count)]


def test_get_item_info__first_call_on_an_instance_from_the_entry_builds_that_item_alone(
    cache: Path, tmp_path: Path
) -> None:
    """Issue 10: the first item lookup on an instance read from the cache built every item dict
    (json-parsing the whole instance): ~0.8 ms at H=15 where the release answers in ~25 µs."""
    path = _copy("course", tmp_path)
    read_dataset(path)
    compiled = read_dataset(path).compiled(34)
    state = EpisodeState(compiled, ToolConfig())
    shown = next(item for item in compiled.initial_grid if item >= 0)
    names = tool_names("course")
    call = toolset(compiled.domain).call
    reply = call(state, names["item_info"], {"id": compiled.item_ids[shown]})
    assert reply.ok
    field = compiled.domain.allowed_fields[0]
    assert call(state, names["item_attributes"], {"ids": [compiled.item_ids[shown]], "field": field}).ok
    slot = compiled.slots[0]
    query = {
        "row": slot.row,
        "col": slot.col,
        "field": compiled.domain.numeric_attributes[0],
        "operator": ">",
        "value": 0,
    }
    assert call(state, names["query"], query).ok  # reads the compiled column: builds no item
    assert "items" not in compiled.__dict__ and "item_index" not in compiled.__dict__
    assert list(compiled._item_rows._built) == [shown]  # item_info builds that item's dict alone


def test_get_item_info__escaped_or_reordered_items_from_the_entry_are_shown_as_written(
    cache: Path, tmp_path: Path
) -> None:
    path = _copy("course", tmp_path)
    document = json.loads(path.read_bytes())
    instance = document["instances"][2]
    pool = instance["item_pool"]
    visible = [item for row in instance["partial_solution"] for item in row if item is not None]
    names = {visible[0]: 'Cours "Été" 100%', visible[1]: "back\\slash", visible[2]: "plain 7, [8] 50%"}
    for item_id, name in names.items():
        pool[item_id]["name"] = name
    pool[visible[3]] = dict(reversed(pool[visible[3]].items()))
    path.write_text(json.dumps(document))
    _, cached = _validated_and_cached(path)
    compiled = cached.compiled(2)
    state = EpisodeState(compiled, ToolConfig())
    replies = {
        item_id: toolset(compiled.domain).call(state, tool_names("course")["item_info"], {"id": item_id}).text
        for item_id in visible[:4]
    }
    assert replies == {
        item_id: json.dumps(
            {
                "status": "success",
                "messages": "Successfully executed tool",
                "data": {"id": item_id, "item": pool[item_id]},
            },
            ensure_ascii=False,
        )
        for item_id in visible[:4]
    }


def test_read_dataset__items_listing_their_keys_in_another_order_come_back_as_written(
    cache: Path, tmp_path: Path
) -> None:
    path = _copy("course", tmp_path)
    document = json.loads(path.read_bytes())
    pool = document["instances"][2]["item_pool"]
    reordered = list(pool)[5]
    pool[reordered] = dict(reversed(pool[reordered].items()))
    path.write_text(json.dumps(document))
    validated, cached = _validated_and_cached(path)
    assert json.dumps(cached.compiled(2).item(5)) == json.dumps(validated.compiled(2).items[5])  # built alone
    assert list(cached[2].item_pool[reordered]) == list(pool[reordered]) == list(validated[2].item_pool[reordered])
    assert json.dumps(cached.compiled(2).items) == json.dumps(validated.compiled(2).items)
    assert cached.model == validated.model

"""Dataset loading and validation: one typed error per broken file, one load per process."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import math
import os
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import ace_gym
from ace_gym import instance as instance_module
from ace_gym.constraints import aggregate
from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, DatasetError
from ace_gym.instance import (
    CompiledInstance,
    Instance,
    accepted_ranges,
    load_dataset,
    loading,
    repeated_keys,
    resolve_dataset,
    validation,
)
from ace_gym.scoring import evaluate_grid
from ace_gym.tools import EpisodeState, ToolConfig
from tests.conftest import PUBLISHED_SHA256, published_file

REFERENCE_FILES = {domain: published_file(domain) for domain in DOMAIN_NAMES}
KEEP = (0, 9)  # a trimmed copy: instance 0 (H1 B0) and 9 (H5 B4, the spec's example)


@pytest.fixture(scope="module")
def course_raw() -> dict[str, Any]:
    raw = json.loads(REFERENCE_FILES["course"].read_text())
    raw["instances"] = [raw["instances"][k] for k in KEEP]
    raw["num_instances"] = len(KEEP)
    return raw


def _write(folder: Path, raw: dict[str, Any], name: str = "dataset.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(raw, indent=2))
    return path


def _first_pool_id(raw: dict[str, Any]) -> str:
    return next(iter(raw["instances"][0]["item_pool"]))


def _non_truth_candidate(raw: dict[str, Any]) -> int:
    slot = raw["instances"][0]["slots"][0]
    return next(k for k, i in enumerate(slot["candidate_ids"]) if i != slot["truth_id"])


Mutation = Callable[[dict[str, Any]], None]
I0 = "$.instances[0]"


def _first_item_with(key: str, value: Any, problem: str) -> tuple[Mutation, str, str]:
    """A BROKEN case: the first pool item of instance 0 gets ``key = value``."""
    return (
        lambda r: r["instances"][0]["item_pool"][_first_pool_id(r)].__setitem__(key, value),
        f"{I0}.item_pool.{{first}}.{key}",
        problem,
    )


BROKEN: dict[str, tuple[Mutation, str, str]] = {
    "missing field": (
        lambda r: r["instances"][0].pop("task_instruction"),
        f"{I0}.task_instruction",
        "Field required",
    ),
    "wrong type": (lambda r: r["instances"][0]["meta"].__setitem__("rows", "5"), f"{I0}.meta.rows", "valid integer"),
    "unexpected key": (lambda r: r["instances"][0].__setitem__("colour", 1), f"{I0}.colour", "Extra inputs"),
    "unknown domain": (lambda r: r.__setitem__("domain", "courses"), "$.domain", "did you mean 'course'"),
    "instance of another domain": (
        lambda r: r["instances"][1].__setitem__("domain", "meal"),
        "$.instances[1].domain",
        "'meal'",
    ),
    "count mismatch": (lambda r: r.__setitem__("num_instances", 3), "$.num_instances", "holds 2 instances"),
    "duplicate instance id": (
        lambda r: r["instances"][1].__setitem__("instance_id", r["instances"][0]["instance_id"]),
        "$.instances[1].instance_id",
        "duplicate",
    ),
    "candidate id not in pool": (
        lambda r: r["instances"][0]["slots"][0]["candidate_ids"].__setitem__(_non_truth_candidate(r), "C99999"),
        f"{I0}.slots[0].candidate_ids",
        "'C99999' is not in item_pool",
    ),
    "truth not among candidates": (
        lambda r: r["instances"][0]["slots"][0]["candidate_ids"].remove(r["instances"][0]["slots"][0]["truth_id"]),
        f"{I0}.slots[0].candidate_ids",
        "does not contain the truth id",
    ),
    "duplicate candidates": (
        lambda r: r["instances"][0]["slots"][0]["candidate_ids"].append(r["instances"][0]["slots"][0]["truth_id"]),
        f"{I0}.slots[0].candidate_ids",
        "duplicate",
    ),
    "item with an extra key": (
        lambda r: r["instances"][0]["item_pool"][_first_pool_id(r)].__setitem__("colour", "red"),
        f"{I0}.item_pool.{{first}}",
        "unexpected ['colour']",
    ),
    "item without a key": (
        lambda r: r["instances"][0]["item_pool"][_first_pool_id(r)].pop("price"),
        f"{I0}.item_pool.{{first}}",
        "missing ['price']",
    ),
    "item id differs from its pool key": _first_item_with("course_id", "C1", "not the pool key"),
    "numeric attribute as a string": _first_item_with("price", "100", "must be an integer"),
    "truth grid with a missing row": (
        lambda r: r["instances"][0]["truth_solution"].pop(),
        f"{I0}.truth_solution",
        "must be a 5x5 grid",
    ),
    "partial grid with a short row": (
        lambda r: r["instances"][0]["partial_solution"][2].pop(),
        f"{I0}.partial_solution",
        "must be a 5x5 grid",
    ),
    "truth id not in pool": (
        lambda r: r["instances"][0]["truth_solution"][0].__setitem__(0, "C99999"),
        f"{I0}.truth_solution[0][0]",
        "not in item_pool",
    ),
    "partial disagrees with truth": (
        lambda r: r["instances"][0]["partial_solution"][0].__setitem__(0, r["instances"][0]["truth_solution"][0][1]),
        f"{I0}.partial_solution[0][0]",
        "but the truth is",
    ),
    "hidden slots out of order": (
        lambda r: r["instances"][1]["hidden_slots"].reverse(),
        "$.instances[1].hidden_slots",
        "row-major",
    ),
    "slot entry missing": (
        lambda r: r["instances"][1]["slots"].pop(),
        "$.instances[1].slots",
        "one entry per hidden cell",
    ),
    "slot truth differs": (
        lambda r: r["instances"][1]["slots"][0].__setitem__("truth_id", r["instances"][1]["slots"][1]["truth_id"]),
        "$.instances[1].slots[0].truth_id",
        "differs from truth_solution",
    ),
    "unknown slot rule": (
        lambda r: r["instances"][0]["slots"][0]["slot_constraints"]["active_rule_names"].append("max_prize"),
        f"{I0}.slots[0].slot_constraints.active_rule_names",
        "did you mean 'max_price'",
    ),
    "missing global rule": (
        lambda r: r["instances"][0]["global_constraints"].pop("total_price_max"),
        f"{I0}.global_constraints.total_price_max",
        "missing",
    ),
    "unknown global rule": (
        lambda r: r["instances"][0]["global_constraints"].__setitem__("total_fun_max", 3),
        f"{I0}.global_constraints.total_fun_max",
        "unknown global rule",
    ),
}

I1 = "$.instances[1]"  # course_r5_c5_h5_b4: slots (2,3) (3,3) (4,0) (4,3) (4,4); (3,3) and (4,0) hold 2 decoys each


def _item(r: dict[str, Any], k: int, item_id: str) -> dict[str, Any]:
    return r["instances"][k]["item_pool"][item_id]


def _truth_item(r: dict[str, Any], k: int, s: int) -> dict[str, Any]:
    return _item(r, k, r["instances"][k]["slots"][s]["truth_id"])


def _truth_total(r: dict[str, Any], k: int, attribute: str) -> int:
    return sum(_item(r, k, i)[attribute] for row in r["instances"][k]["truth_solution"] for i in row)


def _edit_instruction(old: str, new: str) -> Mutation:
    def mutate(r: dict[str, Any]) -> None:
        text = r["instances"][1]["task_instruction"]
        assert old in text
        r["instances"][1]["task_instruction"] = text.replace(old, new)

    return mutate


# loaded silently before: numbers beyond the domain, inconsistent instances, header mismatches
INCONSISTENT: dict[str, tuple[Mutation, str, str]] = {
    "attribute of 2**63 (reset raised OverflowError)": _first_item_with(
        "price", 2**63, "outside the accepted range [100, 500] of course price"
    ),
    "attribute of 2**63 - 1 (the scorer's int64 sum wrapped)": _first_item_with(
        "price", 2**63 - 1, "outside the accepted range"
    ),
    "attribute below the declared range": _first_item_with("credits", 0, "[1, 4]"),
    "negative attribute": _first_item_with("workload", -3, "[1, 8]"),
    "unknown category": _first_item_with("category", "maths", "did you mean 'math'"),
    "unknown teacher": _first_item_with("teacher", "Alice", "not a teacher of the course domain"),
    "empty item pool": (lambda r: r["instances"][0]["item_pool"].clear(), f"{I0}.item_pool", "no items"),
    "global threshold beyond any grid": (
        lambda r: r["instances"][0]["global_constraints"].__setitem__("total_price_max", 2**63),
        f"{I0}.global_constraints.total_price_max",
        "outside [0, 12500]",
    ),
    "negative global threshold": (
        lambda r: r["instances"][0]["global_constraints"].__setitem__("total_credits_min", -1),
        f"{I0}.global_constraints.total_credits_min",
        "outside [0, 100]",
    ),
    "count threshold above the cell count": (
        lambda r: r["instances"][0]["global_constraints"].__setitem__("same_teacher_week_max", 26),
        f"{I0}.global_constraints.same_teacher_week_max",
        "outside [0, 25]",
    ),
    "slot bound beyond the attribute": (
        lambda r: r["instances"][0]["slots"][0]["slot_constraints"].__setitem__("max_price", 2**63),
        f"{I0}.slots[0].slot_constraints.max_price",
        "outside the accepted range [100, 500] of price",
    ),
    "truth breaks its own slot rule": (
        lambda r: _truth_item(r, 1, 2).__setitem__("credits", 2),  # slot (4, 0): min_credits 3
        f"{I1}.slots[2].slot_constraints.min_credits",
        "has credits 2: the truth breaks its own slot rule",
    ),
    "truth breaks a global upper bound": (
        lambda r: r["instances"][1]["global_constraints"].__setitem__(
            "total_price_max", _truth_total(r, 1, "price") - 1
        ),
        f"{I1}.global_constraints.total_price_max",
        "the truth grid breaks this rule: the total price",
    ),
    "truth breaks a global lower bound": (
        lambda r: r["instances"][1]["global_constraints"].__setitem__(
            "total_credits_min", _truth_total(r, 1, "credits") + 1
        ),
        f"{I1}.global_constraints.total_credits_min",
        "the truth grid breaks this rule",
    ),
    "truth breaks a repeat rule": (
        lambda r: r["instances"][1]["global_constraints"].__setitem__("same_category_week_max", 1),
        f"{I1}.global_constraints.same_category_week_max",
        "the same category can appear at most 1 times",
    ),
    "instruction states another global threshold": (
        _edit_instruction("must be at most 7503.", "must be at most 7000."),
        f"{I1}.task_instruction",
        "line 8 (global rule total_price_max) reads '(2) the total price of all courses in the whole grid must be",
    ),
    "instruction states another slot bound": (
        _edit_instruction("slot (4, 0) must have credits at least 3.", "slot (4, 0) must have credits at least 2."),
        f"{I1}.task_instruction",
        "(slot (4, 0) rule min_credits)",
    ),
    "instruction leaves out a slot rule": (
        _edit_instruction("(2) the course in slot (3, 3) must have price at most 400.\n", ""),
        f"{I1}.task_instruction",
        "(slot (3, 3) rule max_price)",
    ),
    "instruction adds a rule": (
        _edit_instruction("list of course ids.", "list of course ids.\n(6) no lab on Mondays."),
        f"{I1}.task_instruction",
        "reads '(6) no lab on Mondays.' after the text the constraints give",
    ),
    "instance H missing from the header": (
        lambda r: r.__setitem__("hidden_slots", [5, 7]),
        f"{I0}.meta.hidden_slots",
        "the file header lists hidden_slots [5, 7]",
    ),
    "instance B missing from the header": (
        lambda r: r.__setitem__("branch_budget", [0, 2]),
        f"{I1}.meta.branch_budget",
        "the file header lists branch_budget [0, 2]",
    ),
    "requested K differs from the header": (
        lambda r: r.__setitem__("candidates_per_slot", 20),
        f"{I0}.meta.requested_candidates_per_slot",
        "candidates_per_slot 20",
    ),
    "slot holds fewer candidates than meta says": (
        lambda r: r["instances"][0]["meta"].__setitem__("candidates_per_slot", 24),
        f"{I0}.slots[0].candidate_ids",
        "holds 25 ids but meta.candidates_per_slot is 24",
    ),
    "decoy also listed as a filter": (
        lambda r: r["instances"][1]["slots"][1]["filter_candidate_ids"].append(
            r["instances"][1]["slots"][1]["decoy_ids"][0]
        ),
        f"{I1}.slots[1].filter_candidate_ids",
        "every candidate id exactly once",
    ),
    "candidate neither truth, decoy nor filter": (
        lambda r: r["instances"][1]["slots"][0]["filter_candidate_ids"].pop(),
        f"{I1}.slots[0].filter_candidate_ids",
        "every candidate id exactly once",
    ),
    "allocated budget differs from the decoys": (
        lambda r: r["instances"][1]["slots"][1].__setitem__("allocated_budget", 3),
        f"{I1}.slots[1].allocated_budget",
        "is 3 but the slot has 2 decoys",
    ),
    "slot without decoys marked as a branch": (
        lambda r: r["instances"][1]["slots"][0].__setitem__("is_branch_slot", True),
        f"{I1}.slots[0].is_branch_slot",
        "exactly when the slot has decoys",
    ),
    "branch ranks out of row-major order": (
        lambda r: r["instances"][1]["slots"][1].__setitem__("branch_rank", 1),
        f"{I1}.slots[1].branch_rank",
        "is 1 but must be 0",
    ),
    "branch slot count": (
        lambda r: r["instances"][1]["meta"].__setitem__("branch_slot_count", 1),
        f"{I1}.meta.branch_slot_count",
        "is 1 but 2 slots have decoys",
    ),
    "branch allocations": (
        lambda r: r["instances"][1]["meta"].__setitem__("branch_budget_allocations", [3, 1]),
        f"{I1}.meta.branch_budget_allocations",
        "the branch slots hold [2, 2] decoys",
    ),
    "branch budget": (
        lambda r: r["instances"][1]["meta"].__setitem__("branch_budget", 8),
        f"{I1}.meta.branch_budget",
        "is 8 but the slots hold 4 decoys",
    ),
    "value of an inactive slot rule": (
        lambda r: r["instances"][1]["slots"][0]["slot_constraints"].__setitem__("max_price", 300),
        f"{I1}.slots[0].slot_constraints.max_price",
        "not listed in active_rule_names",
    ),
    "slot rule listed twice": (
        lambda r: r["instances"][1]["slots"][0]["slot_constraints"]["active_rule_names"].append("min_credits"),
        f"{I1}.slots[0].slot_constraints.active_rule_names",
        "lists 'min_credits' twice",
    ),
    "hidden slot marked not hidden": (  # issue 27 §4: accepted silently
        lambda r: r["instances"][1]["slots"][2].__setitem__("is_hidden", False),
        f"{I1}.slots[2].is_hidden",
        "is false, but every slot is a hidden cell",
    ),
    "instance id of 10 MB": (  # issue 27 §4: accepted silently
        lambda r: r["instances"][0].__setitem__("instance_id", "x" * 10_000_000),
        f"{I0}.instance_id",
        "is 10000000 characters long, more than MAX_INSTANCE_ID_LENGTH = 256",
    ),
    "instance id one character too long": (
        lambda r: r["instances"][1].__setitem__("instance_id", "x" * 257),
        f"{I1}.instance_id",
        "is 257 characters long",
    ),
    "slot constraints at another cell": (
        lambda r: r["instances"][1]["slots"][0]["slot_constraints"].__setitem__("row", 4),
        f"{I1}.slots[0].slot_constraints.row",
        "is 4 but the slot's row is 2",
    ),
}
BROKEN.update(INCONSISTENT)


@pytest.mark.parametrize("case", list(BROKEN))
def test_load_dataset__broken_file_raises_one_error_naming_file_path_and_problem(
    case: str, course_raw: dict[str, Any], tmp_path: Path
) -> None:
    mutate, json_path, problem = BROKEN[case]
    raw = copy.deepcopy(course_raw)
    json_path = json_path.replace("{first}", _first_pool_id(raw))
    mutate(raw)
    path = _write(tmp_path, raw)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    error = caught.value
    assert error.source == str(path.resolve())
    assert error.json_path == json_path
    assert problem in error.problem
    assert str(path.resolve()) in str(error) and json_path in str(error)
    assert not [d for d in loading._CACHE.values() if d.source == str(path.resolve())]


def test_load_dataset__not_json_raises_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "dataset.json"
    path.write_text('{"domain": "course", ')
    with pytest.raises(DatasetError, match="Invalid JSON"):
        load_dataset(path)


def test_load_dataset__nothing_is_cached_for_a_broken_file(course_raw: dict[str, Any], tmp_path: Path) -> None:
    broken = copy.deepcopy(course_raw)
    broken["num_instances"] = 7
    path = _write(tmp_path, broken)
    for _ in range(2):  # the second attempt validates again rather than returning a half-loaded object
        with pytest.raises(DatasetError):
            load_dataset(path)
    _write(tmp_path, course_raw)
    os.utime(path, ns=(1, 1))  # a repaired file is a new cache key even within one mtime tick
    loaded = load_dataset(path)
    assert len(loaded) == len(KEEP)


def test_load_dataset__loads_once_per_process_whatever_the_spelling(course_raw: dict[str, Any], tmp_path: Path) -> None:
    path = _write(tmp_path, course_raw)
    first = load_dataset(path)
    assert load_dataset(str(path)) is first
    assert load_dataset(tmp_path / "." / path.name) is first
    envs = [AceEnv("course", dataset=path) for _ in range(2)]
    assert envs[0].dataset is envs[1].dataset is first
    for env in envs:
        env.reset(options={"instance_index": 1})
    assert envs[0].compiled is envs[1].compiled


def test_forget_loaded_datasets__the_next_load_reads_and_hashes_the_file_again(
    course_raw: dict[str, Any], tmp_path: Path
) -> None:
    path, text = tmp_path / "dataset.json", json.dumps(course_raw)
    path.write_text(text + " ")
    first, first_sha256 = load_dataset(path), instance_module.dataset_sha256(path, "course")
    stamp = path.stat().st_mtime_ns
    with path.open("r+") as stream:  # new bytes in the same file, of the same size and time
        stream.write(" " + text)
    os.utime(path, ns=(stamp, stamp))
    assert load_dataset(path) is first  # a process keeps what it loaded...
    assert instance_module.dataset_sha256(path, "course") == first_sha256
    envs = [AceEnv("course", dataset=path)]
    ace_gym.forget_loaded_datasets()  # ...until told to forget it
    again = load_dataset(path)
    assert again is not first and again.model == first.model
    assert instance_module.dataset_sha256(path, "course") == hashlib.sha256(path.read_bytes()).hexdigest()
    assert envs[0].reset(options={"instance_index": 1})[1]["instance_id"] == first.instance_ids[1]


def test_load_dataset__json_and_json_gz_give_equal_models(course_raw: dict[str, Any], tmp_path: Path) -> None:
    plain = _write(tmp_path, course_raw)
    packed = tmp_path / "dataset.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_dataset(packed).model == load_dataset(plain).model
    assert load_dataset(packed) is not load_dataset(plain)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_bundled_dataset__is_the_published_file_byte_for_byte(domain: str) -> None:
    bundled = instance_module.bundled_dataset_path("5x5", domain)
    raw = gzip.decompress(bundled.read_bytes())
    assert hashlib.sha256(raw).hexdigest() == PUBLISHED_SHA256[bundled.name.removesuffix(".gz")]
    assert len(resolve_dataset("5x5", domain)) == 35
    assert resolve_dataset("5x5", domain).model == load_dataset(REFERENCE_FILES[domain]).model


def test_dataset_model__dumps_the_published_layout() -> None:
    raw = json.loads(REFERENCE_FILES["travel"].read_text())
    dumped = load_dataset(REFERENCE_FILES["travel"]).model.model_dump(mode="json")
    assert dumped == raw
    assert list(dumped["instances"][3]) == list(raw["instances"][3])
    assert list(dumped["instances"][3]["slots"][0]) == list(raw["instances"][3]["slots"][0])


def test_dataset__instance_ids_and_compiled_instances_are_shared() -> None:
    dataset = resolve_dataset("5x5", "meal")
    assert dataset.index_of("meal_r5_c5_h5_b4") == 9
    assert dataset.compiled(9) is dataset.compiled(9)
    assert dataset[9].instance_id == "meal_r5_c5_h5_b4"
    with pytest.raises(ConfigError, match="did you mean 'meal_r5_c5_h5_b4'"):
        dataset.index_of("meal_r5_c5_h5_b4x")


def test_compiled_slot__fields_built_on_first_use_are_the_models_and_kept() -> None:
    dataset = resolve_dataset("5x5", "shopping")
    compiled, model = CompiledInstance(dataset[20], dataset.domain), dataset[20]
    for slot, entry in zip(compiled.slots, model.slots, strict=True):
        assert slot.candidate_ids == tuple(entry.candidate_ids)
        assert slot.item_of_id == {i: compiled.item_index[i] for i in entry.candidate_ids}
        assert slot.candidates.tolist() == list(slot.candidate_items) and not slot.candidates.flags.writeable
        valid = {compiled.item_index[i] for i in [entry.truth_id, *entry.decoy_ids]}
        assert slot.valid_items == frozenset(valid) == frozenset(slot.candidates[slot.slot_valid].tolist())
        assert slot.item_of_id is slot.item_of_id and slot.valid_items is slot.valid_items
    assert compiled.visible_ids == {i for row in model.partial_solution for i in row if i is not None}
    assert compiled.cell_slot.tolist() == list(compiled.cell_slot_list)
    with pytest.raises(AttributeError, match="has no attribute 'candidate_idz'"):
        compiled.slots[0].candidate_idz  # noqa: B018


# -- configuration errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"domain": "coures"}, "domain"),
        ({"domain": None}, "domain"),
        ({"dataset": "5x6"}, "dataset"),
        ({"extra_query_num": -2}, "extra_query_num"),
        ({"extra_query_num": 1.5}, "extra_query_num"),
        ({"extra_query_num": True}, "extra_query_num"),
        ({"extra_query_num": "2"}, "extra_query_num"),
        ({"global_check_alpha": -0.5}, "global_check_alpha"),
        ({"global_check_alpha": "1"}, "global_check_alpha"),
        ({"global_check_alpha": True}, "global_check_alpha"),
        ({"check_include_reason": "yes"}, "check_include_reason"),
        ({"max_query_ids": 0}, "max_query_ids"),
        ({"max_query_fields": 2.0}, "max_query_fields"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_steps": True}, "max_steps"),
        ({"render_mode": "human"}, "render_mode"),
    ],
)
def test_env_config__bad_values_raise_config_error_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    arguments = {"domain": "course", **kwargs}
    with pytest.raises(ConfigError) as caught:
        AceEnv(**arguments)
    assert caught.value.field == field


def test_env_config__suggests_close_names() -> None:
    with pytest.raises(ConfigError, match="did you mean 'course'"):
        AceEnv("coures")
    with pytest.raises(ConfigError, match="did you mean '5x5'"):
        AceEnv("course", dataset="5x55")
    with pytest.raises(ConfigError, match="did you mean 'course'"):
        gym.make("ACE-course-v0", domain="corse")


def test_env_config__dataset_of_another_domain_is_refused() -> None:
    with pytest.raises(ConfigError, match="holds domain 'meal'"):
        AceEnv("course", dataset=REFERENCE_FILES["meal"])


@pytest.mark.parametrize("index", [35, -1, "3", True, 1.0, None])
def test_reset__bad_instance_index_raises_config_error(index: Any) -> None:
    env = AceEnv("course")
    with pytest.raises(ConfigError) as caught:
        env.reset(options={"instance_index": index})
    assert caught.value.field == "instance_index"


@pytest.mark.parametrize("instance_id", ["course_r5_c5_h5_b3", "", None, ["course_r5_c5_h5_b4"]])
def test_reset__unknown_instance_id_raises_config_error(instance_id: Any) -> None:
    env = AceEnv("course")
    with pytest.raises(ConfigError) as caught:
        env.reset(options={"instance_id": instance_id})
    assert caught.value.field == "instance_id"


def test_package__exports_the_loader() -> None:
    assert ace_gym.load_dataset is load_dataset
    assert isinstance(resolve_dataset("5x5", "course"), ace_gym.Dataset)


@pytest.mark.parametrize("payload", [b"not gzip at all", b"\x1f\x8b\x08\x00truncated"])
def test_load_dataset__corrupt_gzip_raises_dataset_error(payload: bytes, tmp_path: Path) -> None:
    path = tmp_path / "dataset.json.gz"
    path.write_bytes(payload)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert caught.value.source == str(path.resolve()) and caught.value.json_path == "$"
    assert "gzip" in caught.value.problem


@pytest.mark.parametrize(
    ("mutate", "json_path"),
    [
        (
            lambda r: r["instances"][0]["item_pool"][_first_pool_id(r)].__setitem__("price", [1]),
            f"{I0}.item_pool.{{first}}.price",
        ),
        (
            lambda r: r["instances"][0]["slots"][0]["slot_constraints"].__setitem__("max_price", None),
            f"{I0}.slots[0].slot_constraints.max_price",
        ),
        (
            lambda r: r["instances"][0]["global_constraints"].__setitem__("total_price_max", 1.5),
            f"{I0}.global_constraints.total_price_max",
        ),
    ],
)
def test_load_dataset__union_fields_report_the_document_path_and_every_accepted_type(
    mutate: Mutation, json_path: str, course_raw: dict[str, Any], tmp_path: Path
) -> None:
    raw = copy.deepcopy(course_raw)
    json_path = json_path.replace("{first}", _first_pool_id(raw))
    mutate(raw)
    with pytest.raises(DatasetError) as caught:
        load_dataset(_write(tmp_path, raw))
    assert caught.value.json_path == json_path  # no pydantic union tags such as ".int"
    assert "valid integer" in caught.value.problem and "valid string" in caught.value.problem


def test_load_dataset__file_without_instances_is_refused(course_raw: dict[str, Any], tmp_path: Path) -> None:
    raw = {**course_raw, "instances": [], "num_instances": 0}
    with pytest.raises(DatasetError) as caught:
        load_dataset(_write(tmp_path, raw))
    assert caught.value.json_path == "$.instances" and "no instances" in caught.value.problem


@pytest.mark.parametrize(
    ("mutate", "json_path", "problem"),
    [
        (lambda r: r.__setitem__("cols", 7), f"{I0}.meta.cols", "file declares 5x7"),
        (
            lambda r: r["instances"][1]["meta"].__setitem__("hidden_slots", 7),  # a value the header lists
            "$.instances[1].meta.hidden_slots",
            "is 7 but the instance has 5 hidden",
        ),
        (
            lambda r: r["instances"][1]["slots"][1]["decoy_ids"].append(r["instances"][1]["slots"][0]["truth_id"]),
            "$.instances[1].slots[1].decoy_ids",
            "not among the slot's candidate_ids",
        ),
        (
            lambda r: r["instances"][1]["slots"][0]["filter_candidate_ids"].append(
                r["instances"][1]["slots"][0]["truth_id"]
            ),
            "$.instances[1].slots[0].filter_candidate_ids",
            "truth id",
        ),
    ],
)
def test_load_dataset__inconsistent_metadata_is_refused(
    mutate: Mutation, json_path: str, problem: str, course_raw: dict[str, Any], tmp_path: Path
) -> None:
    raw = copy.deepcopy(course_raw)
    mutate(raw)
    with pytest.raises(DatasetError) as caught:
        load_dataset(_write(tmp_path, raw))
    assert caught.value.json_path == json_path
    assert problem in caught.value.problem


@pytest.mark.parametrize("alpha", [math.inf, math.nan, -math.inf, 1e308])
def test_env_config__non_finite_global_check_alpha_is_refused(alpha: float) -> None:
    with pytest.raises(ConfigError) as caught:
        AceEnv("course", global_check_alpha=alpha)
    assert caught.value.field == "global_check_alpha"


def test_env_config__numpy_numbers_are_accepted_as_plain_values() -> None:
    env = AceEnv(
        "course",
        extra_query_num=np.int64(2),
        global_check_alpha=np.int32(1),
        max_query_ids=np.int64(3),
        max_query_fields=np.int16(2),
        max_steps=np.int64(9),
    )
    _, info = env.reset(options={"instance_index": np.int64(9)})
    assert info["instance_index"] == 9 and type(info["instance_index"]) is int
    budgets = info["budgets"]
    assert json.loads(json.dumps(budgets)) == budgets  # plain Python numbers, serialisable
    assert (budgets["extra_query_num"], budgets["global_check_alpha"], budgets["max_steps"]) == (2, 1, 9)
    assert budgets["global_check_budget"] == 5


# -- what the published release and the bundled data hold ----------------------------------------


@pytest.mark.parametrize("name", instance_module.BUNDLED_DATASETS)
@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_bundled_dataset__passes_every_consistency_rule(name: str, domain: str) -> None:
    assert len(resolve_dataset(name, domain)) in (35, 54)


def test_accepted_ranges__extend_down_to_the_floors_the_published_decoys_reach() -> None:
    ranges = {d: accepted_ranges(get_domain(d)) for d in DOMAIN_NAMES}
    assert ranges["meal"]["protein"] == (0, 60)  # declared 5-60; published decoys go down to 0
    assert ranges["shopping"]["calories"] == (0, 800)  # declared 50-800; published decoys down to 1
    assert ranges["workforce"]["skill"] == (0, 5)  # declared 1-5; published decoys at 0
    assert ranges["course"] == {"difficulty": (1, 5), "credits": (1, 4), "price": (100, 500), "workload": (1, 8)}
    assert all(low >= 0 for r in ranges.values() for low, _ in r.values())


@pytest.mark.parametrize(
    ("domain", "attribute", "value", "loads"),
    [
        ("meal", "protein", 0, True),
        ("meal", "protein", -1, False),
        ("shopping", "calories", 0, True),
        ("workforce", "skill", -1, False),
        ("travel", "rating", 0, False),
    ],
)
def test_load_dataset__decoy_attributes_are_accepted_down_to_the_floor(
    domain: str, attribute: str, value: int, loads: bool, tmp_path: Path
) -> None:
    raw = json.loads(REFERENCE_FILES[domain].read_text())
    raw["instances"], raw["num_instances"] = [raw["instances"][9]], 1
    slot = next(s for s in raw["instances"][0]["slots"] if s["decoy_ids"])
    raw["instances"][0]["item_pool"][slot["decoy_ids"][0]][attribute] = value
    path = _write(tmp_path, raw)
    if loads:
        assert len(load_dataset(path)) == 1
    else:
        with pytest.raises(DatasetError, match="outside the accepted range"):
            load_dataset(path)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_accepted_extremes__scorer_and_running_totals_agree(domain: str) -> None:
    """Items at the ends of the accepted ranges, thresholds at a grid's exact aggregates: the
    final scorer (array aggregates) and the tools' running totals give the same verdicts."""
    spec = get_domain(domain)
    rng = np.random.default_rng(3)
    record = resolve_dataset("5x5", domain)[34].model_dump(mode="json")  # H15 B19
    ranges = accepted_ranges(spec)
    for item in record["item_pool"].values():
        for name, (low, high) in ranges.items():
            item[name] = int(rng.choice([low, high]))
    for slot in record["slots"]:  # slot rules pass for every candidate: the global rules decide
        for rule in spec.slot_rules:
            if rule.name in slot["slot_constraints"]:
                low, high = ranges[rule.attribute]
                slot["slot_constraints"][rule.name] = high if rule.kind == "max" else low
    compiled = CompiledInstance(Instance.model_validate(record), spec)
    grids = []
    for _ in range(60):
        grid = compiled.initial.copy()
        for slot in compiled.slots:
            grid[slot.cell] = rng.choice(slot.candidates)
        grids.append(grid)
    for rule in compiled.global_rules:  # the first grid sits exactly on every threshold
        record["global_constraints"][rule.name] = aggregate(rule, grids[0], compiled.cols)
    compiled = CompiledInstance(Instance.model_validate(record), spec)
    verdicts = set()
    for grid in grids:
        state = EpisodeState(compiled, ToolConfig())
        for s, slot in enumerate(compiled.slots):
            state.place(s, int(grid[slot.cell]))
        score, reason = evaluate_grid(compiled, grid)
        assert reason == state.global_violation()
        verdicts.add(score)
    assert verdicts == {True, False}


def _names_a_problem(check: Callable[[Callable[[str, str], DatasetError]], None]) -> bool:
    """Whether ``check``, given the ``fail`` of the consistency checks, raises DatasetError."""
    try:
        check(lambda path, problem: DatasetError("dataset.json", path, problem))
    except DatasetError:
        return True
    return False


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_check_truth__the_array_pass_and_the_rule_by_rule_pass_agree_at_every_threshold(domain: str) -> None:
    """Validation checks the truth on the compiled arrays and names a problem rule by rule: both
    give the same verdict with every bound at, one inside and one past the truth's value."""
    spec = get_domain(domain)
    record = resolve_dataset("5x5", domain)[34].model_dump(mode="json")  # H15 B19
    compiled = CompiledInstance(Instance.model_validate(record), spec)
    edits: list[Callable[[dict[str, Any], int], None]] = []
    for rule in compiled.global_rules:
        value = aggregate(rule, compiled.truth, compiled.cols)
        edits.append(
            lambda r, step, name=rule.name, value=value: r["global_constraints"].__setitem__(name, value + step)
        )
    for s, slot in enumerate(compiled.slots):
        for name, attribute, _, _ in slot.rules:
            value = int(compiled.numeric[attribute][compiled.truth[slot.cell]])
            edits.append(
                lambda r, step, s=s, name=name, value=value: r["slots"][s]["slot_constraints"].__setitem__(
                    name, value + step
                )
            )
    verdicts = set()
    for edit in edits:
        for step in (-1, 0, 1):
            edited = copy.deepcopy(record)
            edit(edited, step)
            instance = Instance.model_validate(edited)
            compiled = CompiledInstance(instance, spec)
            passes = validation._truth_passes(compiled)
            assert passes != _names_a_problem(partial(validation._check_truth_by_rule, instance, compiled))
            verdicts.add(passes)
    assert verdicts == {True, False}


def test_check_candidates__the_set_pass_and_the_rule_by_rule_pass_agree() -> None:
    """Validation checks a slot's candidate lists in a few set operations and names a problem
    rule by rule: both give the same verdict on random edits of the lists."""
    instance = resolve_dataset("5x5", "course")[1]  # slots 1 and 2 hold decoys
    rng = np.random.default_rng(5)
    pool_ids = list(instance.item_pool)
    fields = ("candidate_ids", "decoy_ids", "filter_candidate_ids")
    verdicts = set()
    for _ in range(400):
        slot = instance.slots[int(rng.integers(len(instance.slots)))]
        lists = {field: list(getattr(slot, field)) for field in fields}
        for _ in range(int(rng.integers(1, 3))):
            target = lists[fields[int(rng.integers(3))]]
            edit = int(rng.integers(5))
            if edit == 0 and target:  # drop one
                target.pop(int(rng.integers(len(target))))
            elif edit == 1:  # a pool id, maybe a candidate or the truth
                target.append(str(rng.choice([*pool_ids[:3], *slot.candidate_ids[:3], slot.truth_id])))
            elif edit == 2:  # an id not in the pool
                target.append("X000")
            elif edit == 3 and target:  # listed twice
                target.append(target[0])
            else:  # moved to another list
                source = lists[fields[int(rng.integers(1, 3))]]
                if source:
                    target.append(source.pop())
        edited = slot.model_copy(update=lists)
        passes = validation._candidates_well_formed(instance, edited)
        assert passes != _names_a_problem(partial(validation._check_candidates_by_rule, instance, edited))
        verdicts.add(passes)
    assert verdicts == {True, False}


# -- repeated keys -------------------------------------------------------------------------------


def _text_with(raw: dict[str, Any], old: str, new: str, separators: tuple[str, str] = (", ", ": ")) -> str:
    text = json.dumps(raw, indent=2, separators=separators)
    assert old in text
    return text.replace(old, new, 1)


def test_load_dataset__item_id_listed_twice_is_refused(course_raw: dict[str, Any], tmp_path: Path) -> None:
    first = _first_pool_id(course_raw)
    lost = {**course_raw["instances"][0]["item_pool"][first], "price": 111}
    path = tmp_path / "dataset.json"
    path.write_text(_text_with(course_raw, '"item_pool": {', f'"item_pool": {{"{first}": {json.dumps(lost)}, '))
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert caught.value.json_path == f"{I0}.item_pool.{first}"
    assert "appears more than once" in caught.value.problem


@pytest.mark.parametrize("separators", [(", ", ": "), (",", " : ")])
def test_load_dataset__repeated_key_anywhere_is_refused(
    separators: tuple[str, str], course_raw: dict[str, Any], tmp_path: Path
) -> None:
    first = _first_pool_id(course_raw)
    key_end = separators[1]
    cases = {
        f'"course_id"{key_end}"{first}"': (
            f'"course_id"{key_end}"{first}", "price"{key_end}100',
            f"{I0}.item_pool.{first}.price",
        ),
        f'"num_instances"{key_end}2': (f'"num_instances"{key_end}2, "num_instances"{key_end}2', "$.num_instances"),
        f'"total_price_max"{key_end}8222': (
            f'"total_price_max"{key_end}9000, "total_price_max"{key_end}8222',
            f"{I0}.global_constraints.total_price_max",
        ),
    }
    for old, (new, json_path) in cases.items():
        path = tmp_path / "dataset.json"
        path.write_text(_text_with(course_raw, old, new, separators))
        os.utime(path, ns=(hash(old) % 10**9, hash(old) % 10**9))
        with pytest.raises(DatasetError) as caught:
            load_dataset(path)
        assert caught.value.json_path == json_path


def test_load_dataset__quotes_and_colons_inside_strings_are_not_keys(
    course_raw: dict[str, Any], tmp_path: Path
) -> None:
    raw = copy.deepcopy(course_raw)
    raw["instances"][0]["item_pool"][_first_pool_id(raw)]["name"] = 'Logic "A": "B" : 101'
    spaced = tmp_path / "spaced.json"
    spaced.write_text(json.dumps(raw, separators=(",", " \n: ")))
    for path in (_write(tmp_path, raw), spaced):
        assert load_dataset(path)[0].item_pool[_first_pool_id(raw)]["name"] == 'Logic "A": "B" : 101'


def test_load_dataset__published_files_need_no_exact_key_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def exact_pass(data: bytes) -> None:
        raise AssertionError("the cheap screen should settle a file without repeated keys")

    monkeypatch.setattr(repeated_keys, "_first_repeated_key", exact_pass)
    for domain in DOMAIN_NAMES:
        instance_module.parse_dataset(REFERENCE_FILES[domain].read_bytes(), domain)


# -- dataset arguments and file sizes -----------------------------------------------------------


@pytest.mark.parametrize("value", [123, b"5x5", ["5x5"], 5.5, "", "5x5\0"])
def test_env_config__dataset_of_the_wrong_kind_raises_config_error(value: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        AceEnv("course", dataset=value)
    assert caught.value.field == "dataset" and caught.value.value == value
    with pytest.raises(ConfigError) as caught:
        load_dataset(value)
    assert caught.value.field == "path"


def _fifo(folder: Path) -> Path:
    path = folder / "fifo.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda folder: folder / "absent.json", "no such file"),
        (lambda folder: folder, "is a directory"),
        (_fifo, "is not a regular file"),
        (lambda folder: folder / ("x" * 5000), "cannot be opened"),
    ],
)
def test_dataset_path__that_is_no_regular_file_raises_config_error_naming_it(
    make: Callable[[Path], Path], problem: str, tmp_path: Path
) -> None:
    path = make(tmp_path)
    with pytest.raises(ConfigError) as caught:
        AceEnv("course", dataset=path)
    assert caught.value.field == "dataset" and problem in caught.value.problem
    assert str(path) in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        load_dataset(str(path))
    assert caught.value.field == "path" and problem in caught.value.problem and str(path) in str(caught.value)


def test_dataset_path__relative_path_is_shown_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"no such file \\({tmp_path / 'data' / 'x.json'}\\)"):
        resolve_dataset("data/x.json", "course")


def test_load_dataset__size_limit_is_inclusive(
    course_raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, course_raw)
    size = path.stat().st_size
    monkeypatch.setattr(loading, "MAX_DATASET_BYTES", size - 1)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert caught.value.json_path == "$" and f"more than MAX_DATASET_BYTES = {size - 1} bytes" in caught.value.problem
    monkeypatch.setattr(loading, "MAX_DATASET_BYTES", size)
    packed = tmp_path / "dataset.json.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert len(load_dataset(path)) == len(load_dataset(packed)) == len(KEEP)


def test_load_dataset__gzip_bomb_is_abandoned_at_the_limit_without_inflating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loading, "MAX_DATASET_BYTES", 2**20)
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb") as stream:
        for _ in range(64):  # 64 MiB of zeros in about 64 KB
            stream.write(bytes(2**20))
    assert bomb.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError) as caught:
            load_dataset(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.json_path == "$" and "once decompressed" in caught.value.problem
    assert peak < 8 * 2**20  # inflating it whole would hold 64 MiB


def test_load_dataset__one_file_version_is_loaded_once_whatever_path_names_it(
    tmp_path: Path, course_raw: dict[str, Any]
) -> None:
    path = _write(tmp_path, course_raw)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    first = load_dataset(path)
    assert load_dataset(link) is first and load_dataset(str(path)) is first
    assert first.source == str(path.resolve())
    path.write_text(json.dumps(course_raw))  # a new version (size and time change) is loaded again
    assert load_dataset(link) is not first


def test_load_dataset__instance_id_of_max_length_is_accepted(course_raw: dict[str, Any], tmp_path: Path) -> None:
    raw = copy.deepcopy(course_raw)
    raw["instances"][1]["instance_id"] = "x" * instance_module.MAX_INSTANCE_ID_LENGTH
    assert load_dataset(_write(tmp_path, raw)).instance_ids[1] == raw["instances"][1]["instance_id"]

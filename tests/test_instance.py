"""Dataset loading and validation: one typed error per broken file, one load per process."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import ace_gym
from ace_gym import instance as instance_module
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, DatasetError
from ace_gym.instance import load_dataset, resolve_dataset
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
    "item id differs from its pool key": (
        lambda r: r["instances"][0]["item_pool"][_first_pool_id(r)].__setitem__("course_id", "C1"),
        f"{I0}.item_pool.{{first}}.course_id",
        "not the pool key",
    ),
    "numeric attribute as a string": (
        lambda r: r["instances"][0]["item_pool"][_first_pool_id(r)].__setitem__("price", "100"),
        f"{I0}.item_pool.{{first}}.price",
        "must be an integer",
    ),
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
    assert not [key for key in instance_module._CACHE if key[0] == str(path.resolve())]


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


def test_load_dataset__json_and_json_gz_give_equal_models(course_raw: dict[str, Any], tmp_path: Path) -> None:
    plain = _write(tmp_path, course_raw)
    packed = tmp_path / "dataset.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_dataset(packed).model == load_dataset(plain).model
    assert load_dataset(packed) is not load_dataset(plain)


def test_load_dataset__missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_dataset(tmp_path / "absent.json")


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
            lambda r: r["instances"][1]["meta"].__setitem__("hidden_slots", 4),
            "$.instances[1].meta.hidden_slots",
            "5 hidden",
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

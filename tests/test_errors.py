"""Typed errors survive pickling (they cross worker processes and async vector envs intact), and the
argument validators apply one rule everywhere: numpy integers are integers, bools are not."""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ace_gym.errors import (
    ConfigError,
    DatasetError,
    choice,
    did_you_mean,
    flag,
    integer,
    integers,
    number,
    optional_integer,
    probability,
)


@pytest.mark.parametrize(
    "error",
    [ConfigError("domain", "cours", "unknown domain"), DatasetError("file.json", "$.instances[0]", "bad")],
)
def test_typed_errors__round_trip_through_pickle(error: Exception) -> None:
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == str(error)
    assert clone.__dict__ == error.__dict__


def test_did_you_mean__suggests_the_closest_name() -> None:
    assert did_you_mean("cours", ["course", "meal"]) == " (did you mean 'course'?)"
    assert did_you_mean("zzz", ["course"]) == ""


# --------------------------------------------------------------------------------------------
# argument validators


INTEGERS = [0, 7, -3, 2**70, np.int8(5), np.int64(-1), np.uint32(9)]
NOT_INTEGERS = [True, False, np.bool_(True), 1.0, np.float64(2.0), "3", None, [1], float("nan")]


@pytest.mark.parametrize("value", INTEGERS, ids=repr)
def test_integer__accepts_python_and_numpy_integers_as_plain_int(value: Any) -> None:
    checked = integer("count", value)
    assert type(checked) is int and checked == int(value)


@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_integer__refuses_bools_floats_and_strings(value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        integer("count", value)
    assert (raised.value.field, raised.value.problem) == ("count", "must be an integer")


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"minimum": 1}, "must be an integer >= 1"),
        ({"maximum": -1}, "must be an integer <= -1"),
        ({"minimum": 1, "maximum": 3}, "must be an integer in [1, 3]"),
        ({"minimum": 1, "note": "(-1 = unlimited)"}, "must be an integer >= 1 (-1 = unlimited)"),
    ],
)
def test_integer__out_of_range_names_the_range(arguments: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        integer("count", 0, **arguments)
    assert raised.value.problem == problem and raised.value.value == 0


def test_integer__range_ends_are_inclusive() -> None:
    assert integer("count", np.int16(1), minimum=1, maximum=1) == 1


def test_optional_integer__none_passes_and_anything_else_is_an_integer() -> None:
    assert optional_integer("limit", None, minimum=1) is None
    assert optional_integer("limit", np.int32(4), minimum=1) == 4
    with pytest.raises(ConfigError, match=r"must be an integer >= 1 or None"):
        optional_integer("limit", True, minimum=1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, (5,)), (np.int64(5), (5,)), ([1, np.int8(2)], (1, 2)), ((3,), (3,)), (np.arange(2), (0, 1))],
    ids=repr,
)
def test_integers__one_or_a_list_becomes_a_tuple_of_ints(value: Any, expected: tuple[int, ...]) -> None:
    checked = integers("hidden_slots", value, minimum=0)
    assert checked == expected and all(type(v) is int for v in checked)


@pytest.mark.parametrize("value", [[], [True], [1, 2.0], "12", True, None, {1: 2}, [-1]], ids=repr)
def test_integers__empty_lists_bools_and_non_integers_are_refused(value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        integers("hidden_slots", value, minimum=0)
    assert raised.value.field == "hidden_slots" and raised.value.value is value


@pytest.mark.parametrize(
    ("value", "expected"), [(3, 3), (np.int64(3), 3), (0.25, 0.25), (np.float32(0.5), 0.5), (float("inf"), math.inf)]
)
def test_number__keeps_integers_as_int_and_reals_as_float(value: Any, expected: float) -> None:
    checked = number("seconds", value)
    assert checked == expected and type(checked) is type(expected)


@pytest.mark.parametrize(
    ("value", "arguments", "problem"),
    [
        (True, {}, "must be a number"),
        (np.bool_(False), {}, "must be a number"),
        ("1", {}, "must be a number"),
        (float("nan"), {}, "must be a number"),
        (float("inf"), {"finite": True}, "must be a finite number"),
        (0, {"above": 0}, "must be a number > 0"),
        (-0.5, {"minimum": 0, "note": "of seconds"}, "must be a number >= 0 of seconds"),
        (2e9, {"minimum": 0, "maximum": 1e9}, "must be a number in [0, 1e+09]"),
    ],
    ids=repr,
)
def test_number__refusals_name_what_was_expected(value: Any, arguments: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        number("seconds", value, **arguments)
    assert raised.value.problem == problem


@pytest.mark.parametrize("value", [0, 1, 0.5, np.float64(0.1), np.int8(1)])
def test_probability__accepts_numbers_in_the_unit_interval_as_float(value: Any) -> None:
    assert type(probability("rate", value)) is float


@pytest.mark.parametrize("value", [-0.1, 1.01, True, "0.5", float("nan"), None])
def test_probability__refuses_everything_else(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"must be a number in \[0, 1\] \(a probability\)"):
        probability("rate", value)


def test_flag__only_bools_are_flags() -> None:
    assert flag("notice", np.bool_(True)) is True and flag("notice", False) is False
    for value in (1, 0, "true", None):
        with pytest.raises(ConfigError, match="must be true or false"):
            flag("notice", value)


def test_choice__returns_the_value_or_lists_the_choices_with_a_suggestion() -> None:
    assert choice("rng", "numpy", ("numpy", "python")) == "numpy"
    with pytest.raises(ConfigError) as raised:
        choice("rng", "numpi", ("numpy", "python"))
    assert raised.value.problem == "must be one of ['numpy', 'python'] (did you mean 'numpy'?)"
    for value in (["numpy"], None, 3):  # unhashable or not a str: refused, never a TypeError
        with pytest.raises(ConfigError, match=r"must be one of \['numpy', 'python'\]$"):
            choice("rng", value, ("numpy", "python"))


# --------------------------------------------------------------------------------------------
# the call sites: one rule everywhere (they used to disagree on numpy integers and bools)


def _server_config(**settings: Any) -> object:
    """A ServerConfig built from ``settings`` (its module needs no serve extra)."""
    from ace_gym.server.config import ServerConfig

    return ServerConfig(**settings)


def _integer_sites() -> dict[str, Callable[[Any], object]]:
    from ace_gym.envs import AceEnv
    from ace_gym.envs.procedural import GeneratorSource
    from ace_gym.generators import InstanceConfig
    from ace_gym.longbench.samples import SampleConfig
    from ace_gym.longbench.simulator import Behaviour
    from ace_gym.wrappers import ChatAdapter, StepBudget

    return {
        "AceEnv.max_steps": lambda v: AceEnv("course", max_steps=v),
        "AceEnv.extra_query_num": lambda v: AceEnv("course", extra_query_num=v),
        "AceEnv.max_query_ids": lambda v: AceEnv("course", max_query_ids=v),
        "StepBudget.max_turns": lambda v: StepBudget(AceEnv("course"), v),
        "ChatAdapter.max_turns": lambda v: ChatAdapter(AceEnv("course"), max_turns=v),
        "InstanceConfig.rows": lambda v: InstanceConfig("course", v, 5, 3, 2, 25, 0),
        "GeneratorSource.hidden_slots": lambda v: GeneratorSource("course", hidden_slots=[v]),
        "ServerConfig.max_sessions": lambda v: _server_config(max_sessions=v),
        "Behaviour.relax_k": lambda v: Behaviour(relax_k=v),
        "SampleConfig.table_seed": lambda v: SampleConfig(table_seed=v),
    }


def _number_sites() -> dict[str, Callable[[Any], object]]:
    from ace_gym.envs import AceEnv
    from ace_gym.envs.procedural import GeneratorSource
    from ace_gym.wrappers import ToolFailureInjection

    return {
        "ToolFailureInjection.rate": lambda v: ToolFailureInjection(AceEnv("course"), v),
        "AceEnv.global_check_alpha": lambda v: AceEnv("course", global_check_alpha=v),
        "GeneratorSource.time_budget": lambda v: GeneratorSource(
            "course", hidden_slots=3, decoy_budget=2, time_budget=v
        ),
        "ServerConfig.idle_timeout_s": lambda v: _server_config(idle_timeout_s=v),
    }


@pytest.mark.parametrize("site", list(_integer_sites()))
def test_call_sites__integers_accept_numpy_integers_and_refuse_bools(site: str) -> None:
    build = _integer_sites()[site]
    build(np.int64(2))
    with pytest.raises(ConfigError) as raised:
        build(True)
    assert site.endswith(raised.value.field.rsplit(".", 1)[-1])


@pytest.mark.parametrize("site", list(_number_sites()))
def test_call_sites__numbers_accept_numpy_reals_and_refuse_bools_and_nan(site: str) -> None:
    build = _number_sites()[site]
    build(np.float32(0.5))
    for value in (True, float("nan")):
        with pytest.raises(ConfigError) as raised:
            build(value)
        assert site.endswith(raised.value.field.rsplit(".", 1)[-1])

"""The curriculum state: ladders, the schedules' moves, save and restore."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from ace_gym.curriculum import CurriculumState, Level, ladder
from ace_gym.errors import ConfigError
from ace_gym.presets import CURRICULUM_LADDERS, PROCEDURAL_PRESETS

LADDER = [[2, 0], [3, 0], [3, 1], [4, 4]]


def _report_all(state: CurriculumState, outcomes: list[bool], domain: str = "course") -> list[int]:
    """The domain's position after each outcome, every episode played where the state stood."""
    return [state.report(domain, state.position(domain), outcome) for outcome in outcomes]


@pytest.mark.parametrize("variant", list(CURRICULUM_LADDERS))
def test_ladder__default_ladders_use_their_variants_values_easiest_first(variant: str) -> None:
    levels = ladder(variant)
    preset = PROCEDURAL_PRESETS[variant]
    assert all(level.hidden_slots in preset["hidden_slots"] for level in levels)  # type: ignore[operator]
    assert all(level.decoy_budget in preset["decoy_budget"] for level in levels)  # type: ignore[operator]
    assert all(
        a.hidden_slots <= b.hidden_slots and a.decoy_budget <= b.decoy_budget for a, b in itertools.pairwise(levels)
    )
    assert len(set(levels)) == len(levels)


def test_ladder__every_procedural_variant_has_one() -> None:
    assert set(CURRICULUM_LADDERS) == set(PROCEDURAL_PRESETS)


@pytest.mark.parametrize(
    ("levels", "field"),
    [
        ("procedurall", "levels"),
        ([], "levels"),
        ([[1, 0], [1]], "levels[1]"),
        ([[0, 0]], "levels[0][0] (hidden_slots)"),
        ([[1, -1]], "levels[0][1] (decoy_budget)"),
        ([[1, True]], "levels[0][1] (decoy_budget)"),
        (["ab"], "levels[0]"),
        ([[1, 0], [1, 0]], "levels"),
    ],
)
def test_ladder__rejects_malformed_levels_naming_the_field(levels: Any, field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ladder(levels)
    assert raised.value.field == field


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"schedule": "adaptiv"}, "schedule"),
        ({"target_success": 1.5}, "target_success"),
        ({"floor": 0.7}, "floor"),
        ({"window": 0}, "window"),
    ],
)
def test_state__rejects_bad_settings(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        CurriculumState(LADDER, **settings)
    assert raised.value.field == field


def test_adaptive__moves_up_above_the_target_and_down_below_the_floor_once_the_window_is_full() -> None:
    state = CurriculumState(LADDER, target_success=0.6, floor=0.3, window=4)
    assert _report_all(state, [True, True, True]) == [0, 0, 0]  # window not full yet
    assert _report_all(state, [True]) == [1]  # 4/4 > 0.6
    assert _report_all(state, [True, True, False, True]) == [1, 1, 1, 2]  # 3/4 > 0.6, window cleared on the move
    assert _report_all(state, [True, False, False, True]) == [2, 2, 2, 2]  # 2/4: between floor and target
    assert state.outcomes["course"] == [True, False, False, True]
    assert _report_all(state, [False]) == [1]  # the last 4 hold 1 success: 1/4 < 0.3, down
    assert state.level("course") == Level(3, 0)


def test_adaptive__stays_at_the_ends_of_the_ladder() -> None:
    state = CurriculumState(LADDER, window=2)
    assert _report_all(state, [False] * 6) == [0] * 6
    assert _report_all(state, [True] * 12)[-1] == len(LADDER) - 1


def test_linear__moves_up_every_window_outcomes_whatever_they_were() -> None:
    state = CurriculumState(LADDER, schedule="linear", window=2)
    assert _report_all(state, [False, False, True, False, False, True, False, False]) == [0, 1, 1, 2, 2, 3, 3, 3]


def test_custom_schedule__gets_position_window_and_ladder_length() -> None:
    seen = []

    def every_success_up(position: int, window: tuple[bool, ...], levels: int) -> int:
        seen.append((position, window, levels))
        return min(position + 1, levels - 1) if window[-1] else position

    state = CurriculumState(LADDER, schedule=every_success_up, window=3)
    assert _report_all(state, [False, True, False]) == [0, 1, 1]
    assert seen == [(0, (False,), 4), (0, (False, True), 4), (1, (False,), 4)]


def test_custom_schedule__a_position_off_the_ladder_is_a_config_error() -> None:
    state = CurriculumState(LADDER, schedule=lambda position, window, levels: levels)
    with pytest.raises(ConfigError, match="schedule"):
        state.report("course", 0, True)


def test_report__outcomes_of_another_level_count_but_do_not_move_it() -> None:
    state = CurriculumState(LADDER, window=2)
    _report_all(state, [True, True])
    assert state.report("course", 0, False) == 1  # an episode that started before the move
    assert state.outcomes["course"] == [] and state.reported["course"] == 3


def test_report__domains_move_independently() -> None:
    state = CurriculumState(LADDER, window=1)
    _report_all(state, [True, True], domain="meal")
    assert (state.position("meal"), state.position("course")) == (2, 0)


def test_to_dict__round_trips_through_json_mid_run_and_moves_identically() -> None:
    outcomes = [True, True, False, True, True, True, False, False, False, True] * 3
    straight = CurriculumState(LADDER, window=3)
    expected = _report_all(straight, outcomes)
    first = CurriculumState(LADDER, window=3)
    positions = _report_all(first, outcomes[:13])
    restored = CurriculumState.from_dict(json.loads(json.dumps(first.to_dict())))
    assert positions + _report_all(restored, outcomes[13:]) == expected
    assert restored.to_dict() == straight.to_dict()


def test_from_dict__a_custom_schedule_must_be_given_back() -> None:
    def schedule(position: int, window: tuple[bool, ...], levels: int) -> int:
        return position

    saved = CurriculumState(LADDER, schedule=schedule).to_dict()
    assert saved["schedule"] == "custom"
    with pytest.raises(ConfigError, match="custom schedule"):
        CurriculumState.from_dict(saved)
    assert CurriculumState.from_dict(saved, schedule=schedule).schedule is schedule


@pytest.mark.parametrize(
    "change",
    [
        {"domains": []},
        {"domains": {"course": {"position": 9, "outcomes": [], "reported": 0}}},
        {"domains": {"course": {"position": 0, "outcomes": [2], "reported": 1}}},
        {"domains": {"course": {"position": 0, "outcomes": [1] * 99, "reported": 99}}},
        {"domains": {"course": {"position": 0, "outcomes": [], "reported": -1}}},
        {"window": "8"},
    ],
)
def test_from_dict__rejects_what_to_dict_never_writes(change: dict[str, Any]) -> None:
    saved = CurriculumState(LADDER, window=8).to_dict()
    with pytest.raises(ConfigError):
        CurriculumState.from_dict({**saved, **change})

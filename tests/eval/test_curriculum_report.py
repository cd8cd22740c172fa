"""Curriculum reports from episode records: trajectory, success per level, the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ace_gym.eval.curriculum_report import level_trajectory, success_per_level, write_trajectory_plot


def _record(domain: str, level: int | None, score: float, hidden: int = 2, budget: int = 0) -> dict[str, Any]:
    return {"domain": domain, "curriculum_level": level, "hidden_slots": hidden, "decoy_budget": budget, "score": score}


RECORDS = [
    _record("course", 0, 1.0),
    _record("meal", 0, 0.0),
    _record("course", 1, 0.0, 3, 1),
    _record("course", 0, 1.0),
    _record("course", 1, 1.0, 3, 1),
    _record("course", None, 1.0),  # not played under a curriculum
]


def test_level_trajectory__lists_each_domains_levels_in_record_order() -> None:
    assert level_trajectory(RECORDS) == {"course": [0, 1, 0, 1], "meal": [0]}


def test_success_per_level__counts_episodes_and_successes_per_level() -> None:
    assert success_per_level(RECORDS) == {
        "course": {
            0: {"hidden_slots": 2, "decoy_budget": 0, "episodes": 2, "successes": 2, "success_rate": 1.0},
            1: {"hidden_slots": 3, "decoy_budget": 1, "episodes": 2, "successes": 1, "success_rate": 0.5},
        },
        "meal": {0: {"hidden_slots": 2, "decoy_budget": 0, "episodes": 1, "successes": 0, "success_rate": 0.0}},
    }


def test_write_trajectory_plot__writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = write_trajectory_plot(RECORDS, tmp_path / "levels.png")
    assert path.read_bytes().startswith(b"\x89PNG")

"""The attempt loop of one task: pass at the threshold, feedback in between, rewards, the log."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ace_gym.errors import ConfigError
from ace_gym.feedback import Rubric, Submission, feedback_text, grade, item_names
from ace_gym.feedback.rounds import Rounds
from ace_gym.instance import CompiledInstance, resolve_dataset


def _compiled() -> CompiledInstance:
    return resolve_dataset("5x5", "course").compiled(34)  # H = 15, 5 global rules: 20 items


def _rubric(empty_slots: int) -> Rubric:
    compiled = _compiled()
    grid = np.array(compiled.truth)
    for slot in compiled.slots[:empty_slots]:
        grid[slot.cell] = -1
    return grade(compiled, grid)


def test_rounds__a_score_exactly_at_the_threshold_passes() -> None:
    exactly = _rubric(7)  # 7 empty slots and the credits minimum unmet: 12 of 20 items met
    assert (exactly.met_count, exactly.total, exactly.score) == (12, 20, 0.6)
    assert Rounds(max_attempts=2, threshold=0.6).submit(exactly).passed
    assert not Rounds(max_attempts=2, threshold=0.6).submit(_rubric(8)).passed


def test_rounds__feedback_until_the_last_attempt_then_finished() -> None:
    rounds = Rounds(max_attempts=3, threshold=1.0, feedback="names")
    rounds.begin(item_names(_compiled(), range(15), _compiled().global_rules))
    failing = _rubric(2)
    first = rounds.submit(failing)
    assert not first.passed and not first.finished
    assert first.feedback == feedback_text(Submission(failing, 1, 3, 1.0), "names")
    assert rounds.attempt == 2 and rounds.attempts_used == 2
    assert not rounds.submit(failing).finished
    last = rounds.submit(failing)
    assert last.finished and not last.passed and last.feedback is None
    info = rounds.info()
    assert info["scores"] == [failing.score] * 3 and info["attempts_used"] == 3
    assert len(info["rubrics"]) == 3 and len(info["rubrics"][0]) == len(info["rubric_items"]) == 20


def test_rounds__a_pass_ends_the_task_and_att_counts_its_attempt() -> None:
    rounds = Rounds(max_attempts=3, threshold=1.0)
    rounds.submit(_rubric(1))
    verdict = rounds.submit(_rubric(0))
    assert verdict.passed and verdict.finished
    assert rounds.attempts_used == 2 and rounds.info()["passed"]


@pytest.mark.parametrize(
    ("final_reward", "scores_to_pass", "expected"),
    [("final", 1, 1.0), ("pass_discount", 1, 1.0), ("pass_discount", 2, 0.5), ("pass_discount", None, 0.0)],
)
def test_rounds__rewards(final_reward: str, scores_to_pass: int | None, expected: float) -> None:
    rounds = Rounds(max_attempts=2, threshold=1.0, final_reward=final_reward, gamma=0.5)
    for attempt in (1, 2):
        if rounds.submit(_rubric(0 if attempt == scores_to_pass else 1)).finished:
            break
    assert rounds.reward() == expected


def test_rounds__final_reward_is_the_last_strict_score_even_below_the_threshold() -> None:
    rounds = Rounds(max_attempts=1, threshold=1.0, final_reward="final")
    rubric = _rubric(3)
    rounds.submit(rubric)
    assert rounds.reward() == rubric.strict_score == 12 / 20  # 12 valid slots; no rule on an unfilled grid
    assert rounds.info()["scores"] == [rubric.score] and rubric.score > rubric.strict_score


@pytest.mark.parametrize("final_reward", ["final", "pass_discount"])
def test_rounds__an_empty_grid_earns_nothing_though_the_papers_score_pays_its_upper_bounds(final_reward: str) -> None:
    """Issue 29: ``done`` at once used to earn the share of upper bounds an empty grid meets."""
    empty = _rubric(15)
    assert empty.score > 0 and empty.strict_score == 0.0
    rounds = Rounds(max_attempts=1, threshold=empty.score, final_reward=final_reward)
    rounds.submit(empty)
    assert rounds.passed  # at a threshold it reaches, the paper's protocol passes it
    assert rounds.reward() == 0.0 and rounds.strict_scores == [0.0]


def test_rounds__a_pass_at_the_papers_threshold_pays_only_when_its_strict_score_reaches_it() -> None:
    unfilled = Rounds(max_attempts=1, threshold=0.6, final_reward="pass_discount")
    unfilled.submit(_rubric(7))  # 12 of 20 items met, 8 of them slots
    assert unfilled.passed and unfilled.reward() == 0.0
    filled = Rounds(max_attempts=1, threshold=0.6, final_reward="pass_discount")
    filled.submit(_rubric(0))
    assert filled.passed and filled.reward() == 1.0


class _Simulator:
    def __init__(self, text: Any) -> None:
        self.text = text

    def feedback(self, submission: Submission) -> Any:
        return self.text


@pytest.mark.parametrize("text", ["Look again at slot (2, 3).", "Replace C4954.", "", None])
def test_rounds__a_simulator_text_pointing_at_a_cell_is_replaced_by_the_report(text: Any) -> None:
    compiled = _compiled()
    rounds = Rounds(max_attempts=2, threshold=1.0, feedback=_Simulator(text))
    verdict = rounds.submit(_rubric(1), item_ids=compiled.item_ids)
    assert verdict.feedback == feedback_text(Submission(_rubric(1), 1, 2, 1.0), "diagnostic")
    assert rounds.info()["feedback_source"].startswith("template (")


def test_rounds__a_simulator_text_naming_no_cell_is_kept() -> None:
    rounds = Rounds(max_attempts=2, threshold=1.0, feedback=_Simulator("The totals are off; revise."))
    assert rounds.submit(_rubric(1)).feedback == "The totals are off; revise."
    assert rounds.info()["feedback_source"] == "simulator"


@pytest.mark.parametrize(
    "arguments",
    [
        {"max_attempts": 0},
        {"max_attempts": True},
        {"threshold": 1.5},
        {"threshold": float("nan")},
        {"feedback": "verbose"},
        {"feedback": 3},
        {"final_reward": "best"},
        {"gamma": -0.1},
    ],
)
def test_rounds__rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(arguments))):
        Rounds(**arguments)

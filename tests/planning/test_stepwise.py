"""ACE-StepWise-v0: the cut follows APB's rule, the solver's own next calls score 1.0, each fault
class gets its flag, and scoring runs on a copy of the episode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import ConfigError
from ace_gym.planning.knowledge import real_tool_kinds
from ace_gym.planning.stepwise import StepWiseEnv, read_prediction
from ace_gym.planning.trajectory import cut_point


def test_cut_point__lands_after_a_result_an_assistant_call_follows() -> None:
    assert cut_point(1, 0.5) is None
    for total in range(2, 60):
        for ratio in (0.01, 0.25, 0.5, 0.75, 0.99):
            cut = cut_point(total, ratio)
            assert cut is not None and 1 <= cut <= total - 1
    assert cut_point(40, 0.5) == 20 and cut_point(40, 0.75) == 30 and cut_point(4, 0.99) == 3


@pytest.mark.parametrize("position", ["early", "middle", "late", 0.6])
@pytest.mark.parametrize("horizon", [1, 2, 3])
def test_solver_next_calls__score_one(position: str | float, horizon: int) -> None:
    env = StepWiseEnv(position=position, horizon=horizon)
    for seed in range(6):
        observation, _info = env.reset(seed=seed)
        assert observation[-2]["role"] == "tool" and observation[-3]["role"] == "assistant"
        assert observation[-1]["role"] == "user"
        reference = _reference(env, seed)
        _, reward, terminated, _, step_info = env.step(json.dumps([{"tool": c["name"], **c} for c in reference]))
        assert (reward, terminated, step_info["correct"], step_info["exact_match"]) == (1.0, True, True, True)
        assert len(step_info["reference"]) == min(horizon, len(reference))


def _reference(env: StepWiseEnv, seed: int) -> list[dict[str, Any]]:
    """The reference calls of the episode ``seed`` opens (read from a throwaway step)."""
    env.reset(seed=seed)
    reference: list[dict[str, Any]] = env.step([])[4]["reference"]
    env.reset(seed=seed)
    return reference


def _flags(env: StepWiseEnv, seed: int, prediction: Any) -> list[str]:
    env.reset(seed=seed)
    info = env.step(prediction)[4]
    return [flag["cause"] for step in info["flags"] for flag in step]


def test_fault_classes__raise_their_flags() -> None:
    env = StepWiseEnv(domain="course", position="early", horizon=1)
    observation, _info = env.reset(seed=2)
    reference = _reference(env, 2)[0]
    grid = json.loads(next(line for line in observation[1]["content"].splitlines() if line.startswith("[")))
    row, col = next((r, c) for r, cells in enumerate(grid) for c, item in enumerate(cells) if item is not None)
    assert _flags(env, 2, [{"tool": "teleport", "arguments": {}}]) == ["unknown_tool"]
    assert _flags(env, 2, [{"tool": "set_slot", "arguments": {"row": row, "col": col, "id": grid[row][col]}}]) == [
        "prefilled_cell"
    ]
    assert _flags(env, 2, [{"tool": "done", "arguments": {}}]) == ["empty_slots"]
    previous = observation[-3]["tool_calls"][0]["function"]
    repeat = {"tool": previous["name"], "arguments": json.loads(previous["arguments"])}
    assert _flags(env, 2, [repeat]) == ["repeated_call"]
    assert _flags(env, 2, [reference]) == []


def test_distractor_in_the_prediction__is_an_e5() -> None:
    env = StepWiseEnv(domain="shopping", horizon=2, settings=["extraneous"])
    _, info = env.reset(seed=0)
    distractor = next(
        s["function"]["name"] for s in info["tools"] if s["function"]["name"] not in _real_names(env, info)
    )
    reference = _reference(env, 0)
    causes = _flags(env, 0, [reference[0], {"tool": distractor, "arguments": {}}])
    assert causes == ["distractor_tool"]


def _real_names(env: StepWiseEnv, info: dict[str, Any]) -> set[str]:
    return set(real_tool_kinds(info["domain"]))


def test_short_prediction__is_an_e2_unless_it_ends_the_episode() -> None:
    env = StepWiseEnv(domain="travel", horizon=3, position="late")
    reference = _reference(env, 1)
    assert _flags(env, 1, reference[:1]) == ["short_prediction"]
    env.reset(seed=1)
    info = env.step(reference[:1])[4]
    assert info["grades"][-1] == 0.4


def test_scoring__runs_on_a_copy_so_a_destructive_prediction_changes_nothing_after() -> None:
    env = StepWiseEnv(domain="pc_build", horizon=3)
    first = env.reset(seed=4)
    reference = _reference(env, 4)
    env.step([{"tool": "done", "arguments": {}}] * 3)
    assert env.reset(seed=4) == first
    assert env.step(reference)[1] == 1.0


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_reset__same_seed_same_task(domain: str) -> None:
    assert StepWiseEnv(domain=domain).reset(seed=9) == StepWiseEnv(domain=domain).reset(seed=9)


def test_read_prediction__accepts_lists_json_and_tool_call_text() -> None:
    call = {"tool": "get_slot_id", "arguments": {"row": 0, "col": 1}, "thought": "look"}
    expected = [{"name": "get_slot_id", "arguments": {"row": 0, "col": 1}}]
    assert read_prediction([call]) == read_prediction(json.dumps([call])) == expected
    assert read_prediction({"steps": [call]}) == expected
    text = '<tool_call>{"name": "get_slot_id", "arguments": {"row": 0, "col": 1}}</tool_call>'
    assert read_prediction(text) == expected
    assert read_prediction(5) == [] and read_prediction([5]) == [{"name": None, "arguments": 5}]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"horizon": 4}, "horizon"),
        ({"position": "start"}, "position"),
        ({"position": 1.0}, "position"),
        ({"settings": ["broken"]}, "settings"),
        ({"settings": ["brokn"]}, "settings"),
    ],
)
def test_constructor__rejects_bad_arguments(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        StepWiseEnv(**kwargs)
    assert raised.value.field == field


def test_reward__pays_apbs_grade_only_to_a_prediction_naming_the_references_calls() -> None:
    """Issue 29: APB's grade alone paid a bare grid read 1.0 and an empty prediction 0.4; issue
    38: the tool name alone paid a blind guess, and the tool and target a guess on the trajectory's
    shape (the next cell in order)."""
    env = StepWiseEnv(domain="course", position="middle", horizon=1)
    reference = _reference(env, 0)
    for prediction, step_grade in (([{"tool": "get_current_grid_state", "arguments": {}}], 1.0), ("", 0.4)):
        env.reset(seed=0)
        _, reward, _, _, info = env.step(prediction)
        assert (info["step_grade"], reward, info["score"]) == (step_grade, 0.0, 0.0)
    env.reset(seed=0)
    _, reward, _, _, info = env.step([{"tool": reference[0]["name"], "arguments": {}}])  # the right tool, no arguments
    assert info["same_tools"] and not info["same_targets"] and reward == info["score"] == 0.0 < info["step_grade"]
    env.reset(seed=0)
    _, reward, _, _, info = env.step(reference)
    assert info["same_targets"] and reward == info["step_grade"] == info["score"] == 1.0


def test_cut__lands_on_a_decision_a_set_whose_id_the_cells_own_rules_leave_open() -> None:
    """Issue 38: at APB's cut the solver's next call is mostly the next query of its sweep, which
    the trajectory's shape gives away (the next cell not queried yet earned 0.175)."""
    for seed in range(12):
        env = StepWiseEnv(position=("early", "middle", "late")[seed % 3], horizon=1 + seed % 3)
        _, info = env.reset(seed=seed)
        first = _reference(env, seed)[0]
        facts = env._task.facts  # type: ignore[union-attr]
        assert first["name"] == "set_slot"
        cell = (first["arguments"]["row"], first["arguments"]["col"])
        assert len(facts.slot_valid[cell]) >= 3 and 0 < info["chance"] <= 1 / 3


def test_reward__a_guess_on_the_right_cell_earns_nothing_in_expectation() -> None:
    """A set on the reference's cell with another slot-valid id is a wrong guess: it costs
    chance / (1 - chance), so that a uniform guess among the cell's slot-valid candidates earns
    0 on average (the right id earns APB's grade, 1 here)."""
    env = StepWiseEnv(horizon=1)
    for seed in range(6):
        _, info = env.reset(seed=seed)
        reference = _reference(env, seed)[0]
        cell = (reference["arguments"]["row"], reference["arguments"]["col"])
        valid = sorted(env._task.facts.slot_valid[cell])  # type: ignore[union-attr]
        rewards = []
        for item in valid:
            env.reset(seed=seed)
            guess = {"name": "set_slot", "arguments": {**reference["arguments"], "id": item}}
            rewards.append(env.step([guess])[1])
        assert rewards.count(1.0) == 1 and info["chance"] == pytest.approx(1 / len(valid))
        assert sum(rewards) / len(rewards) == pytest.approx(0.0)

"""The rubric: one item per hidden slot, one per global rule, verdicts from the constraint code."""

from __future__ import annotations

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.feedback import SlotState, grade, item_names
from ace_gym.instance import CompiledInstance, resolve_dataset
from ace_gym.scoring import evaluate_grid
from tests.core_helpers import H15_INDEX


def _compiled(domain: str, index: int = H15_INDEX) -> CompiledInstance:
    return resolve_dataset("5x5", domain).compiled(index)


def _with(compiled: CompiledInstance, slot: int, item: int, grid: np.ndarray | None = None) -> np.ndarray:
    out = np.array(compiled.truth if grid is None else grid)
    out[compiled.slots[slot].cell] = item
    return out


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_grade__the_truth_meets_every_item(domain: str) -> None:
    compiled = _compiled(domain)
    rubric = grade(compiled, compiled.truth)
    assert rubric.total == compiled.hidden_count + len(compiled.global_rules)
    assert rubric.score == 1.0 and all(rubric.outcome)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_grade__a_full_score_exactly_when_the_env_would_score_the_grid_1(domain: str) -> None:
    dataset = resolve_dataset("5x5", domain)
    rng = np.random.default_rng(0)
    for index in range(0, len(dataset), 3):
        compiled = dataset.compiled(index)
        grid = np.array(compiled.truth)
        for slot in compiled.slots:  # a random candidate per slot: filters, decoys and truths
            grid[slot.cell] = rng.choice(slot.candidates)
        assert (grade(compiled, grid).score == 1.0) == evaluate_grid(compiled, grid)[0]


def test_grade__an_empty_slot_and_a_filter_are_unmet_slot_items() -> None:
    compiled = _compiled("course")
    filter_item = compiled.item_index[compiled.instance.slots[1].filter_candidate_ids[0]]
    grid = _with(compiled, 1, filter_item, _with(compiled, 0, -1))
    rubric = grade(compiled, grid)
    assert [item.state for item in rubric.slots[:3]] == [SlotState.EMPTY, SlotState.BREAKS_SLOT_RULES, SlotState.VALID]
    assert [item.slot for item in rubric.unmet_slots] == [0, 1]


def test_grade__lower_bounds_are_unmet_until_reached_and_can_be_left_out() -> None:
    compiled = _compiled("course")
    empty = np.array(compiled.initial)
    lower = [item for item in grade(compiled, empty).rules if item.rule.is_lower_bound]
    assert lower and not any(item.met for item in lower)  # the visible cells alone fall short
    without = grade(compiled, empty, lower_bounds=False)
    assert all(not item.rule.is_lower_bound for item in without.rules)


def test_grade__a_decoy_breaks_a_global_item_with_its_measured_value_and_shortfall() -> None:
    compiled = _compiled("course")
    for s, entry in enumerate(compiled.instance.slots):
        for decoy in entry.decoy_ids:
            rubric = grade(compiled, _with(compiled, s, compiled.item_index[decoy]))
            assert all(item.met for item in rubric.slots)  # a decoy passes its slot rules
            broken = rubric.unmet_rules
            assert broken, (s, decoy)
            for item in broken:
                bound, measured = item.rule.bound, item.measured
                assert item.shortfall == (measured - bound if item.rule.kind.upper else bound - measured) > 0


def test_grade__scores_a_subset_of_slots_and_names_items_for_logs() -> None:
    compiled = _compiled("meal")
    rubric = grade(compiled, compiled.initial, slots=[2, 0], lower_bounds=False)
    assert [item.slot for item in rubric.slots] == [2, 0]
    names = item_names(compiled, [2, 0], [item.rule for item in rubric.rules])
    assert names[0] == f"slot ({compiled.slots[2].row}, {compiled.slots[2].col})"
    assert names[2:] == [item.rule.name for item in rubric.rules]
    assert len(names) == len(rubric.outcome)

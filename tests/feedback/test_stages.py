"""Scenario stages: ascending, in reading order; the truth passes every stage; decoys fail where
their broken bound first shows (an upper bound at the stage that breaks it, a lower bound at the end)."""

from __future__ import annotations

import numpy as np
import pytest

from ace_gym.constraints import aggregate
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.feedback import Stage, grade, grade_stage, split_stages, stage_sizes
from ace_gym.instance import CompiledInstance, resolve_dataset


@pytest.mark.parametrize(
    ("hidden", "stages", "sizes"),
    [(1, 5, (1,)), (5, 5, (1, 1, 1, 1, 1)), (7, 5, (1, 1, 1, 2, 2)), (15, 5, (2, 2, 3, 4, 4)), (21, 3, (4, 7, 10))],
)
def test_stage_sizes__ascending_at_least_one_each_summing_to_the_hidden_slots(
    hidden: int, stages: int, sizes: tuple[int, ...]
) -> None:
    assert stage_sizes(hidden, stages) == sizes


def test_stage_sizes__hold_for_every_size() -> None:
    for hidden in range(1, 80):
        for stages in range(1, 12):
            sizes = stage_sizes(hidden, stages)
            assert sum(sizes) == hidden and len(sizes) == min(hidden, stages)
            assert list(sizes) == sorted(sizes) and sizes[0] >= 1


def test_split_stages__reveal_every_hidden_slot_once_in_reading_order() -> None:
    compiled = resolve_dataset("5x5", "travel").compiled(34)
    stages = split_stages(compiled)
    cells = [compiled.slots[s].cell for stage in stages for s in stage.slots]
    assert cells == sorted(cells) and len(cells) == compiled.hidden_count
    assert [stage.final for stage in stages] == [False] * (len(stages) - 1) + [True]


def _stage_grid(compiled: CompiledInstance, grid: np.ndarray, stages: tuple[Stage, ...], upto: int) -> np.ndarray:
    """``grid`` with the slots of the stages after ``upto`` emptied: what the agent has at stage ``upto``."""
    partial = np.array(grid)
    for stage in stages[upto + 1 :]:
        for s in stage.slots:
            partial[compiled.slots[s].cell] = -1
    return partial


def _failing_stages(compiled: CompiledInstance, grid: np.ndarray, stages: tuple[Stage, ...]) -> list[int]:
    return [
        stage.index
        for stage in stages
        if grade_stage(compiled, _stage_grid(compiled, grid, stages, stage.index), stage).score < 1.0
    ]


def _instances(domain: str) -> list[CompiledInstance]:
    dataset = resolve_dataset("5x5", domain)
    return [dataset.compiled(i) for i in range(len(dataset))]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_grade_stage__the_truth_passes_every_stage(domain: str) -> None:
    for compiled in _instances(domain):
        assert _failing_stages(compiled, np.array(compiled.truth), split_stages(compiled)) == []


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_grade_stage__a_decoy_breaking_an_upper_bound_fails_at_its_own_stage(domain: str) -> None:
    checked = 0
    for compiled in _instances(domain):
        stages = split_stages(compiled)
        stage_of = {s: stage for stage in stages for s in stage.slots}
        for s, entry in enumerate(compiled.instance.slots):
            own = stage_of[s]
            for decoy in entry.decoy_ids:
                grid = np.array(compiled.truth)
                grid[compiled.slots[s].cell] = compiled.item_index[decoy]
                failing = _failing_stages(compiled, grid, stages)
                assert not failing or failing[0] >= own.index  # never before the decoy is placed
                partial = _stage_grid(compiled, grid, stages, own.index)
                broken_now = [
                    rule
                    for rule in compiled.global_rules
                    if rule.kind.upper and aggregate(rule, partial, compiled.cols) > rule.bound
                ]
                if broken_now:  # the upper bound is already over when the decoy is placed
                    assert failing[0] == own.index
                    checked += 1
    assert checked >= 10


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_grade_stage__a_decoy_breaking_only_a_lower_bound_fails_only_at_the_final_stage(domain: str) -> None:
    checked = 0
    for compiled in _instances(domain):
        stages = split_stages(compiled)
        for s, entry in enumerate(compiled.instance.slots):
            for decoy in entry.decoy_ids:
                grid = np.array(compiled.truth)
                grid[compiled.slots[s].cell] = compiled.item_index[decoy]
                broken = grade(compiled, grid).unmet_rules
                if broken and all(item.rule.is_lower_bound for item in broken):
                    assert _failing_stages(compiled, grid, stages) == [stages[-1].index]
                    checked += 1
    assert checked >= 5


def test_split_stages__deterministic() -> None:
    compiled = resolve_dataset("5x5", "shopping").compiled(30)
    assert split_stages(compiled) == split_stages(resolve_dataset("5x5", "shopping").compiled(30))
    assert split_stages(compiled, 3) != split_stages(compiled, 5)

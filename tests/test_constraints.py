"""Rule semantics on the published instances: the array aggregates, the running totals of the tools and
the final score agree (each kind on its own: tests/contracts/test_rule_kinds.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ace_gym.constraints import (
    RunningTotals,
    aggregate,
    first_global_violation,
)
from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.instance import CompiledInstance, resolve_dataset
from ace_gym.scoring import evaluate_grid
from ace_gym.tools import EpisodeState, ToolConfig


def _compiled(domain: str, index: int) -> CompiledInstance:
    return resolve_dataset("5x5", domain).compiled(index)


def _random_grid(compiled: CompiledInstance, rng: np.random.Generator, empty_share: float) -> np.ndarray:
    grid = rng.integers(0, len(compiled.items), size=compiled.n_cells).astype(np.int32)
    grid[rng.random(compiled.n_cells) < empty_share] = -1
    return grid


def _totals_of(compiled: CompiledInstance, grid: np.ndarray) -> RunningTotals:
    totals = RunningTotals(compiled.global_rules, compiled.cols)
    for cell, item in enumerate(grid.tolist()):
        if item >= 0:
            totals.add(cell, item)
    return totals


def _assert_totals_match(compiled: CompiledInstance, totals: RunningTotals, grid: np.ndarray) -> None:
    for k, rule in enumerate(compiled.global_rules):
        assert totals.value(k) == aggregate(rule, grid, compiled.cols), rule.name
    complete = bool((grid >= 0).all())
    assert totals.first_violation(complete=complete) == first_global_violation(
        compiled.global_rules, grid, compiled.cols
    )


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize("seed", range(3))
def test_running_totals__agree_with_array_aggregates_on_random_grids(domain: str, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    compiled = _compiled(domain, int(rng.integers(35)))
    for _ in range(20):
        grid = _random_grid(compiled, rng, float(rng.choice([0.0, 0.2, 0.6])))
        _assert_totals_match(compiled, _totals_of(compiled, grid), grid)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize("seed", range(3))
def test_running_totals__agree_after_random_add_replace_remove_sequences(domain: str, seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    compiled = _compiled(domain, int(rng.integers(35)))
    grid = _random_grid(compiled, rng, 0.5)
    totals = _totals_of(compiled, grid)
    for _ in range(300):
        cell, item = int(rng.integers(compiled.n_cells)), int(rng.integers(len(compiled.items)))
        if grid[cell] >= 0 and rng.random() < 0.5:
            totals.replace(cell, int(grid[cell]), item)
            grid[cell] = item
        else:
            if grid[cell] >= 0:
                totals.remove(cell, int(grid[cell]))
                grid[cell] = -1
            if rng.random() < 0.7:
                grid[cell] = item
                totals.add(cell, item)
        _assert_totals_match(compiled, totals, grid)


def test_running_totals__copy_is_independent() -> None:
    compiled = _compiled("travel", 34)
    grid = compiled.truth.copy()
    totals = _totals_of(compiled, grid)
    twin = totals.copy()
    totals.remove(0, int(grid[0]))
    grid[0] = -1
    _assert_totals_match(compiled, totals, grid)
    _assert_totals_match(compiled, twin, compiled.truth)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_episode_state__starts_from_the_initial_totals_whatever_an_earlier_episode_did(domain: str) -> None:
    compiled = _compiled(domain, 34)
    earlier = EpisodeState(compiled, ToolConfig())
    for s, slot in enumerate(compiled.slots):
        earlier.place(s, int(compiled.truth[slot.cell]))
    _assert_totals_match(compiled, earlier.totals, compiled.truth)
    _assert_totals_match(compiled, EpisodeState(compiled, ToolConfig()).totals, compiled.initial)


def test_lower_bound_rules__are_skipped_on_partial_grids() -> None:
    compiled = _compiled("workforce", 34)
    grid = np.full(compiled.n_cells, -1, dtype=np.int32)
    binding = [r for r in compiled.global_rules if r.is_lower_bound and r.bound > 0]
    assert binding, "the test needs a lower bound an empty grid misses"
    assert first_global_violation(compiled.global_rules, grid, compiled.cols) is None
    assert _totals_of(compiled, grid).first_violation(complete=False) is None
    assert _totals_of(compiled, grid).first_violation(complete=True) == binding[0].reason


# -- the 210 published instances ----------------------------------------------------------


def _state_with(compiled: CompiledInstance, grid: np.ndarray) -> EpisodeState:
    state = EpisodeState(compiled, ToolConfig())
    for s, slot in enumerate(compiled.slots):
        state.place(s, int(grid[slot.cell]))
    return state


def _swap_cases(compiled: CompiledInstance) -> list[tuple[str, Any, str]]:
    """(kind, grid, slot reason) for one decoy and one filter per hidden slot that has them."""
    cases = []
    for entry, slot in zip(compiled.instance.slots, compiled.slots, strict=True):
        for kind, ids in (("decoy", entry.decoy_ids), ("filter", entry.filter_candidate_ids)):
            if ids:
                grid = compiled.truth.copy()
                grid[slot.cell] = compiled.item_index[ids[0]]
                cases.append((kind, grid, f"slot ({slot.row}, {slot.col}) violates its slot constraints"))
    return cases


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_published_instances__truth_passes_decoys_break_a_global_rule_filters_a_slot(domain: str) -> None:
    dataset = resolve_dataset("5x5", domain)
    for index in range(len(dataset)):
        compiled = dataset.compiled(index)
        assert evaluate_grid(compiled, compiled.truth) == (True, None), compiled.instance_id
        assert _state_with(compiled, compiled.truth).global_violation() is None
        reasons = {rule.reason for rule in compiled.global_rules}
        for kind, grid, slot_reason in _swap_cases(compiled):
            score, reason = evaluate_grid(compiled, grid)
            assert score is False, (compiled.instance_id, kind)
            if kind == "decoy":
                assert reason in reasons, (compiled.instance_id, reason)
            else:
                assert reason == slot_reason, (compiled.instance_id, reason)
            assert _state_with(compiled, grid).global_violation() == reason  # the tool agrees with the scorer


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_evaluate_grid__reports_empty_cells_changed_visible_cells_and_bad_shapes(domain: str) -> None:
    compiled = _compiled(domain, 7)
    assert evaluate_grid(compiled, compiled.initial) == (False, "solution still contains empty slots")
    grid = compiled.truth.copy()
    visible = int(np.flatnonzero(compiled.cell_slot < 0)[0])
    original = compiled.item_ids[int(grid[visible])]
    grid[visible] = int(compiled.truth[compiled.slots[0].cell])
    row, col = divmod(visible, compiled.cols)
    assert evaluate_grid(compiled, grid) == (False, f"slot ({row}, {col}) is fixed and must remain '{original}'")
    assert evaluate_grid(compiled, compiled.truth[:-1]) == (
        False,
        f"solution shape does not match expected {compiled.rows}x{compiled.cols} grid",
    )


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_global_rules__compile_in_domain_order_with_published_texts(domain: str) -> None:
    compiled = _compiled(domain, 0)
    spec = get_domain(domain)
    assert [r.name for r in compiled.global_rules] == [r.name for r in spec.global_rules]
    instruction = compiled.instance.task_instruction
    for rule in compiled.global_rules:
        assert rule.bound == compiled.instance.global_constraints[rule.name]
        assert rule.reason in instruction, rule.reason

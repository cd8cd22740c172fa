"""The rubric a submission is graded on: one item per hidden slot and one per global rule.

Every verdict comes from the constraint code the tools and the final scoring use: a slot item is
met when its cell holds one of the slot's candidates that passes the slot's own rules
(``CompiledSlot.valid_items``, compiled with :func:`ace_gym.constraints.slot_rule_mask`); a global
item is met when the rule's :func:`ace_gym.constraints.aggregate` over the grid meets its bound
(:meth:`~ace_gym.constraints.CompiledGlobalRule.satisfied` on a complete grid, so a lower bound
counts as unmet until it is reached). Items are weighted uniformly: the score is the share met.

An upper bound is met by an empty grid (nothing chosen costs nothing), so the score pays a grid
nobody filled: AgencyBench's rubric score, kept as :attr:`Rubric.score` for its metrics. The
training reward is :attr:`Rubric.strict_score`, in which a rule counts only once every graded
slot is filled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ace_gym.constraints import CompiledGlobalRule, aggregate
from ace_gym.instance import CompiledInstance


class SlotState(Enum):
    """What a hidden slot holds, as the rubric sees it."""

    EMPTY = "empty"
    BREAKS_SLOT_RULES = "breaks its slot rules"
    VALID = "valid"


@dataclass(frozen=True)
class SlotItem:
    """The rubric item of hidden slot ``slot`` (an index into ``compiled.slots``)."""

    slot: int
    state: SlotState

    @property
    def met(self) -> bool:
        return self.state is SlotState.VALID


@dataclass(frozen=True)
class GlobalItem:
    """The rubric item of one global rule: its ``measured`` aggregate against the rule's bound."""

    rule: CompiledGlobalRule
    measured: int

    @property
    def met(self) -> bool:
        return self.rule.satisfied(self.measured, complete=True)

    @property
    def shortfall(self) -> int:
        """How far the aggregate must move to meet the bound (0 when met)."""
        return self.rule.shortfall(self.measured)


@dataclass(frozen=True)
class Rubric:
    """The graded items of one submission, slots first (hidden-slot order), then rules (domain order)."""

    slots: tuple[SlotItem, ...]
    rules: tuple[GlobalItem, ...]

    @property
    def outcome(self) -> list[bool]:
        """Whether each item is met, slots then rules."""
        return [item.met for item in self.slots] + [item.met for item in self.rules]

    @property
    def met_count(self) -> int:
        return sum(self.outcome)

    @property
    def total(self) -> int:
        return len(self.slots) + len(self.rules)

    @property
    def score(self) -> float:
        """The share of items met (uniform weights), in [0, 1]."""
        return self.met_count / self.total

    @property
    def filled(self) -> bool:
        """Whether every graded slot holds an item (valid or not)."""
        return all(item.state is not SlotState.EMPTY for item in self.slots)

    @property
    def strict_score(self) -> float:
        """The share of items met with the global rules counted as met only on a :attr:`filled`
        grid, in [0, 1]: what the rounds' reward pays. An unfilled grid earns its met slot items
        only, so ``done`` at once earns 0 where :attr:`score` pays the upper bounds it meets."""
        rules = sum(item.met for item in self.rules) if self.filled else 0
        return (sum(item.met for item in self.slots) + rules) / self.total

    @property
    def unmet_slots(self) -> tuple[SlotItem, ...]:
        return tuple(item for item in self.slots if not item.met)

    @property
    def unmet_rules(self) -> tuple[GlobalItem, ...]:
        return tuple(item for item in self.rules if not item.met)


def item_names(compiled: CompiledInstance, slots: Sequence[int], rules: Sequence[CompiledGlobalRule]) -> list[str]:
    """Names of a rubric's items for evaluators' logs, in :attr:`Rubric.outcome` order:
    ``slot (r, c)`` per hidden slot, then each rule's name. Never shown to the agent."""
    return [f"slot ({compiled.slots[s].row}, {compiled.slots[s].col})" for s in slots] + [r.name for r in rules]


def grade(
    compiled: CompiledInstance,
    grid: Sequence[int] | np.ndarray,
    slots: Sequence[int] | None = None,
    *,
    lower_bounds: bool = True,
) -> Rubric:
    """Grade a flat row-major ``grid`` of item indices (-1 = empty) on the items of ``slots``
    (indices into ``compiled.slots``; None = every hidden slot) and of the instance's global
    rules (the upper-bound rules only when ``lower_bounds`` is False)."""
    cells = np.asarray(grid, dtype=np.int64)
    slot_items = []
    for s in range(compiled.hidden_count) if slots is None else slots:
        slot = compiled.slots[s]
        item = int(cells[slot.cell])
        if item < 0:
            state = SlotState.EMPTY
        elif item in slot.valid_items:
            state = SlotState.VALID
        else:
            state = SlotState.BREAKS_SLOT_RULES
        slot_items.append(SlotItem(s, state))
    rules = graded_rules(compiled, lower_bounds)
    return Rubric(tuple(slot_items), tuple(GlobalItem(rule, aggregate(rule, cells, compiled.cols)) for rule in rules))


def cells_of(compiled: CompiledInstance, id_grid: Sequence[Sequence[str | None]]) -> list[int]:
    """An id grid (rows of item ids, None = empty) as the flat grid of item indices :func:`grade` takes."""
    return [-1 if item is None else compiled.item_index[item] for row in id_grid for item in row]


def graded_rules(compiled: CompiledInstance, lower_bounds: bool = True) -> tuple[CompiledGlobalRule, ...]:
    """The global rules a rubric grades: all of them, or the upper-bound ones only."""
    return tuple(rule for rule in compiled.global_rules if lower_bounds or not rule.is_lower_bound)

"""A scenario's stages: one instance's hidden slots split into ascending stages (docs/feedback_rounds.md).

Like an AgencyBench scenario, whose subtasks rise in difficulty and build on earlier results,
stage i fills its own hidden slots, in reading order, and the stages grow in size. A stage is
accepted on its own slots' items plus the global rules that a partial grid can already break —
the upper bounds, measured on the grid as it stands (earlier stages' choices included, later
stages' slots empty), as ACE's own open-prefix check does. Lower bounds join at the final stage,
whose grid is complete. Aggregates only grow as cells fill (attribute values are non-negative),
so the truth passes every stage and an upper bound broken at one stage stays broken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ace_gym.feedback.rubric import Rubric, grade
from ace_gym.instance import CompiledInstance


@dataclass(frozen=True)
class Stage:
    """Stage ``index`` (0-based) of ``count``: the hidden slots it fills (indices into
    ``compiled.slots``, in reading order)."""

    index: int
    count: int
    slots: tuple[int, ...]

    @property
    def final(self) -> bool:
        return self.index == self.count - 1


def stage_sizes(hidden: int, stages: int) -> tuple[int, ...]:
    """Ascending stage sizes summing to ``hidden``: ``min(stages, hidden)`` stages of at least one
    slot each, the rest shared in proportion to 1, 2, 3, ... (largest remainders, later stages
    first on ties). ``(1, 1, 1, 2, 2)`` for 7 slots in 5 stages, ``(2, 2, 3, 4, 4)`` for 15."""
    count = min(stages, hidden)
    rest = hidden - count
    weight_total = count * (count + 1) // 2
    shares = [rest * weight // weight_total for weight in range(1, count + 1)]
    remainders = sorted(range(count), key=lambda i: (-(rest * (i + 1) % weight_total), -i))
    for i in remainders[: rest - sum(shares)]:
        shares[i] += 1
    return tuple(sorted(1 + share for share in shares))


def split_stages(compiled: CompiledInstance, stages: int = 5) -> tuple[Stage, ...]:
    """The instance's hidden slots in reading order, cut into :func:`stage_sizes` stages."""
    order = sorted(range(compiled.hidden_count), key=lambda s: compiled.slots[s].cell)
    sizes = stage_sizes(compiled.hidden_count, stages)
    out, start = [], 0
    for index, size in enumerate(sizes):
        out.append(Stage(index, len(sizes), tuple(order[start : start + size])))
        start += size
    return tuple(out)


def grade_stage(compiled: CompiledInstance, grid: Sequence[int] | np.ndarray, stage: Stage) -> Rubric:
    """The stage's rubric on ``grid``: its slots' items and the upper-bound global rules, plus the
    lower-bound rules at the final stage."""
    return grade(compiled, grid, stage.slots, lower_bounds=stage.final)

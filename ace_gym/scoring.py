"""Final scoring of a grid (docs/compatibility.md §4.3): binary, first failure wins."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ace_gym.constraints import EMPTY_CELLS_REASON, first_global_violation, slot_violation_reason
from ace_gym.instance import CompiledInstance


def evaluate_grid(compiled: CompiledInstance, grid: Sequence[int] | np.ndarray) -> tuple[bool, str | None]:
    """Score a flat row-major grid of item indices (-1 = empty).

    Checks in order: no empty cell; every hidden cell holds one of its candidates that passes its
    slot rules (row-major, first failure); visible cells unchanged; the global rules in domain
    order. Returns ``(True, None)`` or ``(False, reason)`` with the published reason strings.
    """
    cells = np.asarray(grid, dtype=np.int32)
    if cells.shape != (compiled.n_cells,):
        return False, f"solution shape does not match expected {compiled.rows}x{compiled.cols} grid"
    if (cells < 0).any():
        return False, EMPTY_CELLS_REASON
    for slot in compiled.slots:
        if int(cells[slot.cell]) not in slot.valid_items:
            return False, slot_violation_reason(slot.row, slot.col)
    visible = compiled.cell_slot < 0
    changed = np.flatnonzero(visible & (cells != compiled.initial))
    if changed.size:
        row, col = divmod(int(changed[0]), compiled.cols)
        return (
            False,
            f"slot ({row}, {col}) is fixed and must remain '{compiled.item_ids[compiled.initial[changed[0]]]}'",
        )
    reason = first_global_violation(compiled.global_rules, cells, compiled.cols)
    return reason is None, reason


def grid_of_ids(compiled: CompiledInstance, grid: Sequence[int]) -> list[list[str | None]]:
    """A flat index grid as the R x C id grid the published format uses."""
    item_ids, cols = compiled.item_ids, compiled.cols  # locals: read once, not once per cell
    ids = [None if i < 0 else item_ids[i] for i in grid]
    return [ids[start : start + cols] for start in range(0, compiled.rows * cols, cols)]

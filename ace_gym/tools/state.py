"""The mutable state of one episode (grid, running totals, budgets) and the budget configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ace_gym.constraints import EMPTY_CELLS_REASON, RunningTotals, slot_violation_reason
from ace_gym.errors import ConfigError, flag, integer, number
from ace_gym.tools.replies import InstanceTexts, texts_of

if TYPE_CHECKING:
    from ace_gym.instance import CompiledInstance

MAX_GLOBAL_CHECK_ALPHA = 1e9  # larger (or infinite) values would overflow floor(alpha * H)


@dataclass(frozen=True)
class ToolConfig:
    """Budgets and limits, named as in the published benchmark (docs/compatibility.md §3.5).

    ``extra_query_num``: per-slot query budget = active rules + hidden slots + this; -1 unlimited.
    ``global_check_alpha``: global-check budget = floor(alpha * hidden slots); -1 or None unlimited.
    Numpy scalars (e.g. from a sweep) are accepted and stored as plain Python numbers.
    """

    extra_query_num: int = -1
    global_check_alpha: float | None = -1
    check_include_reason: bool = False
    max_query_ids: int = 5
    max_query_fields: int = 5

    def __post_init__(self) -> None:
        set_field = object.__setattr__
        set_field(
            self,
            "extra_query_num",
            integer("extra_query_num", self.extra_query_num, minimum=-1, note="(-1 = unlimited)"),
        )
        if self.global_check_alpha is not None:
            set_field(self, "global_check_alpha", _global_check_alpha(self.global_check_alpha))
        set_field(self, "check_include_reason", flag("check_include_reason", self.check_include_reason))
        for name in ("max_query_ids", "max_query_fields"):
            set_field(self, name, integer(name, getattr(self, name), minimum=1))

    def query_budgets(self, compiled: CompiledInstance) -> list[int | None]:
        """Attribute queries allowed on each hidden slot of ``compiled``, in slot order (None = unlimited)."""
        if self.extra_query_num == -1:
            return [None] * compiled.hidden_count
        common = compiled.hidden_count + self.extra_query_num
        return [slot.rule_count + common for slot in compiled.slots]

    def global_check_budget(self, hidden_slots: int) -> int | None:
        """Global checks allowed per episode; None = unlimited."""
        alpha = self.global_check_alpha
        return None if alpha is None or alpha == -1 else max(0, int(alpha * hidden_slots))


def _global_check_alpha(value: object) -> int | float:
    """-1 (unlimited) or a number in [0, MAX_GLOBAL_CHECK_ALPHA] (NaN refused), as int or float."""
    problem = f"must be a number in [0, {MAX_GLOBAL_CHECK_ALPHA:g}], or -1/None for unlimited"
    try:
        alpha = number("global_check_alpha", value, minimum=-1, maximum=MAX_GLOBAL_CHECK_ALPHA)
    except ConfigError:
        raise ConfigError("global_check_alpha", value, problem) from None
    if -1 < alpha < 0:
        raise ConfigError("global_check_alpha", value, problem)
    return alpha


class EpisodeState:
    """The mutable state of one episode on one compiled instance (never shared between envs).

    ``grid`` is the flat row-major grid of item indices (-1 = empty); ``query_calls[s]`` and
    ``global_calls`` count the budgeted calls made, against ``query_budgets[s]`` and
    ``global_budget`` (None = unlimited); ``texts`` are the instance's shared serialised pieces.
    """

    __slots__ = (
        "compiled",
        "config",
        "empty_cells",
        "global_budget",
        "global_calls",
        "grid",
        "invalid_slots",
        "opened",
        "query_budgets",
        "query_calls",
        "texts",
        "totals",
        "writable",
    )

    def __init__(self, compiled: CompiledInstance, config: ToolConfig) -> None:
        self.compiled = compiled
        self.config = config
        # the hidden slots set_slot may fill (None = all): a staged scenario opens its stages one by
        # one (``opened``: the slots of every stage opened so far) and fixes a stage's slots once
        # it closes (``writable``: the current stage's)
        self.opened: frozenset[int] | None = None
        self.writable: frozenset[int] | None = None
        self.texts: InstanceTexts = texts_of(compiled)
        self.grid: list[int] = list(compiled.initial_grid)
        self.empty_cells = compiled.hidden_count
        self.invalid_slots: set[int] = set()
        self.query_calls = [0] * compiled.hidden_count
        budgets = self.texts.query_budgets.get(config.extra_query_num)
        if budgets is None:  # every episode on the instance with this setting has the same budgets
            budgets = self.texts.query_budgets[config.extra_query_num] = tuple(config.query_budgets(compiled))
        self.query_budgets: tuple[int | None, ...] = budgets
        self.global_calls = 0
        self.global_budget = config.global_check_budget(compiled.hidden_count)
        self.totals: RunningTotals = compiled.initial_totals.copy()

    def place(self, slot_index: int, item: int) -> None:
        """Put ``item`` (-1 to clear) into hidden slot ``slot_index``, keeping totals current."""
        slot, grid = self.compiled.slots[slot_index], self.grid
        cell = slot.cell
        old = grid[cell]
        grid[cell] = item
        if old < 0:
            if item >= 0:
                self.totals.add(cell, item)
                self.empty_cells -= 1
        elif item >= 0:
            self.totals.replace(cell, old, item)
        else:
            self.totals.remove(cell, old)
            self.empty_cells += 1
        if item < 0 or item in slot.valid_items:
            self.invalid_slots.discard(slot_index)
        else:
            self.invalid_slots.add(slot_index)

    def final_violation(self) -> str | None:
        """The reason :func:`ace_gym.scoring.evaluate_grid` gives the current grid (None: it scores
        1), read from the running totals instead of rescanning the grid.

        Same order and texts: an empty cell first, then the first hidden slot (in slot order)
        holding an item that fails its slot rules, then the global rules. Visible cells need no
        check: only :meth:`place` writes the grid, and only into hidden slots.
        """
        if self.empty_cells:
            return EMPTY_CELLS_REASON
        return self.global_violation()

    def global_violation(self) -> str | None:
        """First failure of the global validator on the current (complete) grid, or None."""
        if self.invalid_slots:
            slot = self.compiled.slots[min(self.invalid_slots)]
            return slot_violation_reason(slot.row, slot.col)
        return self.totals.first_violation(complete=True)

"""Certificates: an instance's guarantees re-derived from the instance alone.

:func:`certify` reads only the instance (through the core's :class:`CompiledInstance`, slot-rule
masks, :func:`evaluate_grid` and compiled global rules), never the generator's internals, and
checks:

1. the truth grid scores 1 (every hidden cell slot-valid, every global rule holds);
2. every filter fails its slot rules, every decoy passes them;
3. uniqueness: among all grids whose hidden cells hold slot-valid candidates (the truth plus
   every candidate that passes the slot rules, whatever the file labels it), only the truth grid
   passes every global rule.

Uniqueness is exact. Every non-truth grid has a last (row-major) hidden slot ``j`` that holds a
non-truth candidate ``d``; so it suffices that for every such ``(j, d)`` every choice of
truth-or-alternative in the earlier slots (later slots truth) violates a global rule. The
separable test of :mod:`ace_gym.generators.combinations` proves this in O(components) per pair
for most pairs; the rest go to the exact pruned search.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ace_gym.constraints import Aggregate, components, read
from ace_gym.dataset_schema import Instance
from ace_gym.domains import get_domain
from ace_gym.generators.combinations import breaks_every_combination, every_combination_violates
from ace_gym.instance import CompiledInstance
from ace_gym.scoring import evaluate_grid

CHECKER = "ace_gym.generators.certify"


@dataclass(frozen=True)
class Certificate:
    """What :func:`certify` established; ``holds`` is the conjunction.

    ``truth_unique`` is None when the search hit its node limit (undecided). ``alternatives`` is
    the number of slot-valid non-truth candidates, ``combinations`` = prod(1 + alternatives per
    slot), the grids covered; ``pairs_separable`` / ``pairs_searched`` count how each
    ``(slot, candidate)`` pair was decided.
    """

    truth_valid: bool
    filters_fail_slot_rules: bool
    decoys_pass_slot_rules: bool
    truth_unique: bool | None
    alternatives: int
    combinations: int
    pairs_separable: int
    pairs_searched: int
    problems: tuple[str, ...]

    @property
    def holds(self) -> bool:
        return (
            self.truth_valid
            and self.filters_fail_slot_rules
            and self.decoys_pass_slot_rules
            and bool(self.truth_unique)
        )

    def as_dict(self) -> dict[str, object]:
        """The JSON form stored in ``meta["certificate"]``."""
        record: dict[str, object] = {"checker": CHECKER, "holds": self.holds}
        record.update(asdict(self))
        record["problems"] = list(self.problems)
        return record


class _Components:
    """The compiled global rules as signed components (violated iff value > threshold), read from
    their contribution columns (:func:`ace_gym.constraints.components`); a frequency rule gets one
    component per category that some relevant item holds."""

    def __init__(self, compiled: CompiledInstance, relevant: np.ndarray) -> None:
        columns: list[np.ndarray] = []
        rows: list[int] = []
        thresholds: list[int] = []
        for rule in compiled.global_rules:
            values = rule.contribution.astype(np.int64)
            frequency = rule.kind.aggregate is Aggregate.MOST_FREQUENT
            codes = np.unique(values[relevant]).tolist() if frequency else []
            found = components(rule.kind, rule.bound, codes, compiled.rows)
            for test, parameter, sign in zip(found.tests, found.parameters, found.signs, strict=True):
                column = read(test, values, parameter)
                columns.append(column if sign == 1 else sign * column)
            rows += found.rows
            thresholds += found.thresholds
        self.table = np.stack(columns, axis=1)
        self.rows = np.asarray(rows, dtype=np.int64)
        self.thresholds = np.asarray(thresholds, dtype=np.int64)
        self.cols = compiled.cols

    def at(self, items: np.ndarray, cells: np.ndarray | int) -> np.ndarray:
        """Contribution rows of ``items`` placed in ``cells`` (one cell, or one per item)."""
        out = self.table[items]
        grid_rows = (np.asarray(cells) // self.cols).reshape(-1, 1)
        out[np.broadcast_to((self.rows >= 0) & (self.rows != grid_rows), out.shape)] = 0
        return out


def certify(instance: Instance | CompiledInstance, node_limit: int = 50_000_000) -> Certificate:
    """Check an instance's guarantees from its data alone (see module docstring)."""
    compiled = (
        instance if isinstance(instance, CompiledInstance) else CompiledInstance(instance, get_domain(instance.domain))
    )
    problems: list[str] = []
    truth_valid, reason = evaluate_grid(compiled, compiled.truth)
    if not truth_valid:
        problems.append(f"truth grid fails: {reason}")
    filters_fail = decoys_pass = True
    alternatives: list[list[int]] = []
    for entry, slot in zip(compiled.instance.slots, compiled.slots, strict=True):
        valid_of = dict(zip(slot.candidate_ids, slot.slot_valid.tolist(), strict=True))
        for item_id in entry.filter_candidate_ids:
            if valid_of.get(item_id, False):
                filters_fail = False
                problems.append(f"filter {item_id} passes the rules of slot ({slot.row}, {slot.col})")
        for item_id in entry.decoy_ids:
            if not valid_of.get(item_id, False):
                decoys_pass = False
                problems.append(f"decoy {item_id} fails the rules of slot ({slot.row}, {slot.col})")
        truth_item = int(compiled.truth[slot.cell])
        alternatives.append(sorted(i for i in slot.valid_items if i != truth_item))

    unique, separable, searched = (
        _truth_unique(compiled, alternatives, node_limit, problems)
        if truth_valid
        else (
            False,
            0,
            0,
        )
    )
    return Certificate(
        truth_valid=truth_valid,
        filters_fail_slot_rules=filters_fail,
        decoys_pass_slot_rules=decoys_pass,
        truth_unique=unique,
        alternatives=sum(len(a) for a in alternatives),
        combinations=math.prod(1 + len(a) for a in alternatives),
        pairs_separable=separable,
        pairs_searched=searched,
        problems=tuple(problems),
    )


def _truth_unique(
    compiled: CompiledInstance, alternatives: list[list[int]], node_limit: int, problems: list[str]
) -> tuple[bool | None, int, int]:
    relevant = np.asarray(sorted({*compiled.truth.tolist(), *(i for a in alternatives for i in a)}), dtype=np.int64)
    components = _Components(compiled, relevant)
    truth = compiled.truth.astype(np.int64)
    totals = components.at(truth, np.arange(compiled.n_cells)).sum(axis=0)
    earlier: list[np.ndarray] = []  # delta rows of the earlier slots with alternatives
    slack = np.zeros_like(components.thresholds)
    separable = searched = 0
    unique: bool | None = True
    for slot, options in zip(compiled.slots, alternatives, strict=True):
        if not options:
            continue
        truth_row = components.at(truth[slot.cell : slot.cell + 1], slot.cell)[0]
        rows = components.at(np.asarray(options, dtype=np.int64), slot.cell)
        base = totals - truth_row
        decided = breaks_every_combination(base, slack, components.thresholds, rows)
        separable += int(decided.sum())
        for n in np.flatnonzero(~decided).tolist():
            searched += 1
            verdict = every_combination_violates(base + rows[n], components.thresholds, earlier, node_limit)
            if verdict is None and unique:
                unique = None
                problems.append(
                    f"search limit reached for candidate {compiled.item_ids[options[n]]} at {slot.row, slot.col}"
                )
            elif verdict is False:
                unique = False
                problems.append(
                    f"candidate {compiled.item_ids[options[n]]} at ({slot.row}, {slot.col}) completes a globally "
                    "valid non-truth grid"
                )
                return unique, separable, searched
        delta = rows - truth_row
        earlier.append(delta)
        slack = slack + np.minimum(delta.min(axis=0), 0)
    return unique, separable, searched

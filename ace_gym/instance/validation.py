"""The consistency checks a dataset file must pass beyond its schema (the rules:
:mod:`ace_gym.instance`), run on the validated model; the first problem raises one DatasetError."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import zip_longest
from typing import TYPE_CHECKING

import numpy as np

from ace_gym.constraints import (
    Reading,
    aggregate,
    first_global_violation,
    global_rule_text,
    kind_of,
    slot_rule_text,
    slot_rules_mask,
)
from ace_gym.domains import DOMAINS, Domain, GlobalRule, NumericAttribute
from ace_gym.errors import DatasetError, did_you_mean
from ace_gym.instance.compiled import CompiledInstance, SlotRules, active_slot_rules
from ace_gym.prompts import render_task_instruction
from ace_gym.text import clipped

if TYPE_CHECKING:
    from ace_gym.dataset_schema import DatasetFile, Instance, SlotEntry

MAX_INSTANCE_ID_LENGTH = 256
"""The longest instance id accepted, in characters (the bundled files' longest is 23)."""


def accepted_ranges(domain: Domain) -> dict[str, tuple[int, int]]:
    """``[low, high]`` a dataset file may hold for each numeric attribute of ``domain``.

    The declared range, with its low end extended down to the ``floor`` of any lower-bound
    global rule on the attribute's values (``sum_min``): the published release's targeted decoy
    sampling reaches there.
    """
    ranges = {}
    for attribute in domain.attributes:
        if isinstance(attribute, NumericAttribute):
            floors = [
                rule.floor
                for rule in domain.global_rules
                if rule.attribute == attribute.name and rule.floor is not None and _sums_from_below(rule)
            ]
            ranges[attribute.name] = (min([attribute.low, *floors]), attribute.high)
    return ranges


def _sums_from_below(rule: GlobalRule) -> bool:
    kind = kind_of(rule)
    return not kind.upper and kind.reading is Reading.VALUE


def threshold_limit(rule: GlobalRule, ranges: dict[str, tuple[int, int]], rows: int, cols: int) -> int:
    """The largest aggregate ``rule`` can reach on a ``rows`` x ``cols`` grid of items within
    ``ranges`` (:func:`accepted_ranges`)."""
    high = ranges[rule.attribute][1] if rule.attribute in ranges else 0  # categorical: only counted
    return kind_of(rule).largest_aggregate(high, rows, cols)


def check_dataset(model: DatasetFile, source: str) -> list[CompiledInstance]:
    """Consistency checks the schema cannot express; raises DatasetError on the first problem.
    Returns the instances compiled (:func:`check_instance`)."""
    if model.domain not in DOMAINS:
        raise DatasetError(source, "$.domain", f"unknown domain {model.domain!r}{did_you_mean(model.domain, DOMAINS)}")
    if model.num_instances != len(model.instances):
        raise DatasetError(
            source, "$.num_instances", f"is {model.num_instances} but the file holds {len(model.instances)} instances"
        )
    if not model.instances:
        raise DatasetError(source, "$.instances", "the file holds no instances")
    seen: set[str] = set()
    compiled = []
    for k, instance in enumerate(model.instances):
        where = f"$.instances[{k}]"
        _check_against_header(instance, model, source, where)
        if instance.instance_id in seen:
            raise DatasetError(source, f"{where}.instance_id", f"duplicate instance id {clipped(instance.instance_id)}")
        seen.add(instance.instance_id)
        if instance.domain != model.domain:
            raise DatasetError(source, f"{where}.domain", f"{clipped(instance.domain)} in a {model.domain!r} file")
        compiled.append(check_instance(instance, DOMAINS[model.domain], source, where))
    return compiled


def _check_against_header(instance: Instance, model: DatasetFile, source: str, where: str) -> None:
    """The instance's grid size, hidden-slot count, decoy budget and K as the file header declares them."""
    for name in ("rows", "cols"):
        if getattr(instance.meta, name) != getattr(model, name):
            raise DatasetError(
                source,
                f"{where}.meta.{name}",
                f"is {getattr(instance.meta, name)} but the file declares {model.rows}x{model.cols}",
            )
    for name, listed in (("hidden_slots", model.hidden_slots), ("branch_budget", model.branch_budget)):
        if getattr(instance.meta, name) not in listed:
            raise DatasetError(
                source,
                f"{where}.meta.{name}",
                f"is {getattr(instance.meta, name)} but the file header lists {name} {clipped(listed)}",
            )
    if instance.meta.requested_candidates_per_slot != model.candidates_per_slot:
        raise DatasetError(
            source,
            f"{where}.meta.requested_candidates_per_slot",
            f"is {instance.meta.requested_candidates_per_slot} but the file header has candidates_per_slot "
            f"{model.candidates_per_slot}",
        )


def check_instance(instance: Instance, domain: Domain, source: str, where: str = "$") -> CompiledInstance:
    """Check one instance against its domain and itself (the rules of the module docstring);
    raises DatasetError naming the JSON path of the first problem. Returns the instance
    compiled: once its structure is checked, the rules on its truth are checked on the arrays."""

    def fail(path: str, problem: str) -> DatasetError:
        return DatasetError(source, where + path, problem)

    if len(instance.instance_id) > MAX_INSTANCE_ID_LENGTH:
        raise fail(
            ".instance_id",
            f"is {len(instance.instance_id)} characters long, more than MAX_INSTANCE_ID_LENGTH = {MAX_INSTANCE_ID_LENGTH}",
        )
    _check_shape(instance, fail)
    ranges = accepted_ranges(domain)
    item_table = _check_items(instance, domain, ranges, fail)
    _check_global_thresholds(instance, domain, ranges, fail)
    _check_cells(instance, fail)
    for s, slot in enumerate(instance.slots):
        _check_slot(instance, slot, domain, ranges, _under(fail, f".slots[{s}]"))
    _check_branches(instance, fail)
    compiled = CompiledInstance(instance, domain, item_table)
    slot_rules = [slot.rules for slot in compiled.slots]
    _check_truth(instance, compiled, fail)
    _check_instruction(instance, domain, slot_rules, fail)
    return compiled


Fail = Callable[[str, str], DatasetError]


def _under(fail: Fail, prefix: str) -> Fail:
    """``fail`` for paths below ``prefix``."""

    def fail_under(path: str, problem: str) -> DatasetError:
        return fail(prefix + path, problem)

    return fail_under


def _check_shape(instance: Instance, fail: Fail) -> None:
    """A positive grid size, and truth and partial grids of that size."""
    rows, cols = instance.meta.rows, instance.meta.cols
    if rows <= 0 or cols <= 0:
        raise fail(".meta", f"grid size must be positive, got {rows}x{cols}")
    for name in ("truth_solution", "partial_solution"):
        grid = getattr(instance, name)
        if len(grid) != rows or any(len(row) != cols for row in grid):
            raise fail(f".{name}", f"must be a {rows}x{cols} grid")


def _check_cells(instance: Instance, fail: Fail) -> None:
    """Truth ids from the pool, visible cells showing the truth, and the hidden cells (the null
    cells of the partial grid) listed in row-major order by ``hidden_slots``, ``slots`` and meta."""
    for r, row in enumerate(instance.truth_solution):
        for c, item_id in enumerate(row):
            if item_id not in instance.item_pool:
                raise fail(f".truth_solution[{r}][{c}]", f"id {clipped(item_id)} is not in item_pool")
            shown = instance.partial_solution[r][c]
            if shown is not None and shown != item_id:
                raise fail(f".partial_solution[{r}][{c}]", f"is {clipped(shown)} but the truth is {clipped(item_id)}")
    hidden = [(r, c) for r, row in enumerate(instance.partial_solution) for c, shown in enumerate(row) if shown is None]
    if [(p.row, p.col) for p in instance.hidden_slots] != hidden:
        raise fail(".hidden_slots", "must list the null cells of partial_solution in row-major order")
    if [(s.row, s.col) for s in instance.slots] != hidden:
        raise fail(".slots", "must hold one entry per hidden cell, in hidden_slots order")
    if instance.meta.hidden_slots != len(hidden):
        raise fail(
            ".meta.hidden_slots", f"is {instance.meta.hidden_slots} but the instance has {len(hidden)} hidden cells"
        )


def _check_items(
    instance: Instance, domain: Domain, ranges: dict[str, tuple[int, int]], fail: Fail
) -> dict[str, list[int | str]]:
    """Item keys and types as published; numeric values in range, categorical values declared.
    Returns the pool's values by item key (in the domain's key order), over the items in order."""
    pool = instance.item_pool
    if not pool:
        raise fail(".item_pool", "holds no items")
    columns = _well_formed_columns(pool, domain) or _checked_columns(pool, domain, fail)
    for attribute in domain.attributes:
        name, column = attribute.name, columns[attribute.name]
        if isinstance(attribute, NumericAttribute):
            low, high = ranges[name]
            if low <= min(column) and max(column) <= high:  # type: ignore[operator]
                continue
            item_id, value = next((i, v) for i, v in zip(pool, column, strict=True) if not low <= v <= high)  # type: ignore[operator]
            raise fail(
                f".item_pool.{item_id}.{name}",
                f"is {clipped(value)}, outside the accepted range [{low}, {high}] of {domain.name} {name}",
            )
        allowed = set(attribute.values)
        if allowed.issuperset(column):
            continue
        item_id, value = next((i, v) for i, v in zip(pool, column, strict=True) if v not in allowed)
        raise fail(
            f".item_pool.{item_id}.{name}",
            f"{clipped(value)} is not a {name} of the {domain.name} domain "
            f"({', '.join(attribute.values)}){did_you_mean(str(value), attribute.values)}",
        )
    return columns


def _well_formed_columns(pool: dict[str, dict[str, int | str]], domain: Domain) -> dict[str, list[int | str]] | None:
    """The pool's columns by item key if every item is well formed (exactly the domain's keys,
    the pool key as id, ints for numeric attributes and strings otherwise), else None.
    Whole-column operations only: this is the fast path of every load."""
    items = list(pool.values())
    try:
        columns = {key: [item[key] for item in items] for key in domain.item_keys}
    except KeyError:
        return None
    if set(map(len, items)) != {len(domain.item_keys)} or columns[domain.id_key] != list(pool):
        return None
    numeric = set(domain.numeric_attributes)
    if any(set(map(type, column)) != {int if key in numeric else str} for key, column in columns.items()):
        return None
    return columns


def _checked_columns(pool: dict[str, dict[str, int | str]], domain: Domain, fail: Fail) -> dict[str, list[int | str]]:
    """Item by item: the domain's keys, the pool key as id, the value types; then the columns."""
    keys = set(domain.item_keys)
    numeric = set(domain.numeric_attributes)
    for item_id, item in pool.items():
        if set(item) != keys:
            missing, extra = sorted(keys - set(item)), sorted(set(item) - keys)
            raise fail(
                f".item_pool.{item_id}",
                f"item keys differ from the {domain.name} domain (missing {missing}, unexpected {clipped(extra)})",
            )
        if item[domain.id_key] != item_id:
            raise fail(f".item_pool.{item_id}.{domain.id_key}", f"is {clipped(item[domain.id_key])}, not the pool key")
        for key, value in item.items():
            if (key in numeric) != (type(value) is int):
                kind = "an integer" if key in numeric else "a string"
                raise fail(f".item_pool.{item_id}.{key}", f"must be {kind}, got {clipped(value)}")
    return {key: [item[key] for item in pool.values()] for key in domain.item_keys}


def _check_global_thresholds(
    instance: Instance, domain: Domain, ranges: dict[str, tuple[int, int]], fail: Fail
) -> None:
    """Every global rule of the domain, and no other, with an integer threshold the grid can reach."""
    names = {rule.name for rule in domain.global_rules}
    for name in instance.global_constraints:
        if name != "global" and name not in names:
            raise fail(
                f".global_constraints.{name}", f"unknown global rule for {domain.name}{did_you_mean(name, names)}"
            )
    for rule in domain.global_rules:
        bound = instance.global_constraints.get(rule.name)
        if not isinstance(bound, int):
            raise fail(f".global_constraints.{rule.name}", "missing or not an integer")
        top = threshold_limit(rule, ranges, instance.meta.rows, instance.meta.cols)
        if not 0 <= bound <= top:
            raise fail(
                f".global_constraints.{rule.name}",
                f"is {clipped(bound)}, outside [0, {top}], the values a {rule.kind} aggregate takes on a "
                f"{instance.meta.rows}x{instance.meta.cols} grid",
            )


def _check_slot(
    instance: Instance, slot: SlotEntry, domain: Domain, ranges: dict[str, tuple[int, int]], fail: Fail
) -> None:
    """One hidden slot: marked hidden, its truth and candidate partition, its active rules and their bounds."""
    if not slot.is_hidden:
        raise fail(".is_hidden", "is false, but every slot is a hidden cell")
    _check_candidates(instance, slot, fail)
    if slot.allocated_budget != len(slot.decoy_ids):
        raise fail(".allocated_budget", f"is {slot.allocated_budget} but the slot has {len(slot.decoy_ids)} decoys")
    if slot.is_branch_slot != bool(slot.decoy_ids):
        raise fail(".is_branch_slot", "must be true exactly when the slot has decoys")
    active = _active_rule_names(slot, domain, fail)
    _check_slot_bounds(slot, domain, active, ranges, fail)


def _check_candidates(instance: Instance, slot: SlotEntry, fail: Fail) -> None:
    """The truth among K distinct candidates from the pool, and every candidate other than the
    truth labelled exactly once, as a decoy or a filter candidate."""
    if slot.truth_id != instance.truth_solution[slot.row][slot.col]:
        raise fail(".truth_id", "differs from truth_solution at this cell")
    if not _candidates_well_formed(instance, slot):
        _check_candidates_by_rule(instance, slot, fail)


def _candidates_well_formed(instance: Instance, slot: SlotEntry) -> bool:
    """Whether every rule of :func:`_check_candidates_by_rule` holds, in a few set operations:
    K distinct pool ids, which the truth, the decoys and the filters list exactly once."""
    candidates = set(slot.candidate_ids)
    labelled = [slot.truth_id, *slot.decoy_ids, *slot.filter_candidate_ids]
    return (
        len(labelled) == len(candidates) == len(slot.candidate_ids) == instance.meta.candidates_per_slot
        and set(labelled) == candidates
        and instance.item_pool.keys() >= candidates
    )


def _check_candidates_by_rule(instance: Instance, slot: SlotEntry, fail: Fail) -> None:
    """:func:`_check_candidates` rule by rule: DatasetError naming the first problem."""
    candidates = set(slot.candidate_ids)
    if slot.truth_id not in candidates:
        raise fail(".candidate_ids", "does not contain the truth id")
    if len(candidates) != len(slot.candidate_ids):
        raise fail(".candidate_ids", "contains duplicate ids")
    if len(candidates) != instance.meta.candidates_per_slot:
        raise fail(
            ".candidate_ids",
            f"holds {len(candidates)} ids but meta.candidates_per_slot is {instance.meta.candidates_per_slot}",
        )
    pool = instance.item_pool.keys()
    decoys, filters = set(slot.decoy_ids), set(slot.filter_candidate_ids)
    for field, ids in (("candidate_ids", candidates), ("decoy_ids", decoys), ("filter_candidate_ids", filters)):
        if not pool >= ids:
            stray = next(i for i in getattr(slot, field) if i not in pool)
            raise fail(f".{field}", f"id {clipped(stray)} is not in item_pool")
        if not candidates >= ids:
            stray = next(i for i in getattr(slot, field) if i not in candidates)
            raise fail(f".{field}", f"id {clipped(stray)} is not among the slot's candidate_ids")
        if field != "candidate_ids" and slot.truth_id in ids:
            raise fail(f".{field}", "contains the truth id")
    labelled = len(slot.decoy_ids) + len(slot.filter_candidate_ids)
    if labelled + 1 != len(candidates) or len(decoys | filters) != labelled:
        raise fail(
            ".filter_candidate_ids",
            "the truth, decoy_ids and filter_candidate_ids must list every candidate id exactly once",
        )


def _active_rule_names(slot: SlotEntry, domain: Domain, fail: Fail) -> list[str]:
    """``slot_constraints.active_rule_names``: a non-empty list of distinct slot rules of the domain."""
    active = slot.slot_constraints.get("active_rule_names")
    if not isinstance(active, list) or not active:
        raise fail(".slot_constraints.active_rule_names", "must be a non-empty list of rule names")
    rule_names = [rule.name for rule in domain.slot_rules]
    for k, name in enumerate(active):
        if name not in rule_names:
            raise fail(
                ".slot_constraints.active_rule_names",
                f"unknown slot rule {clipped(name)}{did_you_mean(name, rule_names)}",
            )
        if name in active[:k]:
            raise fail(".slot_constraints.active_rule_names", f"lists {name!r} twice")
    return active


def _check_slot_bounds(
    slot: SlotEntry, domain: Domain, active: list[str], ranges: dict[str, tuple[int, int]], fail: Fail
) -> None:
    """An integer bound within the attribute's range for each active rule; besides them only the
    slot's own ``row`` and ``col``."""
    for rule in domain.slot_rules:
        if rule.name not in active:
            continue
        bound = slot.slot_constraints.get(rule.name)
        if not isinstance(bound, int):
            raise fail(f".slot_constraints.{rule.name}", "missing or not an integer")
        low, high = ranges[rule.attribute]
        if not low <= bound <= high:
            raise fail(
                f".slot_constraints.{rule.name}",
                f"is {clipped(bound)}, outside the accepted range [{low}, {high}] of {rule.attribute}",
            )
    for key, value in slot.slot_constraints.items():
        if key in ("row", "col"):
            if value != getattr(slot, key):
                raise fail(
                    f".slot_constraints.{key}", f"is {clipped(value)} but the slot's {key} is {getattr(slot, key)}"
                )
        elif key != "active_rule_names" and key not in active:
            raise fail(f".slot_constraints.{key}", "is not listed in active_rule_names")


def _check_branches(instance: Instance, fail: Fail) -> None:
    """Branch slots (the slots with decoys) ranked 0..k-1 row-major, and meta's totals of them."""
    allocations: list[int] = []
    for s, slot in enumerate(instance.slots):
        rank = len(allocations) if slot.decoy_ids else None
        if slot.branch_rank != rank:
            raise fail(
                f".slots[{s}].branch_rank",
                f"is {clipped(slot.branch_rank)} but must be {rank} (slots with decoys are ranked 0, 1, ... row-major; "
                "others null)",
            )
        if slot.decoy_ids:
            allocations.append(len(slot.decoy_ids))
    meta = instance.meta
    if meta.branch_slot_count != len(allocations):
        raise fail(".meta.branch_slot_count", f"is {meta.branch_slot_count} but {len(allocations)} slots have decoys")
    if meta.branch_budget_allocations != allocations:
        raise fail(
            ".meta.branch_budget_allocations",
            f"is {clipped(meta.branch_budget_allocations)} but the branch slots hold {clipped(allocations)} decoys",
        )
    if meta.branch_budget != sum(allocations):
        raise fail(".meta.branch_budget", f"is {meta.branch_budget} but the slots hold {sum(allocations)} decoys")


def _check_truth(instance: Instance, compiled: CompiledInstance, fail: Fail) -> None:
    """The truth grid passes every active slot rule and every global rule, by the scorer's code:
    on ``compiled`` (the instance's arrays) at once, and rule by rule to name the first problem."""
    if not _truth_passes(compiled):
        _check_truth_by_rule(instance, compiled, fail)


def _truth_passes(compiled: CompiledInstance) -> bool:
    """Whether the truth grid passes every active slot rule and every global rule of ``compiled``."""
    truth = compiled.truth.tolist()
    return all(truth[slot.cell] in slot.valid_items for slot in compiled.slots) and (
        first_global_violation(compiled.global_rules, compiled.truth, compiled.cols) is None
    )


def _check_truth_by_rule(instance: Instance, compiled: CompiledInstance, fail: Fail) -> None:
    """:func:`_check_truth` rule by rule: DatasetError naming the first rule the truth breaks (the
    slot rules read on the model, the global rules on ``compiled``)."""
    pool = instance.item_pool
    slot_rules = [slot.rules for slot in compiled.slots]
    tested = [
        (s, name, attribute, kind, bound, pool[slot.truth_id][attribute])
        for s, (slot, rules) in enumerate(zip(instance.slots, slot_rules, strict=True))
        for name, attribute, kind, bound in rules
    ]
    kinds = [kind for _, _, _, kind, _, _ in tested]
    bounds = np.asarray([bound for *_, bound, _ in tested], dtype=np.int64)
    values = np.asarray([value for *_, value in tested], dtype=np.int64)
    passed = slot_rules_mask(values, kinds, bounds)
    if not passed.all():
        s, name, attribute, _, bound, value = tested[int(np.flatnonzero(~passed)[0])]
        raise fail(
            f".slots[{s}].slot_constraints.{name}",
            f"is {bound} but the slot's truth {clipped(instance.slots[s].truth_id)} has {attribute} {value}: "
            "the truth breaks its own slot rule",
        )
    for rule in compiled.global_rules:  # the rules the array pass evaluated, so that both passes agree
        if not rule.satisfied(aggregate(rule, compiled.truth, compiled.cols), complete=True):
            raise fail(f".global_constraints.{rule.name}", f"the truth grid breaks this rule: {rule.reason}")


def stated_instruction(instance: Instance, domain: Domain, slot_rules: Sequence[SlotRules] | None = None) -> str:
    """The task instruction ``instance``'s constraints render to (its global bounds and each slot's
    active rules, or ``slot_rules`` per slot when given)."""
    bounds = {rule.name: instance.global_constraints[rule.name] for rule in domain.global_rules}
    rules_of = slot_rules if slot_rules is not None else [active_slot_rules(slot, domain) for slot in instance.slots]
    stated = [
        (slot.row, slot.col, [(attribute, kind, bound) for _, attribute, kind, bound in rules])
        for slot, rules in zip(instance.slots, rules_of, strict=True)
    ]
    return render_task_instruction(domain, instance.meta.rows, instance.meta.cols, bounds, stated)  # type: ignore[arg-type]


def _check_instruction(instance: Instance, domain: Domain, slot_rules: list[SlotRules], fail: Fail) -> None:
    """``task_instruction`` is the text the constraints render to, line for line."""
    expected = stated_instruction(instance, domain, slot_rules)
    if instance.task_instruction == expected:
        return
    have, want = instance.task_instruction.split("\n"), expected.split("\n")
    line = next(n for n, pair in enumerate(zip_longest(have, want)) if pair[0] != pair[1])
    said = clipped(have[line]) if line < len(have) else "nothing"
    if line >= len(want):
        raise fail(".task_instruction", f"line {line + 1} reads {said} after the text the constraints give")
    raise fail(
        ".task_instruction",
        f"line {line + 1} ({_rule_of_line(want[line], instance, domain, slot_rules)}) reads {said} "
        f"but the constraints give {clipped(want[line], 200)}",
    )


def _rule_of_line(line: str, instance: Instance, domain: Domain, slot_rules: list[SlotRules]) -> str:
    """Which rule an instruction line states (a global rule or a slot's rule), if any."""
    for rule in domain.global_rules:
        if global_rule_text(rule, instance.global_constraints[rule.name], domain) in line:  # type: ignore[arg-type]
            return f"global rule {rule.name}"
    for slot, rules in zip(instance.slots, slot_rules, strict=True):
        for name, attribute, kind, bound in rules:
            if slot_rule_text(domain, slot.row, slot.col, attribute, kind, bound) in line:
                return f"slot ({slot.row}, {slot.col}) rule {name}"
    return "no rule: fixed wording"

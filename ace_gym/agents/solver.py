"""The exact solver: solves an ACE instance with an agent's tools and exact reasoning.

It reads the rules from the task instruction, learns what it needs through tool calls only
(attribute queries on hidden slots, item attributes of visible ids), and searches for a
completion that satisfies every rule:

1. per hidden slot, one query per slot rule with the rule itself as the filter (``price <= 400``):
   the intersection is the slot-valid set, with those attributes' values. When every slot-valid
   set is a single item the completion is forced and steps 2-3 are skipped;
2. the attributes of every global rule: for visible items via ``get_D_item_attributes`` batches,
   for each slot's candidates one query per attribute still unknown (``>= -1e9`` / ``not_in []``
   list every candidate);
3. an exact backtracking search over the slot-valid sets, pruning partial assignments with
   bounds (partial sum + least/most the remaining slots can add; repeat and row limits);
4. ``set_slot`` the completion, verify it with the global check when the budget allows, ``done``.

With finite budgets the solver degrades instead of failing: rules whose values it could not
query are left to the global check (the search enumerates completions of the known rules and
tests them while checks remain). ``notes`` records what it could not do: ``missing_queries``
(slots and attributes it had no budget for), ``deferred_rules``, ``verified``, ``exhausted``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from typing import Any, ClassVar

import numpy as np

from ace_gym.agents.base import ScriptedPolicy
from ace_gym.agents.task_view import Script, SlotView, TaskView, ToolCallDict, call, succeeded
from ace_gym.constraints import SLOT_KINDS, Aggregate, contribution_reader, kind_of
from ace_gym.domains import GlobalRule

_EVERYTHING_NUMERIC = -(10**9)
Values = dict[str, Any]  # attribute -> value of one item


def rule_can_bind(rule: GlobalRule, bound: int, cells: int) -> bool:
    """False for rules no grid can violate (a repeat limit >= cells, a count minimum <= 0)."""
    return kind_of(rule).can_bind(bound, cells)


def slot_candidates(view: TaskView, slot: SlotView) -> Generator[ToolCallDict, str, dict[str, Values] | None]:
    """Query ``slot`` once per slot rule, filtered by the rule; returns the slot-valid candidates
    (id -> known attribute values, in stored order), or None when a query failed."""
    valid: dict[str, Values] | None = None
    if not slot.rules:  # no local rule: every candidate is slot-valid
        envelope = yield from call(view.tool("query"), row=slot.row, col=slot.col, **list_all_query(view, "name"))
        return {m["id"]: {} for m in envelope["data"]["matches"]} if succeeded(envelope) else None
    for attribute, kind, bound in slot.rules:
        operator = SLOT_KINDS[kind].query_operator
        envelope = yield from call(
            view.tool("query"), row=slot.row, col=slot.col, field=attribute, operator=operator, value=bound
        )
        if not succeeded(envelope):
            return None
        matches = {m["id"]: m[attribute] for m in envelope["data"]["matches"]}
        if valid is None:
            valid = {item: {attribute: value} for item, value in matches.items()}
        else:
            valid = {item: {**known, attribute: matches[item]} for item, known in valid.items() if item in matches}
    return valid


def learn_values(
    view: TaskView, slot: SlotView, valid: dict[str, Values], attributes: list[str]
) -> Generator[ToolCallDict, str, list[str]]:
    """Query ``slot`` once per attribute of ``attributes`` that some of its candidates ``valid``
    lack, recording each candidate's value into ``valid``. Returns the attributes left unknown
    when a query failed (empty when all are known)."""
    unknown = [a for a in attributes if any(a not in known for known in valid.values())]
    for position, attribute in enumerate(unknown):
        envelope = yield from call(view.tool("query"), row=slot.row, col=slot.col, **list_all_query(view, attribute))
        if not succeeded(envelope):
            return unknown[position:]
        for match in envelope["data"]["matches"]:
            if match["id"] in valid:
                valid[match["id"]][attribute] = match[attribute]
    return []


def list_all_query(view: TaskView, attribute: str) -> dict[str, Any]:
    """Query arguments matching every candidate while returning ``attribute``."""
    if attribute in view.domain.numeric_attributes:
        return {"field": attribute, "operator": ">=", "value": _EVERYTHING_NUMERIC}
    return {"field": attribute, "operator": "not_in", "value": []}


class ExactSolver(ScriptedPolicy):
    """Solves every instance exactly under unlimited budgets (see the module docstring)."""

    name: ClassVar[str] = "solver"

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        cells = view.rows * view.cols
        rules = [
            (rule, bound)
            for rule, bound in view.global_rules()
            if rule_can_bind(rule, bound, cells) and (view.completes_the_grid or kind_of(rule).upper)
        ]
        attributes = list(dict.fromkeys(rule.attribute for rule, _ in rules))

        candidates: list[dict[str, Values]] = []
        for slot in view.slots:
            valid = yield from slot_candidates(view, slot)
            if valid is None:
                notes["error"] = f"slot-rule query failed on slot ({slot.row}, {slot.col})"
                return
            candidates.append(valid)
        if all(len(valid) == 1 for valid in candidates):
            rules = []  # every slot is forced by its own rules: nothing left to reason about
        visible: dict[str, Values] = (yield from visible_values(view, attributes)) if rules else {}
        missing: list[dict[str, Any]] = []
        for slot, valid in zip(view.slots, candidates, strict=True) if rules else ():
            left = yield from learn_values(view, slot, valid, attributes)
            if left:
                missing.append({"row": slot.row, "col": slot.col, "fields": left})
        if missing:
            notes["missing_queries"] = missing

        known_rules: list[tuple[GlobalRule, int]] = []
        deferred: list[tuple[GlobalRule, int]] = []
        for rule, bound in rules:
            complete = all(rule.attribute in v for v in visible.values()) and all(
                rule.attribute in known for slot in candidates for known in slot.values()
            )
            (known_rules if complete else deferred).append((rule, bound))
        if deferred:
            notes["deferred_rules"] = [rule.name for rule, _ in deferred]

        checks_left = view.global_check_budget
        placed: dict[tuple[int, int], str] = {}
        tried = 0
        for assignment in search(view, visible, candidates, known_rules):
            tried += 1
            for position, (slot, item) in enumerate(zip(view.slots, assignment, strict=True)):
                if placed.get(slot.cell) != item:
                    envelope = yield from call("set_slot", row=slot.row, col=slot.col, id=item)
                    if not succeeded(envelope):
                        notes["error"] = f"set_slot failed on slot ({slot.row}, {slot.col}): {envelope.get('messages')}"
                        return
                    placed[slot.cell] = item
                    view.known[item] = candidates[position][item]
            if checks_left == 0:
                notes["verified"] = False
                if deferred:
                    notes["exhausted"] = "global checks"
                break
            envelope = yield from call(view.tool("global_check"))
            if not succeeded(envelope):
                notes["verified"] = False
                notes["exhausted"] = "global checks"
                break
            if checks_left is not None:
                checks_left -= 1
            if envelope["data"]["is_valid"]:
                notes["verified"] = True
                break
        else:
            notes["exhausted"] = "candidates"
        notes["completions_tried"] = tried


def visible_values(view: TaskView, attributes: list[str]) -> Generator[ToolCallDict, str, dict[str, Values]]:
    """Attribute values of every visible item, in batches of the tool's id and field limits; items
    whose values the agent already knows (``view.known``) are not asked about again."""
    values: dict[str, Values] = {item: dict(view.known.get(item, {})) for item in dict.fromkeys(view.visible_ids)}
    ids = [item for item, known in values.items() if any(a not in known for a in attributes)]
    for start in range(0, len(ids), view.max_query_ids):
        batch = ids[start : start + view.max_query_ids]
        for field_start in range(0, len(attributes), view.max_query_fields):
            fields = attributes[field_start : field_start + view.max_query_fields]
            envelope = yield from call(view.tool("item_attributes"), ids=batch, field=fields)
            if not succeeded(envelope):
                continue
            for item, found in envelope["data"]["items"].items():
                values[item].update(found if len(fields) > 1 else {fields[0]: found})
    return values


def search(
    view: TaskView,
    visible: Mapping[str, Values],
    candidates: list[dict[str, Values]],
    rules: list[tuple[GlobalRule, int]],
) -> Iterator[tuple[str, ...]]:
    """Every completion (one id per hidden slot, in slot order) that satisfies ``rules``.

    Depth-first over slots with the fewest candidates first. Sum and count rules prune with the
    least / most the unassigned slots can still add; repeat limits prune as soon as a value is
    over its limit; row-sum limits prune per row with the least the row can still add; item caps
    filter candidates up front.
    """
    slot_rows = [slot.row for slot in view.slots]
    by_aggregate: dict[Aggregate, list[tuple[int, GlobalRule, int]]] = {how: [] for how in Aggregate}
    for k, (rule, bound) in enumerate(rules):
        by_aggregate[kind_of(rule).aggregate].append((k, rule, bound))
    sums, repeats = by_aggregate[Aggregate.TOTAL], by_aggregate[Aggregate.MOST_FREQUENT]
    row_sums, caps = by_aggregate[Aggregate.LARGEST_ROW_TOTAL], by_aggregate[Aggregate.LARGEST]
    upper = {k: kind_of(rule).upper for k, rule, _ in sums}
    readers = {rule.name: contribution_reader(rule) for rule, _ in rules}

    def contribution(rule: GlobalRule, values: Values) -> Any:
        return readers[rule.name](values[rule.attribute])

    options: list[list[str]] = []
    for slot_candidates_ in candidates:
        ids = [
            item
            for item, values in slot_candidates_.items()
            if all(contribution(rule, values) <= bound for _, rule, bound in caps)
        ]
        options.append(ids)
    if any(not ids for ids in options):
        return
    order = sorted(range(len(options)), key=lambda s: len(options[s]))

    def value(slot: int, item: str, rule: GlobalRule) -> Any:
        return contribution(rule, candidates[slot][item])

    # totals of the visible cells
    sum_totals = {k: sum(contribution(rule, visible[i]) for i in view.visible_ids) for k, rule, _ in sums}
    repeat_counts: dict[int, dict[Any, int]] = {}
    for k, rule, _ in repeats:
        counts: dict[Any, int] = {}
        for item in view.visible_ids:
            counts[visible[item][rule.attribute]] = counts.get(visible[item][rule.attribute], 0) + 1
        repeat_counts[k] = counts
    row_totals = {
        k: [
            sum(contribution(rule, visible[item]) for item in view.grid[r] if item is not None)
            for r in range(view.rows)
        ]
        for k, rule, _ in row_sums
    }
    if any(max(counts.values(), default=0) > bound for (k, _, bound) in repeats for counts in [repeat_counts[k]]):
        return

    # least / most the slots from depth d on can add, per sum rule and per row-sum rule
    depth_count = len(order)
    rest_min = {k: [0] * (depth_count + 1) for k, _, _ in sums}
    rest_max = {k: [0] * (depth_count + 1) for k, _, _ in sums}
    rest_row_min = {k: [[0] * view.rows for _ in range(depth_count + 1)] for k, _, _ in row_sums}
    for depth in range(depth_count - 1, -1, -1):
        s = order[depth]
        for k, rule, _ in sums:
            contributions = [value(s, item, rule) for item in options[s]]
            rest_min[k][depth] = rest_min[k][depth + 1] + min(contributions)
            rest_max[k][depth] = rest_max[k][depth + 1] + max(contributions)
        for k, rule, _ in row_sums:
            row_min = list(rest_row_min[k][depth + 1])
            row_min[slot_rows[s]] += min(value(s, item, rule) for item in options[s])
            rest_row_min[k][depth] = row_min

    def feasible(depth: int) -> bool:
        for k, _, bound in sums:
            if upper[k] and sum_totals[k] + rest_min[k][depth] > bound:
                return False
            if not upper[k] and sum_totals[k] + rest_max[k][depth] < bound:
                return False
        for k, _, bound in row_sums:
            rows_min = rest_row_min[k][depth]
            if any(total + least > bound for total, least in zip(row_totals[k], rows_min, strict=True)):
                return False
        return True

    chosen: list[str] = [""] * len(options)

    def descend(depth: int) -> Iterator[tuple[str, ...]]:
        if not feasible(depth):
            return
        if depth == depth_count:
            yield tuple(chosen)
            return
        s = order[depth]
        row = slot_rows[s]
        for item in options[s]:
            over = False
            for k, rule, _ in sums:
                sum_totals[k] += value(s, item, rule)
            for k, rule, bound in repeats:
                key = candidates[s][item][rule.attribute]
                repeat_counts[k][key] = repeat_counts[k].get(key, 0) + 1
                over = over or repeat_counts[k][key] > bound
            for k, rule, _ in row_sums:
                row_totals[k][row] += value(s, item, rule)
            if not over:
                chosen[s] = item
                yield from descend(depth + 1)
            for k, rule, _ in sums:
                sum_totals[k] -= value(s, item, rule)
            for k, rule, _ in repeats:
                repeat_counts[k][candidates[s][item][rule.attribute]] -= 1
            for k, rule, _ in row_sums:
                row_totals[k][row] -= value(s, item, rule)

    yield from descend(0)

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

import dataclasses
from collections.abc import Callable, Generator, Iterator, Mapping
from functools import partial
from typing import Any, ClassVar

import numpy as np

from ace_gym.agents.base import ScriptedPolicy
from ace_gym.agents.task_view import (
    Script,
    SlotView,
    TaskTextError,
    TaskView,
    ToolCallDict,
    call,
    calls,
    read_task,
    succeeded,
)
from ace_gym.constraints import SLOT_KINDS, Aggregate, contribution_reader, kind_of
from ace_gym.domains import GlobalRule

_EVERYTHING_NUMERIC = -(10**9)
Values = dict[str, Any]  # attribute -> value of one item
Gathered = tuple[dict[str, Values], list[dict[str, Values]], list[tuple[GlobalRule, int]]]
"""What a solver knows before its search: visible items' values, each slot's slot-valid
candidates with their values, and the global rules to satisfy."""
Placer = Callable[[TaskView, list[dict[str, Values]], Iterator[tuple[str, ...]], bool, dict[str, Any]], Script]
"""Step 4 of a solver: ``(view, candidates, completions, deferred, notes) -> script``."""


def rule_can_bind(rule: GlobalRule, bound: int, cells: int) -> bool:
    """False for rules no grid can violate (a repeat limit >= cells, a count minimum <= 0)."""
    return kind_of(rule).can_bind(bound, cells)


def binding_rules(view: TaskView) -> list[tuple[GlobalRule, int]]:
    """The global rules with their bounds that some grid of ``view``'s size can break."""
    cells = view.rows * view.cols
    return [(rule, bound) for rule, bound in view.global_rules() if rule_can_bind(rule, bound, cells)]


def _opened_stage(envelope: Mapping[str, Any], info: Mapping[str, Any], known: dict[str, Values]) -> TaskView | None:
    """The task of the scenario stage a ``done`` reply opens, or None when it opens none (feedback
    on a failed attempt, the episode's end, a text without a grid)."""
    if not succeeded(envelope) or not isinstance(envelope.get("messages"), str):
        return None
    try:
        stage = read_task(envelope["messages"], info, known)
    except TaskTextError:
        return None
    return stage if stage.slots else None


def slot_candidates(view: TaskView, slot: SlotView) -> Generator[ToolCallDict, str, dict[str, Values] | None]:
    """Query ``slot`` once per slot rule, filtered by the rule; returns the slot-valid candidates
    (id -> known attribute values, in stored order), or None when a query failed."""
    queries = slot_rule_queries(view, slot)
    envelopes = yield from issue(queries, together=False)
    return slot_valid(slot, envelopes) if len(envelopes) == len(queries) else None


def slot_rule_queries(view: TaskView, slot: SlotView) -> list[ToolCallDict]:
    """The queries that find ``slot``'s slot-valid candidates: one per slot rule, filtered by the
    rule (one listing every candidate when the slot has no rule)."""
    query = view.tool("query")
    if not slot.rules:
        return [request(query, row=slot.row, col=slot.col, **list_all_query(view, "name"))]
    return [
        request(
            query, row=slot.row, col=slot.col, field=attribute, operator=SLOT_KINDS[kind].query_operator, value=bound
        )
        for attribute, kind, bound in slot.rules
    ]


def slot_valid(slot: SlotView, envelopes: list[dict[str, Any]]) -> dict[str, Values] | None:
    """The slot-valid candidates read from the replies to :func:`slot_rule_queries` (the
    intersection of the rules' matches), or None when one failed."""
    if not all(map(succeeded, envelopes)):
        return None
    if not slot.rules:
        return {m["id"]: {} for m in envelopes[0]["data"]["matches"]}
    valid: dict[str, Values] | None = None
    for (attribute, _, _), envelope in zip(slot.rules, envelopes, strict=True):
        matches = {m["id"]: m[attribute] for m in envelope["data"]["matches"]}
        if valid is None:
            valid = {item: {attribute: value} for item, value in matches.items()}
        else:
            valid = {item: {**known, attribute: matches[item]} for item, known in valid.items() if item in matches}
    return valid


def request(name: str, **arguments: Any) -> ToolCallDict:
    """One tool call as a value, for :func:`~ace_gym.agents.task_view.calls`."""
    return {"name": name, "arguments": arguments}


def learn_values(
    view: TaskView, slot: SlotView, valid: dict[str, Values], attributes: list[str]
) -> Generator[ToolCallDict, str, list[str]]:
    """Query ``slot`` once per attribute of ``attributes`` that some of its candidates ``valid``
    lack, recording each candidate's value into ``valid``. Returns the attributes left unknown
    when a query failed (empty when all are known)."""
    unknown = unknown_attributes(valid, attributes)
    for position, attribute in enumerate(unknown):
        envelope = yield from call(view.tool("query"), row=slot.row, col=slot.col, **list_all_query(view, attribute))
        if not succeeded(envelope):
            return unknown[position:]
        record_matches(valid, attribute, envelope)
    return []


def unknown_attributes(valid: dict[str, Values], attributes: list[str]) -> list[str]:
    """The ``attributes`` that some candidate of ``valid`` lacks."""
    return [a for a in attributes if any(a not in known for known in valid.values())]


def record_matches(valid: dict[str, Values], attribute: str, envelope: Mapping[str, Any]) -> None:
    """Record into ``valid`` the ``attribute`` values a query's successful reply lists."""
    for match in envelope["data"]["matches"]:
        if match["id"] in valid:
            valid[match["id"]][attribute] = match[attribute]


def list_all_query(view: TaskView, attribute: str) -> dict[str, Any]:
    """Query arguments matching every candidate while returning ``attribute``."""
    if attribute in view.domain.numeric_attributes:
        return {"field": attribute, "operator": ">=", "value": _EVERYTHING_NUMERIC}
    return {"field": attribute, "operator": "not_in", "value": []}


class ExactSolver(ScriptedPolicy):
    """Solves every instance exactly under unlimited budgets (see the module docstring)."""

    name: ClassVar[str] = "solver"
    together: ClassVar[bool] = False
    """Whether a completion's ``set_slot`` calls and its check go in one turn (:func:`place_and_verify`)."""

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        if view.later:
            yield from self.staged(view, info, notes)
            return
        gathered = yield from self.gather(view, info, binding_rules(view), notes)
        if gathered is not None:
            yield from settle(view, *gathered, notes, place=partial(place_and_verify, together=self.together))

    def staged(self, view: TaskView, info: Mapping[str, Any], notes: dict[str, Any]) -> Script:
        """A staged scenario (``view.later`` not empty): learn every stage's slots at once, search
        a completion of the whole grid, and fill it stage by stage: set the stage's slots, ``done``,
        read the stage its reply opens (the same plan's next part); the final stage is placed and
        verified as a whole task is (its own completions, from what is known). Nothing is queried
        twice, so a stage costs no query budget beyond the first stage's."""
        whole = dataclasses.replace(view, slots=view.slots + view.later, later=())
        gathered = yield from self.gather(whole, info, binding_rules(whole), notes)
        if gathered is None:
            return
        visible, candidates, rules = gathered
        known_rules, deferred = _split_by_knowledge(rules, visible, candidates)
        plan = next(search(whole, visible, candidates, known_rules), None)
        if plan is None:
            notes["exhausted"] = "candidates"
            return
        chosen = {slot.cell: (item, valid) for slot, item, valid in zip(whole.slots, plan, candidates, strict=True)}
        stage: TaskView | None = view
        while stage is not None and stage.later:
            requests = [
                request("set_slot", row=slot.row, col=slot.col, id=chosen[slot.cell][0]) for slot in stage.slots
            ]
            envelopes = yield from issue(requests, self.together)
            for slot, envelope in zip(stage.slots, envelopes, strict=False):
                if not succeeded(envelope):
                    notes["error"] = f"set_slot failed on slot ({slot.row}, {slot.col}): {envelope.get('messages')}"
                    return
                item, valid = chosen[slot.cell]
                view.known[item] = visible[item] = valid[item]
            envelope = yield from call(view.tool("done"))
            stage = _opened_stage(envelope, info, view.known)
        if stage is None or not stage.slots:
            return  # the reply opened no stage: feedback on a failed stage, or the end
        final = [chosen[slot.cell][1] for slot in stage.slots]
        completions = search(stage, visible, final, known_rules)
        yield from place_and_verify(stage, final, completions, bool(deferred), notes, together=self.together)

    def gather(
        self, view: TaskView, info: Mapping[str, Any], rules: list[tuple[GlobalRule, int]], notes: dict[str, Any]
    ) -> Generator[ToolCallDict, str, Gathered | None]:
        """Steps 1-2: the slot-valid candidates with the attribute values ``rules`` need, the
        visible items' values, and the rules still to reason about (none when every slot is
        forced); None after a failed slot-rule query (said in ``notes``)."""
        attributes = list(dict.fromkeys(rule.attribute for rule, _ in rules))
        candidates: list[dict[str, Values]] = []
        for slot in view.slots:
            valid = yield from slot_candidates(view, slot)
            if valid is None:
                notes["error"] = f"slot-rule query failed on slot ({slot.row}, {slot.col})"
                return None
            candidates.append(valid)
        if all(len(valid) == 1 for valid in candidates):
            rules = []  # every slot is forced by its own rules: nothing left to reason about
        visible: dict[str, Values] = {}
        if rules:
            visible = yield from visible_values(view, attributes)
            missing = yield from _complete_candidates(view, candidates, attributes)
            if missing:
                notes["missing_queries"] = missing
        return visible, candidates, rules


def settle(
    view: TaskView,
    visible: dict[str, Values],
    candidates: list[dict[str, Values]],
    rules: list[tuple[GlobalRule, int]],
    notes: dict[str, Any],
    *,
    place: Placer | None = None,
) -> Script:
    """Steps 3-4: search completions of the rules whose values are all known, fill each in turn and
    verify it with the global check while checks remain (rules with unknown values are left to the
    check) with ``place`` (default :func:`place_and_verify`); what happened goes to ``notes``."""
    known_rules, deferred = _split_by_knowledge(rules, visible, candidates)
    if deferred:
        notes["deferred_rules"] = [rule.name for rule, _ in deferred]
    completions = search(view, visible, candidates, known_rules)
    yield from (place or place_and_verify)(view, candidates, completions, bool(deferred), notes)


def _complete_candidates(
    view: TaskView, candidates: list[dict[str, Values]], attributes: list[str]
) -> Generator[ToolCallDict, str, list[dict[str, Any]]]:
    """Query every slot's candidates for the ``attributes`` not yet known, filling ``candidates``
    in place; returns the queries it had no budget for (``{"row", "col", "fields"}`` per slot)."""
    missing: list[dict[str, Any]] = []
    for slot, valid in zip(view.slots, candidates, strict=True):
        left = yield from learn_values(view, slot, valid, attributes)
        if left:
            missing.append({"row": slot.row, "col": slot.col, "fields": left})
    return missing


def _split_by_knowledge(
    rules: list[tuple[GlobalRule, int]], visible: Mapping[str, Values], candidates: list[dict[str, Values]]
) -> tuple[list[tuple[GlobalRule, int]], list[tuple[GlobalRule, int]]]:
    """(rules whose attribute is known for every visible item and candidate, the other rules)."""
    known: list[tuple[GlobalRule, int]] = []
    deferred: list[tuple[GlobalRule, int]] = []
    for rule, bound in rules:
        complete = all(rule.attribute in v for v in visible.values()) and all(
            rule.attribute in values for slot in candidates for values in slot.values()
        )
        (known if complete else deferred).append((rule, bound))
    return known, deferred


def place_and_verify(
    view: TaskView,
    candidates: list[dict[str, Values]],
    completions: Iterator[tuple[str, ...]],
    deferred: bool,
    notes: dict[str, Any],
    *,
    together: bool = False,
) -> Script:
    """Set each completion in turn (only the cells that change; a placed item's values join
    ``view.known``) and ask the global check, until one passes or the checks run out; records ``verified``, ``exhausted`` and
    ``completions_tried`` (or ``error`` when a set fails) in ``notes``. ``together``: a
    completion's ``set_slot`` calls and its check in one turn (:func:`issue`)."""
    checks_left = view.global_check_budget
    placed: dict[tuple[int, int], str] = {}
    tried = 0
    for assignment in completions:
        tried += 1
        changes = [
            (position, slot, item)
            for position, (slot, item) in enumerate(zip(view.slots, assignment, strict=True))
            if placed.get(slot.cell) != item
        ]
        requests = [request("set_slot", row=slot.row, col=slot.col, id=item) for _, slot, item in changes]
        if checks_left != 0:
            requests.append(request(view.tool("global_check")))
        envelopes = yield from issue(requests, together)
        for (position, slot, item), envelope in zip(changes, envelopes, strict=False):
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
        envelope = envelopes[-1]
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


def issue(requests: list[ToolCallDict], together: bool) -> Generator[Any, Any, list[dict[str, Any]]]:
    """Make ``requests`` and return their envelopes: in one turn (``together``,
    :func:`~ace_gym.agents.task_view.calls`), or one call per turn, stopping after the first
    that fails (then fewer envelopes come back)."""
    if together:
        return (yield from calls(requests))
    envelopes = []
    for one in requests:
        envelope = yield from call(one["name"], **one["arguments"])
        envelopes.append(envelope)
        if not succeeded(envelope):
            break
    return envelopes


class BatchingSolver(ExactSolver):
    """The exact solver making every call that does not depend on another's reply in one turn:
    all slot-rule queries; then every item-attribute lookup and candidate-value query; then the
    completion's ``set_slot`` calls with the global check; then ``done``. Four turns where the
    checks pass at once, so an episode's turn count is what a capable model with parallel tool
    calls needs. Same calls, replies and notes as :class:`ExactSolver`, grouped in turns."""

    name: ClassVar[str] = "solver-batch"
    together: ClassVar[bool] = True

    def gather(  # type: ignore[override]  # the same facts, gathered in turns of several calls
        self, view: TaskView, info: Mapping[str, Any], rules: list[tuple[GlobalRule, int]], notes: dict[str, Any]
    ) -> Generator[list[ToolCallDict], list[str], Gathered | None]:
        """Steps 1-2 as :meth:`ExactSolver.gather`, in two turns: every slot-rule query, then every
        item-attribute lookup and candidate-value query."""
        attributes = list(dict.fromkeys(rule.attribute for rule, _ in rules))
        per_slot = [slot_rule_queries(view, slot) for slot in view.slots]
        envelopes = yield from calls([one for queries in per_slot for one in queries])
        candidates: list[dict[str, Values]] = []
        for slot, queries in zip(view.slots, per_slot, strict=True):
            valid = slot_valid(slot, envelopes[: len(queries)])
            envelopes = envelopes[len(queries) :]
            if valid is None:
                notes["error"] = f"slot-rule query failed on slot ({slot.row}, {slot.col})"
                return None
            candidates.append(valid)
        if all(len(valid) == 1 for valid in candidates) or not rules:
            return {}, candidates, []
        visible, lookups = visible_requests(view, attributes)
        unknown = [unknown_attributes(valid, attributes) for valid in candidates]
        queries = [
            request(view.tool("query"), row=slot.row, col=slot.col, **list_all_query(view, attribute))
            for slot, attributes_left in zip(view.slots, unknown, strict=True)
            for attribute in attributes_left
        ]
        envelopes = yield from calls(lookups + queries)
        for lookup, envelope in zip(lookups, envelopes, strict=False):
            record_items(visible, lookup, envelope)
        envelopes = envelopes[len(lookups) :]
        missing = []
        for slot, valid, attributes_left in zip(view.slots, candidates, unknown, strict=True):
            failed = []
            for attribute, envelope in zip(attributes_left, envelopes, strict=False):
                if succeeded(envelope):
                    record_matches(valid, attribute, envelope)
                else:
                    failed.append(attribute)
            envelopes = envelopes[len(attributes_left) :]
            if failed:
                missing.append({"row": slot.row, "col": slot.col, "fields": failed})
        if missing:
            notes["missing_queries"] = missing
        return visible, candidates, rules


def visible_values(view: TaskView, attributes: list[str]) -> Generator[ToolCallDict, str, dict[str, Values]]:
    """Attribute values of every visible item, in batches of the tool's id and field limits; items
    whose values the agent already knows (``view.known``) are not asked about again."""
    values, requests = visible_requests(view, attributes)
    for one in requests:
        envelope = yield from call(one["name"], **one["arguments"])
        record_items(values, one, envelope)
    return values


def visible_requests(view: TaskView, attributes: list[str]) -> tuple[dict[str, Values], list[ToolCallDict]]:
    """The visible items' values known so far (``view.known``), and the item-attribute lookups
    that learn the rest of ``attributes``, in batches of the tool's id and field limits."""
    values: dict[str, Values] = {item: dict(view.known.get(item, {})) for item in dict.fromkeys(view.visible_ids)}
    ids = [item for item, known in values.items() if any(a not in known for a in attributes)]
    requests = [
        request(view.tool("item_attributes"), ids=ids[start : start + view.max_query_ids], field=fields)
        for start in range(0, len(ids), view.max_query_ids)
        for fields in (
            attributes[field_start : field_start + view.max_query_fields]
            for field_start in range(0, len(attributes), view.max_query_fields)
        )
    ]
    return values, requests


def record_items(values: dict[str, Values], lookup: ToolCallDict, envelope: Mapping[str, Any]) -> None:
    """Record into ``values`` what the reply ``envelope`` to the item-attribute ``lookup`` says
    (nothing when it failed)."""
    if not succeeded(envelope):
        return
    fields = lookup["arguments"]["field"]
    for item, found in envelope["data"]["items"].items():
        values[item].update(found if len(fields) > 1 else {fields[0]: found})


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
    yield from _Search(view, visible, candidates, rules).completions()


class _Search:
    """The state of one :func:`search`: the rules by aggregate, each slot's options, the running
    totals of the partial assignment, and the least / most the unassigned slots can still add."""

    def __init__(
        self,
        view: TaskView,
        visible: Mapping[str, Values],
        candidates: list[dict[str, Values]],
        rules: list[tuple[GlobalRule, int]],
    ) -> None:
        self.view, self.visible, self.candidates = view, visible, candidates
        self.slot_rows = [slot.row for slot in view.slots]
        by_aggregate: dict[Aggregate, list[tuple[int, GlobalRule, int]]] = {how: [] for how in Aggregate}
        for k, (rule, bound) in enumerate(rules):
            by_aggregate[kind_of(rule).aggregate].append((k, rule, bound))
        self.sums, self.repeats = by_aggregate[Aggregate.TOTAL], by_aggregate[Aggregate.MOST_FREQUENT]
        self.row_sums, caps = by_aggregate[Aggregate.LARGEST_ROW_TOTAL], by_aggregate[Aggregate.LARGEST]
        self.upper = {k: kind_of(rule).upper for k, rule, _ in self.sums}
        self.readers = {rule.name: contribution_reader(rule) for rule, _ in rules}
        self.options = [
            [
                item
                for item, values in slot.items()
                if all(self.contribution(rule, values) <= bound for _, rule, bound in caps)
            ]
            for slot in candidates
        ]
        self.order = sorted(range(len(self.options)), key=lambda s: len(self.options[s]))
        self.chosen: list[str] = [""] * len(self.options)

    def contribution(self, rule: GlobalRule, values: Values) -> Any:
        return self.readers[rule.name](values[rule.attribute])

    def value(self, slot: int, item: str, rule: GlobalRule) -> Any:
        return self.contribution(rule, self.candidates[slot][item])

    def _total_visible(self) -> None:
        """The running totals start from the visible cells."""
        view, visible = self.view, self.visible
        self.sum_totals = {
            k: sum(self.contribution(rule, visible[i]) for i in view.visible_ids) for k, rule, _ in self.sums
        }
        self.repeat_counts: dict[int, dict[Any, int]] = {}
        for k, rule, _ in self.repeats:
            counts: dict[Any, int] = {}
            for item in view.visible_ids:
                counts[visible[item][rule.attribute]] = counts.get(visible[item][rule.attribute], 0) + 1
            self.repeat_counts[k] = counts
        self.row_totals = {
            k: [
                sum(self.contribution(rule, visible[item]) for item in view.grid[r] if item is not None)
                for r in range(view.rows)
            ]
            for k, rule, _ in self.row_sums
        }

    def _bound_the_rest(self) -> None:
        """Least / most the slots from depth d on can add, per sum rule and per row-sum rule (rows)."""
        depth_count = len(self.order)
        self.rest_min = {k: [0] * (depth_count + 1) for k, _, _ in self.sums}
        self.rest_max = {k: [0] * (depth_count + 1) for k, _, _ in self.sums}
        self.rest_row_min = {k: [[0] * self.view.rows for _ in range(depth_count + 1)] for k, _, _ in self.row_sums}
        for depth in range(depth_count - 1, -1, -1):
            s = self.order[depth]
            for k, rule, _ in self.sums:
                contributions = [self.value(s, item, rule) for item in self.options[s]]
                self.rest_min[k][depth] = self.rest_min[k][depth + 1] + min(contributions)
                self.rest_max[k][depth] = self.rest_max[k][depth + 1] + max(contributions)
            for k, rule, _ in self.row_sums:
                row_min = list(self.rest_row_min[k][depth + 1])
                row_min[self.slot_rows[s]] += min(self.value(s, item, rule) for item in self.options[s])
                self.rest_row_min[k][depth] = row_min

    def completions(self) -> Iterator[tuple[str, ...]]:
        if any(not ids for ids in self.options):
            return
        self._total_visible()
        if any(max(self.repeat_counts[k].values(), default=0) > bound for k, _, bound in self.repeats):
            return
        self._bound_the_rest()
        yield from self._descend(0)

    def _feasible(self, depth: int) -> bool:
        for k, _, bound in self.sums:
            if self.upper[k] and self.sum_totals[k] + self.rest_min[k][depth] > bound:
                return False
            if not self.upper[k] and self.sum_totals[k] + self.rest_max[k][depth] < bound:
                return False
        for k, _, bound in self.row_sums:
            rows_min = self.rest_row_min[k][depth]
            if any(total + least > bound for total, least in zip(self.row_totals[k], rows_min, strict=True)):
                return False
        return True

    def _descend(self, depth: int) -> Iterator[tuple[str, ...]]:
        if not self._feasible(depth):
            return
        if depth == len(self.order):
            yield tuple(self.chosen)
            return
        s = self.order[depth]
        for item in self.options[s]:
            if self._place(s, item, 1):
                self.chosen[s] = item
                yield from self._descend(depth + 1)
            self._place(s, item, -1)

    def _place(self, s: int, item: str, sign: int) -> bool:
        """Add (``sign`` 1) or remove (-1) ``item`` in slot ``s`` to the running totals; on adding,
        whether every repeat limit still holds."""
        row = self.slot_rows[s]
        within = True
        for k, rule, _ in self.sums:
            self.sum_totals[k] += sign * self.value(s, item, rule)
        for k, rule, bound in self.repeats:
            key = self.candidates[s][item][rule.attribute]
            self.repeat_counts[k][key] = self.repeat_counts[k].get(key, 0) + sign
            within = within and self.repeat_counts[k][key] <= bound
        for k, rule, _ in self.row_sums:
            self.row_totals[k][row] += sign * self.value(s, item, rule)
        return within

"""Greedy-local with a revise step: it reads the feedback on a failed submission and revises.

Attempt 1 is greedy-local's (:mod:`ace_gym.agents.greedy`), then ``done``. When the answer to
``done`` is feedback rather than the end of the episode (under
:class:`~ace_gym.feedback.FeedbackRounds`), the policy:

1. finds the global rules the feedback names, by their sentences as the task instruction states
   them (feedback never names a cell, so this is all it learns about where the fault is; a text
   naming no rule it recognises, e.g. a paraphrasing LLM simulator, makes every rule a suspect);
2. learns those rules' attribute values: of the visible items (item-attribute tool) and of each
   hidden slot's slot-valid candidates (one query per attribute and slot);
3. re-chooses slots one swap at a time, each time the swap among slot-valid candidates that most
   lowers (the number of named rules broken, then their summed shortfalls relative to their
   bounds), measured with the constraint code's aggregates over what it knows, until none is
   broken or no swap helps; then it resubmits.

Rules the feedback has not named are not looked at, so a revision can break one; the next round
names it, and the policy keeps every rule named so far in view. Deterministic.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, ClassVar

import numpy as np

from ace_gym.agents.greedy import Filled, GreedyLocal, greedy_fill
from ace_gym.agents.solver import Values, learn_values, visible_values
from ace_gym.agents.task_view import Script, TaskView, ToolCallDict, call, succeeded
from ace_gym.constraints import CompiledGlobalRule, aggregate, compile_global_rule, global_rule_text
from ace_gym.domains import GlobalRule
from ace_gym.instance import item_columns


class GreedyRevise(GreedyLocal):
    """Greedy-local, then one revision per feedback round; ``notes["revisions"]`` holds, per
    round, the rules the feedback named and the slots changed."""

    name: ClassVar[str] = "greedy-revise"

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        filled = yield from greedy_fill(view, notes)
        _remember(view, filled)
        suspects: list[tuple[GlobalRule, int]] = []
        revisions: list[dict[str, Any]] = notes.setdefault("revisions", [])
        while True:
            envelope = yield from call(view.tool("done"))
            if succeeded(envelope):
                return  # the episode ended (no feedback rounds around this env)
            named = named_rules(view, str(envelope.get("messages", ""))) or view.global_rules()
            suspects += [rule for rule in named if rule not in suspects]
            changed = yield from _revise(view, filled, suspects)
            _remember(view, filled)
            revisions.append({"named_rules": [rule.name for rule, _ in named], "changed_slots": changed})


def _remember(view: TaskView, filled: Filled) -> None:
    """Keep what is known of the items set, for a scenario's later stages (``view.known``)."""
    for chosen, valid in filled:
        if chosen is not None:
            view.known[chosen] = valid[chosen]


def named_rules(view: TaskView, feedback: str) -> list[tuple[GlobalRule, int]]:
    """The global rules whose instruction sentence appears in ``feedback``, in rule order."""
    return [
        (rule, bound) for rule, bound in view.global_rules() if global_rule_text(rule, bound, view.domain) in feedback
    ]


def _revise(view: TaskView, filled: Filled, rules: list[tuple[GlobalRule, int]]) -> Generator[ToolCallDict, str, int]:
    """Learn the values ``rules`` read, re-choose slots (module docstring, step 3), set the changed
    ones; returns how many slots changed."""
    attributes = list(dict.fromkeys(rule.attribute for rule, _ in rules))
    visible = yield from visible_values(view, attributes)
    for slot, (_, valid) in zip(view.slots, filled, strict=True):
        yield from learn_values(view, slot, valid, attributes)
    choices = best_swaps(view, filled, visible, rules)
    changed = 0
    for position, item in choices.items():
        slot = view.slots[position]
        envelope = yield from call(view.tool("set_slot"), row=slot.row, col=slot.col, id=item)
        if succeeded(envelope):
            filled[position] = (item, filled[position][1])
            changed += 1
    return changed


def best_swaps(
    view: TaskView, filled: Filled, visible: Mapping[str, Values], rules: list[tuple[GlobalRule, int]]
) -> dict[int, str]:
    """Hill-climb over single-slot swaps (module docstring, step 3): the new id per changed slot
    position. Items whose values for ``rules`` are unknown are left out."""
    attributes = list(dict.fromkeys(rule.attribute for rule, _ in rules))
    values: dict[str, Values] = dict(visible)
    for _, valid in filled:
        values.update(valid)
    ids = [item for item, known in values.items() if all(a in known for a in attributes)]
    index = {item: k for k, item in enumerate(ids)}
    compiled = _compile(view, [values[item] for item in ids], rules)
    cols = view.cols
    grid = np.asarray([index.get(item, -1) if item is not None else -1 for row in view.grid for item in row])
    options: list[tuple[int, list[int]]] = []
    for slot, (chosen, valid) in zip(view.slots, filled, strict=True):
        cell = slot.row * cols + slot.col
        grid[cell] = index.get(chosen, -1) if chosen is not None else -1
        options.append((cell, [index[item] for item in valid if item in index]))
    start = grid.copy()

    def cost() -> tuple[int, float]:
        shortfalls = [(rule.shortfall(aggregate(rule, grid, cols)), rule.bound) for rule in compiled]
        return sum(s > 0 for s, _ in shortfalls), sum(s / max(1, abs(bound)) for s, bound in shortfalls)

    current = cost()
    for _ in range(2 * len(options)):
        if current[0] == 0:
            break
        best: tuple[tuple[int, float], int, int] | None = None
        for cell, items in options:
            held = grid[cell]
            for item in items:
                if item == held:
                    continue
                grid[cell] = item
                trial = cost()
                if trial < (best[0] if best else current):
                    best = (trial, cell, item)
            grid[cell] = held
        if best is None:
            break
        current, cell, item = best
        grid[cell] = item
    return {position: ids[int(grid[cell])] for position, (cell, _) in enumerate(options) if grid[cell] != start[cell]}


def _compile(view: TaskView, items: list[Values], rules: list[tuple[GlobalRule, int]]) -> list[CompiledGlobalRule]:
    """``rules`` bound to a table of the items the policy knows (their values for the rules' attributes)."""
    attributes = list(dict.fromkeys(rule.attribute for rule, _ in rules))
    numeric, categorical = item_columns(items, view.domain, attributes)
    return [compile_global_rule(rule, bound, view.domain, numeric, categorical) for rule, bound in rules]

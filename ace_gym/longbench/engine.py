"""The guessing game's rules: feedback on a guess, query conditions, tool results, what feedback
implies. Pure functions over an :class:`~ace_gym.longbench.tables.ItemTable`; item sets are
numpy bool masks in the table's canonical order.

Our exact definitions (the paper gives the behaviour, not the rules):

* Feedback on guess g against target t, section by section in table order: each categorical value
  of g is ``correct`` if t holds it, else ``wrong``; a number is ``correct`` if equal, else
  ``wrong, too low`` (g < t) or ``wrong, too high``. The guess is right iff g == t.
* A value condition keeps the items holding **all** its values, or with ``exclude`` those
  holding **none** of them; a numeric condition is a strict comparison (``>``, ``<``) or ``==``.
* The concise result is the items meeting every condition; the verbose result has one list per
  section that has conditions (sections in order of first appearance), each list meeting that
  section's conditions only. So the concise list is the intersection of the verbose lists.
* A fact is what one feedback mark says about the target (holds / lacks a value, a bound or the
  exact number); the *version space* is the set of items meeting every fact seen so far that were
  not guessed wrong. The target is always in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from ace_gym.longbench.tables import ItemTable
from ace_gym.text import clipped

Comparator = Literal[">", "<", "=="]
COMPARATORS: tuple[str, ...] = (">", "<", "==")
CORRECT, WRONG, TOO_LOW, TOO_HIGH = "correct", "wrong", "wrong, too low", "wrong, too high"


@dataclass(frozen=True)
class ValueCondition:
    """Items holding all ``values`` of ``section`` (``exclude``: holding none of them)."""

    section: str
    values: tuple[str, ...]
    exclude: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"type": "value", "section": self.section, "values": list(self.values), "exclude": self.exclude}


@dataclass(frozen=True)
class NumericCondition:
    """Items whose number in ``section`` compares to ``threshold`` as ``comparator`` says."""

    section: str
    comparator: Comparator
    threshold: int

    def to_json(self) -> dict[str, Any]:
        return {"type": "numeric", "section": self.section, "comparator": self.comparator, "threshold": self.threshold}


Condition = ValueCondition | NumericCondition


def satisfying(table: ItemTable, condition: Condition) -> np.ndarray:
    """The bool mask of the items meeting ``condition``."""
    if isinstance(condition, NumericCondition):
        numbers = table.numbers[condition.section]
        if condition.comparator == ">":
            return numbers > condition.threshold
        if condition.comparator == "<":
            return numbers < condition.threshold
        return numbers == condition.threshold
    if condition.exclude:
        return ~table.has_any(condition.section, condition.values)
    return table.has_all(condition.section, condition.values)


@dataclass(frozen=True)
class Query:
    """A query's outcome: ``per_section`` holds (section, its conditions, mask) in order of first
    appearance; ``intersection`` is the mask meeting every condition."""

    conditions: tuple[Condition, ...]
    per_section: tuple[tuple[str, tuple[Condition, ...], np.ndarray], ...]
    intersection: np.ndarray


def run_query(table: ItemTable, conditions: Sequence[Condition]) -> Query:
    """Evaluate ``conditions`` (at least one) against ``table``."""
    grouped: dict[str, list[Condition]] = {}
    for condition in conditions:
        grouped.setdefault(condition.section, []).append(condition)
    per_section = []
    intersection = np.ones(table.size, dtype=bool)
    for section, members in grouped.items():
        mask = np.ones(table.size, dtype=bool)
        for condition in members:
            mask &= satisfying(table, condition)
        mask.flags.writeable = False
        intersection &= mask
        per_section.append((section, tuple(members), mask))
    intersection.flags.writeable = False
    return Query(tuple(conditions), tuple(per_section), intersection)


def rendered_items(query: Query, fmt: str) -> np.ndarray:
    """The item indices of a tool result in rendered order: the intersection (concise) or the
    per-section lists one after another (verbose)."""
    if fmt == "concise":
        return np.flatnonzero(query.intersection)
    return np.concatenate([np.flatnonzero(mask) for _, _, mask in query.per_section])


# ------------------------------------------------------------------------------------------
# feedback


@dataclass(frozen=True)
class SectionFeedback:
    """One section of a feedback: the guess's values (str for categorical, int for numeric) and
    the mark of each."""

    section: str
    values: tuple[str | int, ...]
    marks: tuple[str, ...]


@dataclass(frozen=True)
class Feedback:
    """The environment's answer to guessing item ``guess``."""

    guess: int
    correct: bool
    sections: tuple[SectionFeedback, ...]

    @property
    def correct_marks(self) -> int:
        """How many values are marked ``correct``."""
        return sum(mark == CORRECT for s in self.sections for mark in s.marks)


def give_feedback(table: ItemTable, guess: int, target: int) -> Feedback:
    """Annotate every value of ``guess`` against ``target`` (rules in the module docstring)."""
    sections = []
    for spec in table.sections:
        if spec.kind == "numeric":
            numbers = table.numbers[spec.name]
            mine, theirs = int(numbers[guess]), int(numbers[target])
            mark = CORRECT if mine == theirs else TOO_LOW if mine < theirs else TOO_HIGH
            sections.append(SectionFeedback(spec.name, (mine,), (mark,)))
        else:
            held = set(table.categorical[spec.name][target])
            mine_values = table.categorical[spec.name][guess]
            sections.append(
                SectionFeedback(spec.name, mine_values, tuple(CORRECT if v in held else WRONG for v in mine_values))
            )
    return Feedback(guess, guess == target, tuple(sections))


def weighted_score(table: ItemTable, feedback: Feedback) -> int:
    """Sum over sections of the section weight times its number of ``correct`` marks."""
    return sum(table.section(s.section).weight * s.marks.count(CORRECT) for s in feedback.sections)


# ------------------------------------------------------------------------------------------
# facts: what feedback says about the target

Fact = tuple[str, str, str | int]
"""``(section, kind, value)`` with kind ``has`` / ``lacks`` (a value), ``gt`` / ``lt`` / ``eq`` (a number)."""


def facts_of(feedback: Feedback) -> list[Fact]:
    """The facts one feedback establishes about the target."""
    facts: list[Fact] = []
    for section in feedback.sections:
        for value, mark in zip(section.values, section.marks, strict=True):
            if isinstance(value, str):
                facts.append((section.section, "has" if mark == CORRECT else "lacks", value))
            else:
                facts.append((section.section, {CORRECT: "eq", TOO_LOW: "gt", TOO_HIGH: "lt"}[mark], value))
    return facts


def conditions_from_facts(table: ItemTable, facts: Iterable[Fact]) -> tuple[Condition, ...]:
    """The query conditions that say exactly ``facts``: per section in table order, one include
    and one exclude value condition (values in vocabulary order) and the tightest bounds (``==``
    alone when the number is known)."""
    has: dict[str, set[str]] = {}
    lacks: dict[str, set[str]] = {}
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    exact: dict[str, int] = {}
    for section, kind, value in facts:
        if kind == "has":
            has.setdefault(section, set()).add(str(value))
        elif kind == "lacks":
            lacks.setdefault(section, set()).add(str(value))
        elif kind == "gt":
            low[section] = max(low.get(section, int(value)), int(value))
        elif kind == "lt":
            high[section] = min(high.get(section, int(value)), int(value))
        else:
            exact[section] = int(value)
    conditions: list[Condition] = []
    for spec in table.sections:
        name = spec.name
        if spec.kind == "categorical":
            order = table.vocab[name]
            if name in has:
                conditions.append(ValueCondition(name, tuple(v for v in order if v in has[name])))
            if name in lacks:
                conditions.append(ValueCondition(name, tuple(v for v in order if v in lacks[name]), exclude=True))
        elif name in exact:
            conditions.append(NumericCondition(name, "==", exact[name]))
        else:
            if name in low:
                conditions.append(NumericCondition(name, ">", low[name]))
            if name in high:
                conditions.append(NumericCondition(name, "<", high[name]))
    return tuple(conditions)


def version_space(table: ItemTable, facts: Iterable[Fact], wrong_guesses: Iterable[int]) -> np.ndarray:
    """The items consistent with every fact that were not guessed wrong (a bool mask)."""
    conditions = conditions_from_facts(table, facts)
    space = run_query(table, conditions).intersection.copy() if conditions else np.ones(table.size, dtype=bool)
    space[list(wrong_guesses)] = False
    return space


# ------------------------------------------------------------------------------------------
# conditions written by an agent


class QueryError(ValueError):
    """A query an agent wrote that cannot run; the message explains why (shown to the agent)."""


def parse_conditions(table: ItemTable, arguments: Any) -> tuple[Condition, ...]:
    """Read ``{"conditions": [...]}`` as written by an agent (see the game's system prompt).

    Raises :class:`QueryError` naming the first problem: not an object, no conditions, an unknown
    type, section, comparator or value, a non-integer threshold.
    """
    if not isinstance(arguments, Mapping):
        raise QueryError('arguments must be an object {"conditions": [...]}')
    raw = arguments.get("conditions")
    if not isinstance(raw, list) or not raw:
        raise QueryError('"conditions" must be a non-empty list')
    out: list[Condition] = []
    for position, item in enumerate(raw):
        where = f"condition {position}"
        if not isinstance(item, Mapping):
            raise QueryError(f"{where} must be an object")
        section = item.get("section")
        if not isinstance(section, str) or section not in {s.name for s in table.sections}:
            raise QueryError(f"{where}: unknown section {clipped(section)}")
        kind = table.section(section).kind
        kind_written = item.get("type")
        if not isinstance(kind_written, str):  # e.g. an array, whose == is no truth value
            raise QueryError(f'{where}: type must be "value" or "numeric"')
        if kind_written == "value":
            if kind != "categorical":
                raise QueryError(f"{where}: section {section} is numeric; use a numeric condition")
            values = item.get("values")
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                raise QueryError(f"{where}: values must be a non-empty list of strings")
            unknown = [v for v in values if v not in table.vocab[section]]
            if unknown:
                raise QueryError(f"{where}: {clipped(unknown[0])} is not a value of {section}")
            exclude = item.get("exclude", False)
            if not isinstance(exclude, bool):
                raise QueryError(f"{where}: exclude must be true or false")
            out.append(ValueCondition(section, tuple(dict.fromkeys(values)), exclude))
        elif kind_written == "numeric":
            if kind != "numeric":
                raise QueryError(f"{where}: section {section} is categorical; use a value condition")
            comparator = item.get("comparator")
            if not isinstance(comparator, str) or comparator not in COMPARATORS:
                raise QueryError(f"{where}: comparator must be one of {', '.join(COMPARATORS)}")
            threshold = item.get("threshold")
            if (
                isinstance(threshold, bool)
                or not isinstance(threshold, (int, float))
                or (isinstance(threshold, float) and not threshold.is_integer())
            ):
                raise QueryError(f"{where}: threshold must be an integer")
            out.append(NumericCondition(section, cast(Comparator, comparator), int(threshold)))
        else:
            raise QueryError(f'{where}: type must be "value" or "numeric"')
    return tuple(out)

"""The shape of a domain declaration.

An ACE domain differs from the others only in data, so a domain is a frozen declaration of its
item attributes, slot rules, global rules and the words used in texts; one engine serves all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

# The kind names a declaration may use; what each kind means is declared in ace_gym.constraints
# (SLOT_KINDS, RULE_KINDS), and a test keeps the two in step.
SlotRuleKindName = Literal["max", "min"]
GlobalRuleKindName = Literal[
    "sum_max", "sum_min", "repeat_max", "count_min", "count_min_threshold", "max_row_sum", "max_cap"
]


@dataclass(frozen=True)
class NumericAttribute:
    """An integer attribute drawn uniformly from ``[low, high]``."""

    name: str
    low: int
    high: int


@dataclass(frozen=True)
class CategoricalAttribute:
    """A string attribute drawn uniformly from ``values``."""

    name: str
    values: tuple[str, ...]


Attribute = NumericAttribute | CategoricalAttribute


@dataclass(frozen=True)
class SlotRule:
    """A local rule on one hidden cell: ``item[attribute] <= value`` (max) or ``>= value`` (min).

    ``values`` are the thresholds the generator may draw from.
    """

    name: str
    attribute: str
    kind: SlotRuleKindName
    values: tuple[int, ...]


@dataclass(frozen=True)
class GlobalRule:
    """A whole-grid rule; its threshold is derived from the truth grid (docs/compatibility.md §1.6).

    ``slack`` widens the threshold away from the truth's observed value, ``cap`` is the largest
    value one item can contribute (upper kinds), ``floor`` the smallest threshold (sum_min),
    ``threshold`` the attribute cut-off of ``count_min_threshold`` and ``value`` the category
    counted by ``count_min``.
    """

    name: str
    kind: GlobalRuleKindName
    attribute: str
    slack: int = 0
    cap: int | None = None
    floor: int | None = None
    threshold: int | None = None
    value: str | None = None


@dataclass(frozen=True)
class Domain:
    """Everything that makes one ACE domain what it is.

    Texts: ``task_title`` ("course scheduling"), ``intro`` ("course schedule construction"),
    ``grid_text`` (rows/cols meaning, with ``{rows}``/``{cols}`` placeholders), ``item_label``
    and ``item_plural`` ("course"/"courses"), ``tool_noun`` (the ``D`` of tool names) and
    ``tool_title`` (how tool docstrings name the domain, e.g. "PC build item").
    ``name_attribute`` is the categorical attribute whose value picks the item's name phrase from
    ``name_phrases``; workforce uses the fixed phrase "Worker".
    """

    name: str
    id_key: str
    id_prefix: str
    item_label: str
    item_plural: str
    tool_title: str
    task_title: str
    intro: str
    grid_text: str
    attributes: tuple[Attribute, ...]
    prompt_attributes: tuple[str, ...]
    slot_rules: tuple[SlotRule, ...]
    global_rules: tuple[GlobalRule, ...]
    name_attribute: str | None
    name_phrases: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def tool_noun(self) -> str:
        """The domain as spelled inside tool names (``query_<noun>_candidate_from_attribute``)."""
        return self.name

    def attribute(self, name: str) -> Attribute:
        """Return the attribute called ``name``; KeyError if the domain has none."""
        for attribute in self.attributes:
            if attribute.name == name:
                return attribute
        raise KeyError(name)

    @cached_property  # a frozen dataclass's __dict__ holds it: derived once per domain
    def numeric_attributes(self) -> tuple[str, ...]:
        """The names of the numeric attributes, in declaration order."""
        return tuple(a.name for a in self.attributes if isinstance(a, NumericAttribute))

    @cached_property
    def categorical_attributes(self) -> tuple[str, ...]:
        """The names of the categorical attributes, in declaration order."""
        return tuple(a.name for a in self.attributes if not isinstance(a, NumericAttribute))

    @property
    def item_keys(self) -> tuple[str, ...]:
        """Keys of an item dict in stored order: id key, name, then the attributes."""
        return (self.id_key, "name", *tuple(a.name for a in self.attributes))

    @cached_property
    def allowed_fields(self) -> tuple[str, ...]:
        """The fields the query and attribute tools accept: item keys minus the id key, sorted
        (docs/compatibility.md §3.4)."""
        return tuple(sorted(k for k in self.item_keys if k != self.id_key))

"""Deterministic feedback on a failed submission, in AgencyBench's four-part report.

The report has a *status* (attempt, score, threshold, attempts left), a *failure diagnosis* (the
unmet rubric items), a *root cause* (measured against required values) and *directives*. Three
styles show more or less of it:

* ``"names"``: status and diagnosis, the unmet items only (like AgencyBench's rule-based scripts);
* ``"diagnostic"``: adds the root cause, ``measured 412; required at most 400``;
* ``"directive"``: adds the directives, how far each aggregate must move and to revise, then resubmit.

No style names a cell: slot items are reported as counts, global items by their rule sentence
(which names no cell) and measured value. :func:`mentions_a_cell` is the check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ace_gym.domains.tool_names import TOOL_NAMES
from ace_gym.feedback.rubric import GlobalItem, Rubric, SlotState

FeedbackStyle = Literal["names", "diagnostic", "directive"]
FEEDBACK_STYLES: tuple[FeedbackStyle, ...] = ("names", "diagnostic", "directive")

_CELL_PATTERNS = re.compile(
    r"\(\s*\d+\s*,\s*\d+\s*\)"  # (r, c)
    r"|\b(?:rows?|col(?:umn)?s?|cells?|slots?)\s*(?:#|no\.?|number)?\s*\d"  # row 2, column 3, slot 4
    r"|\[\s*\d+\s*\]\s*\[\s*\d+\s*\]",  # [r][c]
    re.IGNORECASE,
)
_WORDS = re.compile(r"[\w-]+")  # how an item id stands in text: a run of word characters and hyphens


def mentions_a_cell(text: str, item_ids: Iterable[str] = ()) -> bool:
    """Whether ``text`` points at a grid position ("(2, 3)", "row 2", "column 3", "slot 4",
    "[2][3]") or names one of ``item_ids`` (e.g. the candidates of the hidden slots)."""
    if _CELL_PATTERNS.search(text):
        return True
    return not set(_WORDS.findall(text)).isdisjoint(item_ids)


@dataclass(frozen=True)
class Submission:
    """A graded submission that falls short: its ``rubric``, which ``attempt`` of
    ``max_attempts`` it was, and the pass ``threshold``."""

    rubric: Rubric
    attempt: int
    max_attempts: int
    threshold: float

    @property
    def attempts_left(self) -> int:
        return self.max_attempts - self.attempt


def feedback_text(submission: Submission, style: FeedbackStyle) -> str:
    """The report on ``submission`` in ``style`` (see the module docstring)."""
    rubric = submission.rubric
    left = submission.attempts_left
    lines = [
        "Status: "
        f"submission {submission.attempt} of {submission.max_attempts} scored {rubric.score:.2f} "
        f"({rubric.met_count} of {rubric.total} rubric items met); {submission.threshold:.2f} is needed to pass. "
        f"Not accepted; {left} attempt{'' if left == 1 else 's'} left.",
        "Failure diagnosis: these rubric items are not met:",
    ]
    slot_line = _slot_line(rubric)
    if slot_line:
        lines.append(f"- {slot_line}")
    lines += [f"- {item.rule.reason}." for item in rubric.unmet_rules]
    if style in ("diagnostic", "directive"):
        lines.append("Root cause:")
        if slot_line:
            lines.append(f"- {_slot_cause(rubric)}")
        lines += [f"- {_rule_cause(item)}" for item in rubric.unmet_rules]
    if style == "directive":
        lines.append("Directives:")
        if slot_line:
            lines.append("- fill every empty hidden slot and make every filled one meet its own slot constraints.")
        lines += [f"- {_rule_directive(item)}" for item in rubric.unmet_rules]
        lines.append(
            f"Revise the hidden slots involved, then call `{TOOL_NAMES['done']}` to resubmit; the grid stays as you left it."
        )
    return "\n".join(lines)


def _slot_line(rubric: Rubric) -> str | None:
    unmet = len(rubric.unmet_slots)
    if not unmet:
        return None
    total = len(rubric.slots)
    return f"every hidden slot holds an item that meets its own slot constraints ({total - unmet} of {total} do)."


def _slot_cause(rubric: Rubric) -> str:
    empty = sum(item.state is SlotState.EMPTY for item in rubric.unmet_slots)
    breaking = len(rubric.unmet_slots) - empty
    parts = []
    if empty:
        parts.append(f"{empty} hidden slot{'' if empty == 1 else 's'} {'is' if empty == 1 else 'are'} empty")
    if breaking:
        parts.append(
            f"{breaking} hidden slot{'' if breaking == 1 else 's'} "
            f"hold{'s' if breaking == 1 else ''} an item that breaks its slot constraints"
        )
    return " and ".join(parts) + "."


def _relation(item: GlobalItem) -> str:
    return "at most" if item.rule.kind.upper else "at least"


def _rule_cause(item: GlobalItem) -> str:
    return f"measured {item.measured}; required {_relation(item)} {item.rule.bound} ({item.rule.reason})."


def _rule_directive(item: GlobalItem) -> str:
    direction = "down" if item.rule.kind.upper else "up"
    return (
        f"bring the measured value {direction} by at least {item.shortfall} "
        f"(from {item.measured} to {_relation(item)} {item.rule.bound})."
    )

"""The E1-E6 error taxonomy of planning errors, its ACE causes and the grade rubric.

The six codes and the grade scale are the Agent Planning Benchmark's; what each code means on an
ACE action (the *causes*) and the exact reading of the rubric's words are ours (docs/planning.md):

* a cause belongs to exactly one code (:data:`CAUSES`), so a single fault raises a single flag;
* *moderate* flags are E2, E4 and E5, *major* flags E1, E3 and E6; a *trivial* E5 is a cause that
  changes nothing and costs nothing (``trivial=True`` below);
* "two or more" moderate errors means 2, "several" moderate errors 3 or more, "several" major
  errors 2 or more (:func:`grade`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CODES: tuple[str, ...] = ("E1", "E2", "E3", "E4", "E5", "E6")
UNSOLVABLE_KINDS: tuple[str, ...] = (
    "conflicting_constraints",
    "tool_outage",
    "missing_tool",
    "missing_information",
    "missing_attachment",
)
"""APB's unsolvable kinds on ACE (:mod:`ace_gym.planning.unsolvable`), also the reason codes of
the refusal tool."""
STEP_NAMES: dict[str, str] = {
    "E1": "goal misalignment",
    "E2": "premature conclusion",
    "E3": "constraint violation",
    "E4": "logic error",
    "E5": "tool-use error",
    "E6": "hallucination",
}
"""The step-wise names of the codes."""
PLAN_NAMES: dict[str, str] = {
    "E1": "goal understanding",
    "E2": "task completeness",
    "E3": "constraint violation",
    "E4": "logical defect",
    "E5": "tool-use error",
    "E6": "hallucination",
}
"""The holistic (whole-plan) names of the codes."""
DEFINITIONS: dict[str, str] = {
    "E1": "the action works against the goal: it touches a pre-filled cell, or refuses a task that can be done, "
    "or completes a task that cannot",
    "E2": "the action concludes too early: `done` with an empty hidden cell, or on a grid that was never verified "
    "while a global check was still available",
    "E3": "the action breaks a stated constraint: an id that fails its slot's rules, inspecting hidden ids with "
    "the item tools, or an assignment the task policy forbids",
    "E4": "the action does not follow from what was observed: an id never returned for that slot, a check on "
    "cells not filled yet, repeating a question already answered, or ignoring a failed check",
    "E5": "the tool is used wrongly: malformed or missing arguments, a bad operator, a cell off the grid, too many "
    "ids or fields, an exhausted budget, a distractor tool, or retrying a tool known to be broken",
    "E6": "the action uses something that does not exist: an unknown tool, item id or attribute",
}
"""What each code means on ACE, as shown to agents (``Refine`` in metric mode)."""
MAJOR_CODES = frozenset({"E1", "E3", "E6"})
MODERATE_CODES = frozenset({"E2", "E4", "E5"})


@dataclass(frozen=True)
class Cause:
    """One way an ACE action earns a flag: its ``code`` and whether it is a trivial E5."""

    name: str
    code: str
    trivial: bool = False


CAUSES: dict[str, Cause] = {
    cause.name: cause
    for cause in (
        Cause("prefilled_cell", "E1"),
        Cause("refused_solvable", "E1"),
        Cause("completed_unsolvable", "E1"),
        Cause("empty_slots", "E2"),
        Cause("unverified_done", "E2"),
        Cause("short_prediction", "E2"),
        Cause("missing_done", "E2"),
        Cause("slot_rule_violation", "E3"),
        Cause("data_access", "E3"),
        Cause("policy_breach", "E3"),
        Cause("unobserved_id", "E4"),
        Cause("repeated_call", "E4"),
        Cause("unfilled_check", "E4"),
        Cause("ignored_result", "E4"),
        Cause("wrong_reason_code", "E4"),
        Cause("forward_reference", "E4"),
        Cause("unqueried_slot", "E4"),
        Cause("malformed_action", "E5"),
        Cause("bad_arguments", "E5"),
        Cause("missing_argument", "E5"),
        Cause("wrong_type", "E5"),
        Cause("cell_off_grid", "E5"),
        Cause("bad_operator", "E5"),
        Cause("too_many", "E5"),
        Cause("budget_exceeded", "E5"),
        Cause("distractor_tool", "E5"),
        Cause("broken_retry", "E5"),
        Cause("not_hidden", "E5", trivial=True),
        Cause("clear_empty", "E5", trivial=True),
        Cause("unknown_tool", "E6"),
        Cause("unknown_item", "E6"),
        Cause("unknown_field", "E6"),
    )
}
"""Every cause the detectors report, by name."""


@dataclass(frozen=True)
class Flag:
    """One detected error: its cause, the cause's code, and what exactly was wrong."""

    cause: str
    detail: str

    @property
    def code(self) -> str:
        return CAUSES[self.cause].code

    @property
    def trivial(self) -> bool:
        return CAUSES[self.cause].trivial

    def as_dict(self) -> dict[str, str]:
        """The JSON form used in ``info`` and critiques."""
        return {"code": self.code, "cause": self.cause, "detail": self.detail}


def grade(flags: Iterable[Flag]) -> float:
    """The APB grade of one step (or one plan) from its flags.

    1.0 no flag; 0.8 a single trivial E5; 0.6 one E4 or E5; 0.4 two E4/E5 flags, or one E2 (with
    at most one other moderate flag); 0.2 one major flag (E1, E3, E6), or three or more moderate
    flags; 0.0 two or more major flags.
    """
    found = list(flags)
    major = sum(flag.code in MAJOR_CODES for flag in found)
    moderate = len(found) - major
    if major >= 2:
        return 0.0
    if major == 1 or moderate >= 3:
        return 0.2
    if moderate == 2 or any(flag.code == "E2" for flag in found):
        return 0.4
    if moderate == 1:
        return 0.8 if found[0].trivial else 0.6
    return 1.0


def codes_of(flags: Iterable[Flag]) -> dict[str, bool]:
    """``{"E1": bool, ..., "E6": bool}``: which codes the flags raise (APB's step-wise output)."""
    raised = {flag.code for flag in flags}
    return {code: code in raised for code in CODES}

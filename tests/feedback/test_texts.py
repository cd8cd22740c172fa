"""Feedback texts: the four-part report in three styles, never naming a cell."""

from __future__ import annotations

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.feedback import FEEDBACK_STYLES, Submission, feedback_text, grade, mentions_a_cell
from ace_gym.instance import CompiledInstance, resolve_dataset


def hidden_candidate_ids(compiled: CompiledInstance) -> set[str]:
    return {item for slot in compiled.slots for item in slot.candidate_ids}


@pytest.mark.parametrize(
    "text",
    ["fix slot (2, 3)", "the item in row 2", "Column 4 is wrong", "cell 7", "slot #3", "grid[1][2]", "(0,1)"],
)
def test_mentions_a_cell__finds_positions(text: str) -> None:
    assert mentions_a_cell(text)


def test_mentions_a_cell__finds_item_ids_as_whole_words_only() -> None:
    assert mentions_a_cell("swap C012 for another", ["C012"])
    assert not mentions_a_cell("swap C0123 for another", ["C012"])
    assert not mentions_a_cell("for any single row in the whole grid, the total must be at most 9")


def _failed_submission(compiled: CompiledInstance, rng: np.random.Generator, attempt: int = 1) -> Submission | None:
    grid = np.array(compiled.truth)
    for slot in compiled.slots:
        grid[slot.cell] = rng.choice([*slot.candidates.tolist(), -1])
    rubric = grade(compiled, grid)
    return None if rubric.score == 1.0 else Submission(rubric, attempt, 3, 1.0)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_feedback_text__never_names_a_cell_or_a_hidden_candidate(domain: str) -> None:
    dataset = resolve_dataset("5x5", domain)
    rng = np.random.default_rng(1)
    texts = 0
    for index in range(len(dataset)):
        compiled = dataset.compiled(index)
        forbidden = hidden_candidate_ids(compiled)
        for _ in range(4):
            submission = _failed_submission(compiled, rng)
            if submission is None:
                continue
            for style in FEEDBACK_STYLES:
                text = feedback_text(submission, style)
                assert not mentions_a_cell(text, forbidden), text
                texts += 1
    assert texts > 300


def test_feedback_text__styles_add_root_cause_then_directives() -> None:
    compiled = resolve_dataset("5x5", "course").compiled(34)
    grid = np.array(compiled.truth)
    slot = compiled.slots[0]
    grid[slot.cell] = compiled.item_index[compiled.instance.slots[0].decoy_ids[0]]
    grid[compiled.slots[1].cell] = -1
    submission = Submission(grade(compiled, grid), 1, 2, 1.0)
    names, diagnostic, directive = (feedback_text(submission, style) for style in FEEDBACK_STYLES)
    assert names.startswith("Status: submission 1 of 2 scored") and "1 attempt left" in names
    assert "Failure diagnosis:" in names and "Root cause:" not in names
    assert diagnostic.startswith(names) and "Root cause:" in diagnostic and "Directives:" not in diagnostic
    assert directive.startswith(diagnostic) and "Directives:" in directive and "`done`" in directive
    assert "1 hidden slot is empty" in diagnostic
    for item in submission.rubric.unmet_rules:
        assert item.rule.reason in names
        assert f"measured {item.measured}; required" in diagnostic
        assert f"by at least {item.shortfall}" in directive

"""The eight AgentLongBench question types: official labels, file slugs, categories, answer kinds."""

from __future__ import annotations

from collections.abc import Sequence

from ace_gym.errors import ConfigError, did_you_mean

COUNT_FREQUENCY_TOOL = "Count Frequency(Tool)"
FIND_DUPLICATES = "Find Duplicates(Tool)"
FIND_TARGET_OFFSETS = "Find Target Offsets(Tool)"
COUNT_CORRECTNESS = "Count Correctness(Env)"
COUNT_FREQUENCY_ENV = "Count Frequency(Env)"
LARGEST_VALUE = "Find Round with Largest Value(Env)"
WEIGHTED_SUMMATION = "Weighted Summation(Env)"
INTERSECTION = "Intersection"

QUESTION_TYPES: tuple[str, ...] = (
    COUNT_FREQUENCY_TOOL,
    FIND_DUPLICATES,
    FIND_TARGET_OFFSETS,
    COUNT_CORRECTNESS,
    COUNT_FREQUENCY_ENV,
    LARGEST_VALUE,
    WEIGHTED_SUMMATION,
    INTERSECTION,
)
"""The official labels, in the paper's order."""

SLUGS: dict[str, str] = {
    COUNT_FREQUENCY_TOOL: "count_frequency_tool",
    FIND_DUPLICATES: "find_duplicates_tool",
    FIND_TARGET_OFFSETS: "find_target_offsets_tool",
    COUNT_CORRECTNESS: "count_correctness_env",
    COUNT_FREQUENCY_ENV: "count_frequency_env",
    LARGEST_VALUE: "find_round_largest_value_env",
    WEIGHTED_SUMMATION: "weighted_summation_env",
    INTERSECTION: "intersection",
}
"""File names (without ``.jsonl``) of each type in the official layout."""

CATEGORIES: dict[str, str] = {
    **dict.fromkeys((COUNT_FREQUENCY_TOOL, FIND_DUPLICATES, FIND_TARGET_OFFSETS), "tool_response"),
    **dict.fromkeys((COUNT_CORRECTNESS, COUNT_FREQUENCY_ENV, LARGEST_VALUE, WEIGHTED_SUMMATION), "env_response"),
    INTERSECTION: "final_guess",
}
"""The official directory of each type."""

NUMBER_TYPES = frozenset(
    {COUNT_FREQUENCY_TOOL, COUNT_CORRECTNESS, COUNT_FREQUENCY_ENV, LARGEST_VALUE, WEIGHTED_SUMMATION}
)
"""Types answered by an integer."""

PAPER_WEIGHTS: dict[str, int] = {
    COUNT_FREQUENCY_TOOL: 25,
    FIND_DUPLICATES: 25,
    FIND_TARGET_OFFSETS: 25,
    COUNT_CORRECTNESS: 25,
    COUNT_FREQUENCY_ENV: 18,
    LARGEST_VALUE: 18,
    WEIGHTED_SUMMATION: 14,
    INTERSECTION: 50,
}
"""Roughly the per-bucket sample counts of the published dataset (its Table 3)."""


def resolve_question_types(spec: str | Sequence[str]) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """``(types, probabilities)`` for a ``question_types`` value: ``"all"`` (uniform), ``"paper"``
    (the published proportions), one label or slug, a comma list, or a list of labels/slugs.
    Raises ConfigError for unknown names."""
    if spec == "all":
        return QUESTION_TYPES, tuple(1 / len(QUESTION_TYPES) for _ in QUESTION_TYPES)
    if spec == "paper":
        total = sum(PAPER_WEIGHTS.values())
        return QUESTION_TYPES, tuple(PAPER_WEIGHTS[t] / total for t in QUESTION_TYPES)
    if isinstance(spec, str):
        names = [spec] if spec in QUESTION_TYPES else [p.strip() for p in spec.split(",") if p.strip()]
    else:
        names = list(spec) if isinstance(spec, Sequence) else []
    if not names:
        raise ConfigError("question_types", spec, "expected 'all', 'paper', a label, a slug or a list of them")
    by_slug = {slug: label for label, slug in SLUGS.items()}
    out = []
    for name in names:
        label = name if name in QUESTION_TYPES else by_slug.get(name)
        if label is None:
            known = [*QUESTION_TYPES, *SLUGS.values()]
            raise ConfigError("question_types", name, f"unknown question type{did_you_mean(str(name), known)}")
        if label not in out:
            out.append(label)
    return tuple(out), tuple(1 / len(out) for _ in out)

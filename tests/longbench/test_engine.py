"""Game rules checked by brute force over whole tables: feedback, queries, tool results, version space."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ace_gym.longbench.engine import (
    CORRECT,
    TOO_HIGH,
    TOO_LOW,
    WRONG,
    NumericCondition,
    QueryError,
    ValueCondition,
    conditions_from_facts,
    facts_of,
    give_feedback,
    parse_conditions,
    rendered_items,
    run_query,
    version_space,
)
from ace_gym.longbench.render import tool_result_text
from ace_gym.longbench.tables import ItemTable


def _holds(table: ItemTable, item: int, condition) -> bool:
    """A condition checked on one item from its raw values (no masks, no numpy)."""
    value = table.item_values(condition.section, item)
    if isinstance(condition, NumericCondition):
        return {">": value > condition.threshold, "<": value < condition.threshold, "==": value == condition.threshold}[
            condition.comparator
        ]
    held = set(value)
    return not (held & set(condition.values)) if condition.exclude else set(condition.values) <= held


def _random_conditions(table: ItemTable, rng: np.random.Generator) -> list:
    conditions = []
    for _ in range(int(rng.integers(1, 6))):
        spec = table.sections[int(rng.integers(len(table.sections)))]
        if spec.kind == "numeric":
            numbers = table.numbers[spec.name]
            threshold = int(numbers[int(rng.integers(table.size))]) + int(rng.integers(-2, 3))
            conditions.append(NumericCondition(spec.name, (">", "<", "==")[int(rng.integers(3))], threshold))
        else:
            vocab = table.vocab[spec.name]
            picked = rng.choice(len(vocab), int(rng.integers(1, 4)), replace=False)
            conditions.append(ValueCondition(spec.name, tuple(vocab[i] for i in picked), bool(rng.random() < 0.5)))
    return conditions


def test_feedback__every_mark_equals_the_table_comparison(small: ItemTable) -> None:
    for guess in range(small.size):
        for target in range(small.size):
            feedback = give_feedback(small, guess, target)
            assert feedback.correct == (guess == target)
            assert [s.section for s in feedback.sections] == [s.name for s in small.sections]
            for section in feedback.sections:
                mine, theirs = small.item_values(section.section, guess), small.item_values(section.section, target)
                if isinstance(mine, int):
                    expected = CORRECT if mine == theirs else TOO_LOW if mine < theirs else TOO_HIGH
                    assert section.values == (mine,) and section.marks == (expected,)
                else:
                    assert section.values == mine
                    assert section.marks == tuple(CORRECT if v in theirs else WRONG for v in mine)


@pytest.mark.parametrize("table_name", ["small", "synthetic"])
def test_query__lists_are_exactly_the_items_meeting_their_conditions(table_name: str, request) -> None:
    table: ItemTable = request.getfixturevalue(table_name)
    rng = np.random.default_rng(0)
    for _ in range(60):
        conditions = _random_conditions(table, rng)
        query = run_query(table, conditions)
        for section, members, mask in query.per_section:
            assert all(c.section == section for c in members)
            expected = [i for i in range(table.size) if all(_holds(table, i, c) for c in members)]
            assert list(np.flatnonzero(mask)) == expected
        everything = [i for i in range(table.size) if all(_holds(table, i, c) for c in conditions)]
        assert list(np.flatnonzero(query.intersection)) == everything
        assert query.intersection.tolist() == np.logical_and.reduce([m for *_, m in query.per_section]).tolist()
        assert [s for s, *_ in query.per_section] == list(dict.fromkeys(c.section for c in conditions))


def test_tool_result__concise_is_the_intersection_of_the_verbose_lists(synthetic: ItemTable) -> None:
    rng = np.random.default_rng(1)
    for _ in range(40):
        query = run_query(synthetic, _random_conditions(synthetic, rng))
        concise = json.loads(tool_result_text(synthetic, query, "concise"))["intersection"]
        verbose = json.loads(tool_result_text(synthetic, query, "verbose"))["per_section"]
        common = set.intersection(*(set(entry["candidates"]) for entry in verbose))
        assert set(concise) == common and len(concise) == len(common)
        assert concise == [synthetic.names[i] for i in rendered_items(query, "concise")]
        assert [n for e in verbose for n in e["candidates"]] == [
            synthetic.names[i] for i in rendered_items(query, "verbose")
        ]


def test_tool_result__is_byte_identical_to_json_dumps(synthetic: ItemTable) -> None:
    query = run_query(synthetic, [ValueCondition("Attr_1", ("A1V3",)), NumericCondition("Attr_2", ">", 600)])
    names = [synthetic.names[i] for i in np.flatnonzero(query.intersection)]
    assert tool_result_text(synthetic, query, "concise") == json.dumps({"intersection": names})
    verbose = {
        "per_section": [
            {
                "section": section,
                "conditions": [{k: v for k, v in c.to_json().items() if k != "section"} for c in members],
                "candidates": [synthetic.names[i] for i in np.flatnonzero(mask)],
            }
            for section, members, mask in query.per_section
        ]
    }
    assert tool_result_text(synthetic, query, "verbose") == json.dumps(verbose)


def test_facts__the_target_meets_every_condition_they_imply(synthetic: ItemTable) -> None:
    rng = np.random.default_rng(2)
    for _ in range(100):
        target = int(rng.integers(synthetic.size))
        guesses = rng.choice(synthetic.size, 4, replace=False)
        facts = [f for g in guesses for f in facts_of(give_feedback(synthetic, int(g), target))]
        conditions = conditions_from_facts(synthetic, facts)
        assert all(_holds(synthetic, target, c) for c in conditions)
        assert run_query(synthetic, conditions).intersection[target]


def test_version_space__equals_the_items_that_would_give_the_same_feedback(small: ItemTable) -> None:
    rng = np.random.default_rng(3)
    for _ in range(60):
        target = int(rng.integers(small.size))
        guesses = [int(g) for g in rng.choice(small.size, int(rng.integers(1, 5)), replace=False) if g != target]
        observed = [give_feedback(small, g, target) for g in guesses]
        facts = [f for feedback in observed for f in facts_of(feedback)]
        space = version_space(small, facts, guesses)
        brute = [
            c
            for c in range(small.size)
            if c not in guesses and all(give_feedback(small, g, c) == f for g, f in zip(guesses, observed, strict=True))
        ]
        assert list(np.flatnonzero(space)) == brute
        assert space[target]


def test_parse_conditions__reads_valid_calls_and_explains_bad_ones(synthetic: ItemTable) -> None:
    good = {
        "conditions": [
            {"type": "value", "section": "Attr_1", "values": ["A1V2", "A1V2"], "exclude": True},
            {"type": "numeric", "section": "Attr_2", "comparator": "==", "threshold": 300.0},
        ]
    }
    assert parse_conditions(synthetic, good) == (
        ValueCondition("Attr_1", ("A1V2",), True),
        NumericCondition("Attr_2", "==", 300),
    )
    bad = [
        None,
        [],
        {"conditions": []},
        {"conditions": [1]},
        {"conditions": [{"type": "value", "section": "Nope", "values": ["x"]}]},
        {"conditions": [{"type": "value", "section": "Attr_2", "values": ["x"]}]},
        {"conditions": [{"type": "value", "section": "Attr_1", "values": ["A9V9"]}]},
        {"conditions": [{"type": "value", "section": "Attr_1", "values": []}]},
        {"conditions": [{"type": "value", "section": "Attr_1", "values": ["A1V1"], "exclude": "yes"}]},
        {"conditions": [{"type": "numeric", "section": "Attr_1", "comparator": ">", "threshold": 1}]},
        {"conditions": [{"type": "numeric", "section": "Attr_2", "comparator": ">=", "threshold": 1}]},
        {"conditions": [{"type": "numeric", "section": "Attr_2", "comparator": ">", "threshold": 1.5}]},
        {"conditions": [{"type": "numeric", "section": "Attr_2", "comparator": ">", "threshold": float("nan")}]},
        {"conditions": [{"type": "numeric", "section": "Attr_2", "comparator": ">", "threshold": True}]},
        {"conditions": [{"type": "range", "section": "Attr_2"}]},
    ]
    for arguments in bad:
        with pytest.raises(QueryError):
            parse_conditions(synthetic, arguments)


def test_parse_conditions__hostile_values_are_a_query_error_never_an_exception(synthetic: ItemTable) -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    hostile = [
        {"type": "value", "section": 10**5000},  # its repr raised ValueError (issue 27)
        {"type": "value", "section": deep},  # its repr raised RecursionError
        {"type": "value", "section": "Attr_1", "values": [10**5000]},
        {"type": np.array(["value", "numeric"]), "section": "Attr_2"},  # an array's == is no truth value
        {"type": "numeric", "section": "Attr_2", "comparator": np.array([">", "<"]), "threshold": 1},
        {"type": "value", "section": "\ud800"},
    ]
    for condition in hostile:
        with pytest.raises(QueryError) as error:
            parse_conditions(synthetic, {"conditions": [condition]})
        str(error.value).encode("utf-8")

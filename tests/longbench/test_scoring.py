"""The official answer parsing and metrics, quirk by quirk, and their robustness to hostile text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ace_gym.longbench.question_types import (
    COUNT_CORRECTNESS,
    FIND_DUPLICATES,
    FIND_TARGET_OFFSETS,
    INTERSECTION,
    QUESTION_TYPES,
    WEIGHTED_SUMMATION,
)
from ace_gym.longbench.scoring import (
    extract_answer,
    normalize_name,
    parse_boolean,
    parse_name_list,
    parse_number,
    parse_pair,
    parse_prediction,
    score_answer,
    score_prediction,
    set_f1,
    strict_score,
)


def test_extract_answer__last_complete_tag_case_insensitive_and_stripped() -> None:
    assert extract_answer("<answer>1</answer> then <ANSWER> 2 </Answer>") == "2"
    assert extract_answer("<answer>a<answer>b</answer>") == "a<answer>b"
    assert extract_answer("<answer>1</answer><answer>unclosed") == "1"
    assert extract_answer("</answer><answer>x\ny</answer>") == "x\ny"
    assert extract_answer("no tag") is None and extract_answer("") is None


def test_numbers__last_number_wins_commas_dropped_truncated() -> None:
    assert parse_number("<answer>Round 3, no wait: 7</answer>") == 7
    assert parse_number("<answer>1,234</answer>") == 1234
    assert parse_number("<answer>3.9</answer>") == 3
    assert parse_number("<answer>-2</answer>") == -2
    assert parse_number("<answer>none</answer>") is None
    assert parse_number("7") is None  # a missing tag is unreadable
    assert parse_number("<answer>" + "9" * 400 + "</answer>") is None  # beyond float: skipped, never raises


def test_booleans__negation_wins_first_then_positive_words_then_numbers() -> None:
    assert parse_boolean("<answer>not only in both</answer>") is False
    assert parse_boolean("<answer>Yes, it does not</answer>") is False
    assert parse_boolean("<answer>It appears in both</answer>") is True
    assert parse_boolean("<answer>TRUE</answer>") is True
    assert parse_boolean("<answer>2</answer>") is True and parse_boolean("<answer>0</answer>") is False
    assert parse_boolean("<answer>nobody knows</answer>") is None  # \bno\b does not match "nobody"
    assert parse_boolean("yes") is None


def test_pairs__lists_or_split_text_with_numbering_removed() -> None:
    assert parse_pair("<answer>['Abra', 'Kadabra']</answer>") == ["Abra", "Kadabra"]
    assert parse_pair("<answer>1. Abra\n2. Kadabra</answer>") == ["Abra", "Kadabra"]
    assert parse_pair("<answer>Abra and Kadabra | Alakazam</answer>") == ["Abra", "Kadabra", "Alakazam"]
    assert parse_pair("<answer>['Abra']</answer>") == ["['Abra']"]  # a one-item list is read as text


def test_offsets__single_item_gets_half_three_items_get_nothing() -> None:
    gold = ["Mr-Mime", "Kadabra"]
    score = lambda text: score_answer(FIND_TARGET_OFFSETS, "concise", "ki", gold, text)  # noqa: E731
    assert score("<answer>Mr. Mime and Kadabra</answer>") == 1.0
    assert score("<answer>Kadabra and Mr Mime</answer>") == 0.0
    assert score("<answer>mr mime</answer>") == 0.5
    assert score("<answer>Kadabra</answer>") == 0.0
    assert score("<answer>Mr Mime, Kadabra, Abra</answer>") == 0.0
    assert score("Mr Mime and Kadabra") == 0.0


def test_names__kf_normalisation_drops_underscores_ki_keeps_them() -> None:
    assert normalize_name(" Item_84 ", "kf") == "item84" and normalize_name("Item_84", "ki") == "item_84"
    assert score_answer(INTERSECTION, "concise", "kf", "Item_84", "<answer>item 84</answer>") == 1.0
    assert score_answer(INTERSECTION, "concise", "ki", "Item_84", "<answer>item 84</answer>") == 0.0
    assert score_answer(INTERSECTION, "concise", "ki", "Farfetch'd", "<answer>farfetchd</answer>") == 1.0


def test_verbose_intersection__raw_set_f1_with_empty_cases() -> None:
    assert set_f1([], []) == 1.0 and set_f1(["a"], []) == 0.0 and set_f1([], ["a"]) == 0.0
    assert set_f1(["a", "b"], ["a", "c"]) == pytest.approx(0.5)
    assert set_f1(["a ", "a"], ["a"]) == 1.0
    assert set_f1(["item_1"], ["Item_1"]) == 0.0  # no normalisation
    assert score_answer(INTERSECTION, "verbose", "kf", ["A", "B"], "<answer>A, B</answer>") == 1.0
    assert score_answer(INTERSECTION, "verbose", "kf", ["A", "B"], "<answer>['A']</answer>") == pytest.approx(2 / 3)
    assert score_answer(INTERSECTION, "verbose", "kf", ["A"], "A") == 0.0  # missing tag: empty prediction
    assert parse_name_list("<answer>A and B; C</answer>") == ["A", "B", "C"]


@pytest.mark.parametrize("question_type", QUESTION_TYPES)
def test_missing_tag__scores_zero_for_every_type(question_type: str) -> None:
    gold = {FIND_DUPLICATES: True, FIND_TARGET_OFFSETS: ["A", "B"], INTERSECTION: "A"}.get(question_type, 3)
    for fmt in ("concise", "verbose"):
        gold_value = ["A"] if (question_type == INTERSECTION and fmt == "verbose") else gold
        text = str(gold_value if not isinstance(gold_value, list) else ", ".join(gold_value))
        assert score_answer(question_type, fmt, "kf", gold_value, text) == 0.0
        assert score_answer(question_type, fmt, "kf", gold_value, f"<answer>{text}</answer>") == 1.0


def test_gold__parsed_the_official_way_or_left_out() -> None:
    assert score_prediction(COUNT_CORRECTNESS, "concise", "kf", "round 4 of 9", 4) == 1.0  # first number of a gold
    assert score_prediction(COUNT_CORRECTNESS, "concise", "kf", "n/a", 4) is None
    assert score_prediction(FIND_DUPLICATES, "concise", "kf", "no", False) == 1.0
    assert score_prediction(FIND_DUPLICATES, "concise", "kf", "maybe", False) is None
    assert score_prediction(FIND_TARGET_OFFSETS, "concise", "kf", "A and B", ["a", "b"]) == 1.0
    assert score_prediction(FIND_TARGET_OFFSETS, "concise", "kf", "A", ["a"]) is None
    assert score_prediction(INTERSECTION, "concise", "kf", "", "A") is None
    assert score_prediction(WEIGHTED_SUMMATION, "concise", "kf", 5, None) == 0.0


HOSTILE = st.one_of(
    st.text(max_size=300),
    st.text(alphabet="<>/answerANSWER 0123456789,.-[]'\"andnotyes|;\n", max_size=300),
    st.sampled_from(
        [
            "<answer>" * 5000,
            "<answer>[" + "[" * 5000 + "]</answer>",
            "<answer>" + "1" * 5000 + "</answer>",
            "<answer>[1e999, 'a']</answer>",
            "<answer>\ud800</answer>",
            "<answer>[__import__('os')]</answer>",
        ]
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=HOSTILE, question_type=st.sampled_from(QUESTION_TYPES), fmt=st.sampled_from(["concise", "verbose"]))
def test_scoring__never_raises_on_hostile_text(text: str, question_type: str, fmt: str) -> None:
    parse_prediction(question_type, fmt, text)
    gold = {FIND_DUPLICATES: True, FIND_TARGET_OFFSETS: ["A", "B"], INTERSECTION: "A"}.get(question_type, 3)
    score = score_answer(question_type, fmt, "kf", gold, text)
    assert score is None or 0.0 <= score <= 1.0


@pytest.mark.parametrize(
    ("text", "official", "strict"),
    [
        ("<answer>definitely not the answer 987654321</answer>", 1.0, 0.0),
        ("<answer>none of your business</answer>", 1.0, 0.0),
        ("<answer>No</answer>", 1.0, 1.0),
        ("<answer>**false**, nothing repeats</answer>", 1.0, 1.0),
        ("<answer>Yes, but it does not repeat</answer>", 1.0, 0.0),  # the readings disagree
        ("<answer>yes</answer>", 0.0, 0.0),
        ("", 0.0, 0.0),
    ],
)
def test_strict_score__a_yes_no_answer_must_say_yes_or_no(text: str, official: float, strict: float) -> None:
    assert score_answer(FIND_DUPLICATES, "concise", "kf", "no", text) == official
    assert strict_score(FIND_DUPLICATES, "concise", "kf", "no", text) == strict


@pytest.mark.parametrize(
    ("question_type", "fmt", "gold", "text", "strict"),
    [
        (COUNT_CORRECTNESS, "concise", 0, "<answer>0</answer>", 1.0),
        (COUNT_CORRECTNESS, "concise", 3, "<answer>three</answer>", 0.0),
        (INTERSECTION, "verbose", ["a", "b"], "<answer>a, b</answer>", 1.0),
        (INTERSECTION, "concise", "Apple", "<answer></answer>", 0.0),
        (FIND_TARGET_OFFSETS, "concise", ["x", "y"], "<answer>x, y</answer>", 1.0),
    ],
)
def test_strict_score__equals_the_official_score_of_a_well_formed_answer(
    question_type: str, fmt: str, gold: object, text: str, strict: float
) -> None:
    assert strict_score(question_type, fmt, "kf", gold, text) == strict
    assert strict <= (score_answer(question_type, fmt, "kf", gold, text) or 0.0)

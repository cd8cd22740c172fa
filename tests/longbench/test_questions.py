"""Every gold answer is re-derived from the rendered text alone, for many seeds, types and settings."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from ace_gym.longbench.engine import CORRECT, Feedback, SectionFeedback, weighted_score
from ace_gym.longbench.question_types import INTERSECTION, LARGEST_VALUE, QUESTION_TYPES
from ace_gym.longbench.questions import ask
from ace_gym.longbench.samples import SampleConfig, build_sample
from ace_gym.longbench.simulator import Behaviour, Round
from ace_gym.longbench.tables import ItemTable, SectionSpec
from ace_gym.longbench.trajectory import Trajectory
from tests.longbench.text_parser import derive, parse_history

SETTINGS = [
    ("concise", "kf", "synthetic", 32768),
    ("verbose", "kf", "synthetic", 65536),
    ("concise", "ki", "ace:course", 24000),
    ("verbose", "ki", "ace:travel", 160000),  # about 4,400 items: verbose rounds are long
]


def _same(derived: object, gold: object) -> bool:
    return derived == gold


@pytest.mark.parametrize("answers", ["balanced", "paper"])
@pytest.mark.parametrize(("fmt", "knowledge", "table", "tokens"), SETTINGS)
@pytest.mark.parametrize("question_type", QUESTION_TYPES)
def test_gold_answer__is_derived_from_the_rendered_text_for_many_seeds(
    fmt: str, knowledge: str, table: str, tokens: int, question_type: str, answers: str, tokenizer
) -> None:
    config = SampleConfig(table=table, knowledge=knowledge, fmt=fmt, target_tokens=tokens, answers=answers)
    for seed in range(6 if answers == "balanced" else 3):
        sample = build_sample(config, question_type, seed, tokenizer)
        observation = sample.observation()
        rounds = parse_history(observation[1:-1], offset=1)
        derived = derive(observation[-1]["content"], rounds)
        assert derived.answer == sample.question.answer, (seed, observation[-1]["content"])
        assert derived.evidence == set(sample.evidence()), seed
        first = 1 if answers == "paper" else rounds[0].number
        assert [r.number for r in rounds] == list(range(first, first + len(rounds)))


@pytest.mark.parametrize("answers", ["balanced", "paper"])
def test_concise_intersection__only_when_the_asked_game_pins_the_target(answers: str, tokenizer) -> None:
    """The paper asks about the last game; balanced answers about any unsolved game (issue 38: the
    last game's last tool result gave its target away)."""
    config = SampleConfig(target_tokens=20000, min_list=2, answers=answers)
    for seed in range(10):
        sample = build_sample(config, INTERSECTION, seed, tokenizer)
        rounds = parse_history(sample.history)
        game = [r for r in rounds if r.game_start == sample.question.meta["game_start"]]
        listed = [r for r in game if r.result is not None]
        if answers == "paper":
            assert game[-1] is rounds[-1] and not rounds[-1].ends_game
        assert not any(r.correct for r in game)
        assert set.intersection(*(r.present() for r in listed)) == {sample.question.answer}
        assert all(len(r.flat()) >= config.min_list for r in listed)
        assert sample.question.answer not in {r.guess for r in game}


def test_concise_intersection__larger_min_list_is_respected(tokenizer) -> None:
    config = SampleConfig(target_tokens=20000, min_list=4)
    sample = build_sample(config, INTERSECTION, 1, tokenizer)
    game = [r for r in parse_history(sample.history) if r.game_start == sample.question.meta["game_start"]]
    assert min(len(r.flat()) for r in game if r.result is not None) >= 4


def _hand_table() -> ItemTable:
    sections = [
        SectionSpec("Kind", "categorical", 6),
        SectionSpec("Power", "numeric", 4),
        SectionSpec("Age", "numeric", 1),
    ]
    values = {"Kind": [("x",), ("x", "y"), ("y",)], "Power": [10, 20, 30], "Age": [1, 2, 3]}
    return ItemTable("hand", ["A", "B", "C"], ["1", "2", "3"], sections, values)


def test_weighted_score__uses_section_weights_per_correct_value() -> None:
    table = _hand_table()
    feedback = Feedback(
        1,
        False,
        (
            SectionFeedback("Kind", ("x", "y"), (CORRECT, CORRECT)),
            SectionFeedback("Power", (20,), ("wrong, too low",)),
            SectionFeedback("Age", (2,), (CORRECT,)),
        ),
    )
    assert weighted_score(table, feedback) == 6 * 2 + 4 * 0 + 1 * 1


def _trajectory(table: ItemTable, guesses: list[int]) -> Trajectory:
    from ace_gym.longbench.engine import give_feedback

    trajectory = Trajectory(table, "concise")
    for number, guess in enumerate(guesses, start=1):
        played = Round(number, 0, number, 2, None, give_feedback(table, guess, 2), 100 - number)
        trajectory.append(played, [{"role": "assistant", "content": ""}, {"role": "user", "content": ""}], [1, 1])
    return trajectory


def test_largest_value__is_asked_over_a_window_with_a_unique_maximum() -> None:
    table = _hand_table()
    trajectory = _trajectory(table, [1, 1, 0, 1])  # Power 20, 20, 10, 20: no unique maximum overall
    for seed in range(20):
        question = ask(LARGEST_VALUE, trajectory, np.random.default_rng(seed))
        assert question is not None
        low, high = question.rounds["i_round"], question.rounds["j_round"]
        powers = [table.numbers["Power"][trajectory.rounds[k].guess] for k in range(low - 1, high)]
        assert powers.count(max(powers)) == 1 and "among rounds" in question.text
    assert ask(LARGEST_VALUE, _trajectory(table, [1, 1]), np.random.default_rng(0)) is None


def test_paper_answers__are_balanced_for_yes_no_and_spread_for_counts(tokenizer) -> None:
    config = SampleConfig(target_tokens=20000, answers="paper")
    answers = [build_sample(config, "Find Duplicates(Tool)", seed, tokenizer).question.answer for seed in range(40)]
    assert 10 <= sum(answers) <= 30
    counts = {build_sample(config, "Count Correctness(Env)", seed, tokenizer).question.answer for seed in range(30)}
    assert len(counts) >= 3


def test_evidence_position__moves_single_round_evidence_through_the_history(tokenizer) -> None:
    depths = []
    for position in (0.0, 0.5, 1.0):
        config = SampleConfig(target_tokens=40000, evidence_position=position)
        info = build_sample(config, "Count Frequency(Tool)", 3, tokenizer).info()
        depths.append(info["evidence_depth"])
    assert depths[0] > depths[1] > depths[2]


def test_behaviour__avoid_target_is_only_used_for_concise_intersection(tokenizer) -> None:
    config = SampleConfig(target_tokens=20000, behaviour=Behaviour(epsilon=0.0))
    sample = build_sample(config, "Count Correctness(Env)", 0, tokenizer)
    assert any(r.feedback.correct for r in sample.trajectory.rounds)


@pytest.mark.parametrize(("fmt", "tokens"), [("concise", 4096), ("verbose", 32768)])
def test_balanced_weighted_summation__answers_spread_and_no_stated_weight_is_the_answer(
    fmt: str, tokens: int, tokenizer
) -> None:
    """Issue 38: under the table's weights a balanced verbose Weighted Summation took five values
    (0, 2, 3, 5, 6), so answering 3 earned about a quarter of them. The question states weights of
    its own for two rounds whose marks differ in at least two sections."""
    config = SampleConfig(fmt=fmt, target_tokens=tokens)
    questions = [build_sample(config, "Weighted Summation(Env)", seed, tokenizer).question for seed in range(24)]
    answers = Counter(q.answer for q in questions)
    assert len(answers) >= 10 and max(answers.values()) <= 5, answers
    first_weight = [int(re.search(r"Weights: \S+ (\d+)", q.text).group(1)) for q in questions]  # type: ignore[union-attr]
    assert sum(w == q.answer for w, q in zip(first_weight, questions, strict=True)) <= 6

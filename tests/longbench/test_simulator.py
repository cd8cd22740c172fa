"""The simulated investigator: its invariants and what its behavioural parameters do."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ace_gym.errors import ConfigError
from ace_gym.longbench.simulator import Behaviour, Round, simulate
from ace_gym.longbench.tables import ItemTable

QUIET = Behaviour(history_window=0, forget_history_prob=0.0, mask_prob=0.0, epsilon=0.0)


def _rounds(table: ItemTable, behaviour: Behaviour, seed: int, count: int, fmt: str = "concise") -> list[Round]:
    return list(itertools.islice(simulate(table, behaviour, fmt, np.random.default_rng(seed)), count))


def _games(rounds: list[Round]) -> list[list[Round]]:
    return [list(g) for _, g in itertools.groupby(rounds, key=lambda r: r.game)]


@pytest.mark.parametrize("behaviour", [Behaviour(), QUIET, Behaviour(avoid_target=True), Behaviour(epsilon=1.0)])
def test_simulate__the_target_is_in_every_list_and_guesses_never_repeat_in_a_game(small, behaviour) -> None:
    rounds = _rounds(small, behaviour, 0, 400)
    for game in _games(rounds)[:-1]:
        assert game[-1].ends_game and not any(r.ends_game for r in game[:-1])
        guesses = [r.guess for r in game]
        assert len(set(guesses)) == len(guesses)
        assert game[0].query is None and all(r.query is not None for r in game[1:])
        for played in game[1:]:
            assert played.query.intersection[played.target]
            assert all(mask[played.target] for *_, mask in played.query.per_section)
    assert [r.number for r in rounds] == list(range(1, 401))


def test_simulate__without_noise_lists_shrink_monotonically_within_a_game(synthetic) -> None:
    for game in _games(_rounds(synthetic, QUIET, 1, 300))[:-1]:
        masks = [r.query.intersection for r in game[1:]]
        for before, after in itertools.pairwise(masks):
            assert not (after & ~before).any()


def _mean_game_length(table: ItemTable, behaviour: Behaviour) -> float:
    games = _games(_rounds(table, behaviour, 7, 1000))[:-1]
    return sum(len(g) for g in games) / len(games)


def test_behaviour__forgetting_masking_and_exploring_lengthen_games(synthetic) -> None:
    quiet = _mean_game_length(synthetic, QUIET)
    for noisy in (
        Behaviour(history_window=0, forget_history_prob=0.9, mask_prob=0.0, epsilon=0.0),
        Behaviour(history_window=0, forget_history_prob=0.0, mask_prob=0.9, max_mask_sections=3, epsilon=0.0),
        Behaviour(history_window=0, forget_history_prob=0.0, mask_prob=0.0, epsilon=0.5),
    ):
        assert _mean_game_length(synthetic, noisy) > quiet * 1.1, noisy


def test_avoid_target__games_end_only_when_nothing_else_can_be_guessed(small) -> None:
    rounds = _rounds(small, Behaviour(avoid_target=True, max_rounds=500), 2, 300)
    for game in _games(rounds)[:-1]:
        last = game[-1]
        assert last.feedback.correct
        assert all(not r.feedback.correct for r in game[:-1])
        for played in game[1:]:
            assert np.count_nonzero(played.query.intersection) >= 2 or played is last


def test_simulate__is_a_pure_function_of_the_seed(synthetic) -> None:
    a, b, c = (_rounds(synthetic, Behaviour(), seed, 200) for seed in (4, 4, 5))
    assert [(r.target, r.guess, r.query and r.query.conditions) for r in a] == [
        (r.target, r.guess, r.query and r.query.conditions) for r in b
    ]
    assert [r.guess for r in a] != [r.guess for r in c]


def test_simulate__games_run_out_of_rounds(small) -> None:
    rounds = _rounds(small, Behaviour(max_rounds=3, avoid_target=True), 0, 30)
    assert all(len(g) <= 3 for g in _games(rounds))
    assert any(g[-1].remaining == 0 and not g[-1].feedback.correct for g in _games(rounds))


@pytest.mark.parametrize(
    "options",
    [{"history_window": -1}, {"mask_prob": 1.5}, {"epsilon": "x"}, {"relax_k": 0}, {"max_rounds": 0}, {"bogus": 1}],
)
def test_behaviour__invalid_options_are_config_errors(options) -> None:
    with pytest.raises(ConfigError):
        Behaviour.from_options(options)

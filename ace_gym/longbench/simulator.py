"""The simulated investigator: an endless, seeded stream of game rounds (no LLM).

A game draws a hidden target uniformly. Round 1 of a game guesses a uniformly random item; every
later round queries the tool and guesses uniformly among the returned items not guessed yet in
this game. The investigator remembers every fact its feedback established (tagged with the round
it was last learned in) and builds each round's query in five steps (our semantics of the
paper's behavioural parameters; the paper gives neither semantics nor defaults):

1. take the conditions of all remembered facts;
2. leave out, for this query only, each fact last learned before round ``r - history_window``
   with probability ``forget_history_prob``;
3. with probability ``mask_prob``, leave out every condition of ``m ~ U{1..max_mask_sections}``
   random sections;
4. with probability ``epsilon``, keep only a random non-empty subset of at most ``relax_k``
   conditions (a broad query);
5. if nothing is left, reuse the previous round's conditions.

Every condition is true of the target, so the target is in every returned list. A game ends on
the right guess or when its ``max_rounds`` are used up; the next game starts at once. Round
numbers run on across games.

With ``avoid_target`` the investigator never guesses the target while some other unguessed item
can be found: when its list holds nothing else, it drops conditions (random order) until the
list does. Games then stay unsolved for long, which Intersection samples need (see
:mod:`ace_gym.longbench.samples`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ace_gym.errors import ConfigError, did_you_mean, flag, integer, optional_integer, probability
from ace_gym.longbench.engine import (
    Condition,
    Fact,
    Feedback,
    Query,
    conditions_from_facts,
    facts_of,
    give_feedback,
    run_query,
)
from ace_gym.longbench.tables import ItemTable

MAX_ROUNDS: dict[str, int] = {"concise": 2010, "verbose": 260}
"""Rounds per game by format when ``Behaviour.max_rounds`` is None (the budgets seen in the paper's
examples)."""


@dataclass(frozen=True)
class Behaviour:
    """The investigator's imperfections (defaults are ours; see the module docstring)."""

    history_window: int = 5
    forget_history_prob: float = 0.3
    mask_prob: float = 0.3
    max_mask_sections: int = 2
    epsilon: float = 0.1
    relax_k: int = 1
    max_rounds: int | None = None
    avoid_target: bool = False

    def __post_init__(self) -> None:
        set_field = object.__setattr__
        for name in ("history_window", "max_mask_sections", "relax_k"):
            minimum = 0 if name == "history_window" else 1
            set_field(self, name, integer(f"behaviour.{name}", getattr(self, name), minimum=minimum))
        for name in ("forget_history_prob", "mask_prob", "epsilon"):
            set_field(self, name, probability(f"behaviour.{name}", getattr(self, name)))
        set_field(self, "max_rounds", optional_integer("behaviour.max_rounds", self.max_rounds, minimum=1))
        set_field(self, "avoid_target", flag("behaviour.avoid_target", self.avoid_target))

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | Behaviour | None) -> Behaviour:
        """A Behaviour from keyword options (unknown names raise ConfigError)."""
        if options is None:
            return cls()
        if isinstance(options, Behaviour):
            return options
        if not isinstance(options, Mapping):
            raise ConfigError("behaviour", options, "must be a mapping of behaviour parameters")
        known = [f.name for f in dataclasses.fields(cls)]
        for key in options:
            if key not in known:
                raise ConfigError(
                    "behaviour", key, f"unknown parameter; known: {', '.join(known)}{did_you_mean(key, known)}"
                )
        return cls(**options)

    def rounds_per_game(self, fmt: str) -> int:
        return self.max_rounds if self.max_rounds is not None else MAX_ROUNDS[fmt]


@dataclass(frozen=True)
class Round:
    """One round: the query (None in a game's first round), the guess's feedback, the rounds the
    game has left after it. ``number`` counts across games (from ``simulate``'s ``first_round``),
    ``in_game`` within the game."""

    number: int
    game: int
    in_game: int
    target: int
    query: Query | None
    feedback: Feedback
    remaining: int

    @property
    def guess(self) -> int:
        return self.feedback.guess

    @property
    def ends_game(self) -> bool:
        return self.feedback.correct or self.remaining == 0


def simulate(
    table: ItemTable, behaviour: Behaviour, fmt: str, rng: np.random.Generator, *, first_round: int = 1
) -> Iterator[Round]:
    """Yield rounds forever (games chained), numbered from ``first_round``, every random draw
    from ``rng``."""
    per_game = behaviour.rounds_per_game(fmt)
    number = first_round - 1
    game = 0
    while True:
        target = int(rng.integers(table.size))
        remembered: dict[Fact, int] = {}
        guessed = np.zeros(table.size, dtype=bool)
        previous: tuple[Condition, ...] = ()
        for in_game in range(1, per_game + 1):
            number += 1
            if in_game == 1:
                query = None
                pool = np.ones(table.size, dtype=bool)
                if behaviour.avoid_target:
                    pool[target] = False
                guess = int(rng.choice(np.flatnonzero(pool)))
            else:
                conditions = _query_conditions(table, behaviour, remembered, number, previous, rng)
                query, guess = _guess(table, behaviour, conditions, guessed, target, rng)
                previous = query.conditions
            feedback = give_feedback(table, guess, target)
            for fact in facts_of(feedback):
                remembered[fact] = number
            guessed[guess] = True
            yield Round(number, game, in_game, target, query, feedback, per_game - in_game)
            if feedback.correct:
                break
        game += 1


def _query_conditions(
    table: ItemTable,
    behaviour: Behaviour,
    remembered: dict[Fact, int],
    number: int,
    previous: tuple[Condition, ...],
    rng: np.random.Generator,
) -> tuple[Condition, ...]:
    facts = list(remembered)
    learned = np.fromiter(remembered.values(), dtype=np.int64, count=len(facts))
    draws = rng.random(len(facts))
    forgotten = (learned < number - behaviour.history_window) & (draws < behaviour.forget_history_prob)
    conditions = conditions_from_facts(table, (f for f, gone in zip(facts, forgotten, strict=True) if not gone))
    if conditions and rng.random() < behaviour.mask_prob:
        sections = list(dict.fromkeys(c.section for c in conditions))
        count = min(int(rng.integers(1, behaviour.max_mask_sections + 1)), len(sections))
        hidden = {sections[i] for i in rng.choice(len(sections), count, replace=False)}
        conditions = tuple(c for c in conditions if c.section not in hidden)
    if conditions and rng.random() < behaviour.epsilon:
        count = int(rng.integers(1, min(behaviour.relax_k, len(conditions)) + 1))
        keep = sorted(int(i) for i in rng.choice(len(conditions), count, replace=False))
        conditions = tuple(conditions[i] for i in keep)
    if not conditions:
        conditions = previous or conditions_from_facts(table, facts)
    return conditions


def _guess(
    table: ItemTable,
    behaviour: Behaviour,
    conditions: tuple[Condition, ...],
    guessed: np.ndarray,
    target: int,
    rng: np.random.Generator,
) -> tuple[Query, int]:
    query = run_query(table, conditions)
    pool = query.intersection & ~guessed
    if behaviour.avoid_target:
        pool[target] = False
        if not pool.any():
            order = [int(i) for i in rng.permutation(len(conditions))]
            subsets = [sorted(order[:keep]) for keep in range(len(conditions) - 1, 0, -1)]
            subsets += [[i] for i in order[1:]]  # every single condition, if dropping more did not help
            for subset in subsets:
                broader = run_query(table, tuple(conditions[i] for i in subset))
                pool = broader.intersection & ~guessed
                pool[target] = False
                if pool.any():
                    query = broader
                    break
            else:
                return query, target  # nothing else left to guess: the investigator must name it
    return query, int(rng.choice(np.flatnonzero(pool)))

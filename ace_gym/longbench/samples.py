"""One QA sample: table, rollout, truncation to the token budget and one question, from a seed.

A sample's observation is ``[question-answering system prompt] + history + [question]``; its
export (official layout) is ``[game system prompt] + history`` plus the question. The history is
cut at a round boundary so that ``system + history + question_reserve <= target_tokens`` (the
system counted as the longer of the two prompts) and adding the next round would break that; the
question then has to fit ``question_reserve``, so the whole observation is within the budget.

Infeasible draws (e.g. a concise Intersection whose last game does not pin the target) are
redrawn with a fresh rollout: attempt ``a`` of seed ``s`` uses rollout stream ``[s, a, 1]`` and
question stream ``[s, a, 2]``, so a sample is a pure function of its arguments. Concise
Intersection samples come from an investigator that avoids the target (see
:mod:`ace_gym.longbench.simulator`); every other sample from the plain one.

``answers`` (:data:`ANSWERS`) says how answers are drawn. ``"paper"``: the paper's question forms,
rounds numbered from 1, counts uniform among those a history carries; what the official layout
exports. ``"balanced"`` (the training default): no answer is predictable from the question type
alone (issue 38: answering each type's most frequent gold earned 0.19 concise and 0.33 verbose
under the strict reward). From stream ``[s, 3]``, once per seed: the history's first round number,
uniform in :data:`FIRST_ROUNDS` (as if earlier rounds were cut off; a round-number answer is then
no constant); and the target count of a count question, from stream ``[s, 4, type]``
(:class:`~ace_gym.longbench.questions.Balance`; an attempt whose history cannot carry it draws a
new history, and a seed none of whose :data:`MAX_ATTEMPTS` histories carries it is infeasible). A concise
Intersection aims at a position of its target among the history's names ordered by how many tool
results list them, uniform in 1-7 (7 meaning 7 or later: the target was the most listed name in
0.76 of the samples when any unsolved game could be asked), and asks about any game of the
history whose target was never guessed (the last game's last tool result gave its target away)
and is not the first unguessed name of the last tool result; an attempt is kept only when such a
game's target sits at the aimed position, in up to :data:`INTERSECTION_ATTEMPTS` attempts (no
fallback), and every attempt plays games of a length drawn from its rollout stream
(:func:`_game_rounds`, unless the behaviour sets ``max_rounds``), so that the history holds
several unsolved games. A Largest Value question aims at a position of the history (a percentage,
from stream ``[s, 4, type]``). The balance is
calibrated at the default 32k budget; at smaller budgets more seeds are infeasible (a verbose
history of 4096 tokens holds one round and no tool result: no balanced question fits it).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ace_gym.errors import ConfigError, choice, integer, probability
from ace_gym.longbench.prompts import game_prompt, qa_prompt
from ace_gym.longbench.question_types import INTERSECTION, QUESTION_TYPES
from ace_gym.longbench.questions import BALANCED_TARGETS, Balance, Question, ask
from ace_gym.longbench.render import FORMATS
from ace_gym.longbench.simulator import Behaviour, simulate
from ace_gym.longbench.tables import ItemTable, Mask, load_table, mask_table
from ace_gym.longbench.trajectory import Trajectory, build_trajectory
from ace_gym.runs.tokens import Tokenizer, message_tokens, resolve_target_tokens

KNOWLEDGE: tuple[str, ...] = ("kf", "ki")
ANSWERS: tuple[str, ...] = ("balanced", "paper")
TRAINING_ANSWERS = "balanced"
"""The default ``answers``; ``ace-gym eval`` and the official layout use ``"paper"``."""
MAX_ATTEMPTS = 24
INTERSECTION_ATTEMPTS = 240
"""Histories a balanced concise Intersection draws (few short histories put a game's target
anywhere but first among the listed names; a 4096-token history takes a few milliseconds)."""
FIRST_ROUNDS = range(1, 1001)
"""Where a balanced history's round numbers start."""
INTERSECTION_GAME_ROUNDS = range(6, 41)
"""Rounds per game of a balanced concise Intersection history."""


class InfeasibleSample(ConfigError):
    """No sample of a question type fits the budget for a seed in :data:`MAX_ATTEMPTS` draws."""


@dataclass(frozen=True)
class SampleConfig:
    """Everything a sample depends on besides its seed, question type and tokenizer (validated).

    ``knowledge`` "kf" applies :func:`~ace_gym.longbench.tables.mask_table` (seeded by
    ``table_seed``) to the table; ``target_tokens`` is a bucket label or a token count;
    ``question_reserve`` the tokens kept free for the question; ``min_list`` and
    ``max_answer_items`` tune Intersection questions, ``evidence_position`` (None or in [0, 1])
    where single-round evidence sits; ``answers`` "balanced" or "paper" (module docstring).
    """

    table: str = "synthetic"
    table_seed: int = 0
    knowledge: str = "kf"
    fmt: str = "concise"
    target_tokens: int | str = 32768
    behaviour: Behaviour = dataclasses.field(default_factory=Behaviour)
    question_reserve: int = 256
    min_list: int = 2
    max_answer_items: int = 50
    evidence_position: float | None = None
    answers: str = TRAINING_ANSWERS

    def __post_init__(self) -> None:
        choice("knowledge", self.knowledge, KNOWLEDGE)
        choice("answers", self.answers, ANSWERS)
        choice("fmt", self.fmt, FORMATS)
        resolve_target_tokens(self.target_tokens)
        set_field = object.__setattr__
        for name in ("table_seed", "question_reserve", "min_list", "max_answer_items"):
            set_field(self, name, integer(name, getattr(self, name), minimum=0 if name == "table_seed" else 1))
        if self.evidence_position is not None:
            set_field(self, "evidence_position", probability("evidence_position", self.evidence_position))

    @property
    def tokens(self) -> int:
        return resolve_target_tokens(self.target_tokens)[0]

    @property
    def bucket(self) -> str:
        return resolve_target_tokens(self.target_tokens)[1]

    def resolve_table(self) -> tuple[ItemTable, Mask | None]:
        """The table samples are drawn from (masked for "kf") and the mask, if any."""
        return resolve_table(self.table, self.knowledge, self.table_seed)


def resolve_table(spec: str, knowledge: str, seed: int) -> tuple[ItemTable, Mask | None]:
    """``load_table(spec, seed)``, masked when ``knowledge`` is "kf" (cached)."""
    table = load_table(spec, seed)
    return _masked(table, seed) if knowledge == "kf" else (table, None)


@functools.lru_cache(maxsize=16)
def _masked(table: ItemTable, seed: int) -> tuple[ItemTable, Mask]:
    return mask_table(table, seed)


@dataclass
class Sample:
    """A built sample (see the module docstring). ``tokens`` counts the whole observation."""

    config: SampleConfig
    seed: int
    attempt: int
    table: ItemTable
    system_prompt: str
    game_prompt: str
    trajectory: Trajectory
    question: Question
    tokens: int
    question_tokens: int
    system_tokens: int

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.trajectory.messages

    def observation(self) -> list[dict[str, Any]]:
        """The messages shown to a model: QA system prompt, history, question."""
        return [
            {"role": "system", "content": self.system_prompt},
            *self.trajectory.messages,
            {"role": "user", "content": self.question.text},
        ]

    def evidence(self) -> list[int]:
        """Evidence message positions in :meth:`observation` (the same as in the exported messages)."""
        return [i + 1 for i in self.question.evidence]

    def info(self) -> dict[str, Any]:
        """The episode information of this sample (JSON-serialisable)."""
        costs = self.trajectory.message_tokens
        evidence = sorted(self.question.evidence)
        acl_sum = sum(costs[i] for i in evidence)
        acl_span = sum(costs[evidence[0] :]) if evidence else 0
        depth = sum(costs[evidence[-1] + 1 :]) if evidence else 0
        rounds = self.trajectory.rounds
        return {
            "question_type": self.question.question_type,
            "question": self.question.text,
            "gt": self.question.answer,
            "evidence": self.evidence(),
            "acl_sum": acl_sum,
            "acl_span": acl_span,
            "evidence_depth": depth,
            "tokens": self.tokens,
            "target_tokens": self.config.tokens,
            "bucket": self.config.bucket,
            "knowledge": self.config.knowledge,
            "format": self.config.fmt,
            "table": self.config.table,
            "rounds": len(rounds),
            "games": len({r.game for r in rounds}),
            "seed": self.seed,
            "attempt": self.attempt,
            **self.question.rounds,
        }


def build_sample(
    config: SampleConfig, question_type: str, seed: int, tokenizer: Tokenizer, *, table: ItemTable | None = None
) -> Sample:
    """The sample of ``question_type`` for ``seed`` (see the module docstring). Raises
    :class:`InfeasibleSample` (a ConfigError) when no feasible sample is found in
    :data:`MAX_ATTEMPTS` draws (budget too small), ConfigError for other configuration problems."""
    choice("question_type", question_type, QUESTION_TYPES)
    table = table if table is not None else config.resolve_table()[0]
    behaviour = config.behaviour
    balanced = config.answers == "balanced"
    draws = np.random.default_rng([seed, 3])
    first_round = int(draws.choice(FIRST_ROUNDS)) if balanced else 1
    counts = BALANCED_TARGETS.get((question_type, config.fmt))
    aim = np.random.default_rng([seed, 4, QUESTION_TYPES.index(question_type)])  # no two types aim alike
    target = int(aim.choice(counts)) if balanced and counts is not None else None
    aimed_intersection = balanced and question_type == INTERSECTION and config.fmt == "concise"
    short_games = aimed_intersection and behaviour.max_rounds is None
    if question_type == INTERSECTION and config.fmt == "concise":
        behaviour = dataclasses.replace(behaviour, avoid_target=True)
    system = qa_prompt(table, config.fmt, question_type)
    game = game_prompt(table, config.fmt, behaviour.rounds_per_game(config.fmt))
    system_tokens = max(message_tokens(tokenizer, {"content": text}) for text in (system, game))
    budget = config.tokens - system_tokens - config.question_reserve
    if budget <= 0:
        raise ConfigError("target_tokens", config.target_tokens, f"leaves no room for a history ({budget} tokens)")
    history_rounds: int | None = None  # how many rounds the budget held in the last attempt
    attempts = INTERSECTION_ATTEMPTS if aimed_intersection else MAX_ATTEMPTS
    for attempt in range(attempts):
        rng = np.random.default_rng([seed, attempt, 1])
        played = behaviour
        if short_games:  # a shorter game's prompt is no longer than the one counted
            per_game = _game_rounds(history_rounds, rng)
            played = dataclasses.replace(behaviour, max_rounds=per_game)
        game = game_prompt(table, config.fmt, played.rounds_per_game(config.fmt))
        rounds = simulate(table, played, config.fmt, rng, first_round=first_round)
        trajectory = build_trajectory(table, config.fmt, rounds, tokenizer, budget)
        history_rounds = len(trajectory.rounds)
        question = ask(
            question_type,
            trajectory,
            np.random.default_rng([seed, attempt, 2]),
            evidence_position=config.evidence_position,
            min_list=config.min_list,
            max_answer_items=config.max_answer_items,
            balance=Balance(target) if balanced else None,
        )
        if question is None:
            continue
        question_tokens = message_tokens(tokenizer, {"content": question.text})
        if question_tokens > config.question_reserve:
            raise ConfigError(
                "question_reserve", config.question_reserve, f"a question took {question_tokens} tokens; raise it"
            )
        tokens = message_tokens(tokenizer, {"content": system}) + trajectory.tokens + question_tokens
        return Sample(
            config, seed, attempt, table, system, game, trajectory, question, tokens, question_tokens, system_tokens
        )
    raise InfeasibleSample(
        "target_tokens",
        config.target_tokens,
        f"no feasible {question_type!r} sample in {attempts} draws for seed {seed}; use a larger budget",
    )


def _game_rounds(history_rounds: int | None, rng: np.random.Generator) -> int:
    """Rounds per game for a balanced concise Intersection history: uniform in
    :data:`INTERSECTION_GAME_ROUNDS` while the history's length is unknown (the first attempt),
    then between a third and two thirds of it, so that the history holds several unsolved games."""
    if history_rounds is None:
        return int(rng.choice(INTERSECTION_GAME_ROUNDS))
    return int(rng.integers(max(3, history_rounds // 3), max(4, 2 * history_rounds // 3 + 1)))


def config_from_options(options: Mapping[str, Any]) -> SampleConfig:
    """A SampleConfig from plain keyword values (``behaviour`` as a mapping)."""
    values = dict(options)
    values["behaviour"] = Behaviour.from_options(values.get("behaviour"))
    return SampleConfig(**values)


def choose_question_type(types: tuple[str, ...], probabilities: tuple[float, ...], rng: np.random.Generator) -> str:
    """One of ``types`` drawn with ``probabilities``."""
    if not math.isclose(sum(probabilities), 1.0):
        raise ConfigError("question_types", probabilities, "probabilities must sum to 1")
    return types[int(rng.choice(len(types), p=np.asarray(probabilities)))]

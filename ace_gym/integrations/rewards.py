"""Partial credit for trainers: the partial score of an episode and what each turn added to it.

The partial score is the strict rubric score (:mod:`ace_gym.feedback.rubric`,
:attr:`~ace_gym.feedback.rubric.Rubric.strict_score`): the share of the rubric's items met, one
item per hidden slot (met when it holds a slot-valid item) and one per global rule (met, on a
filled grid only, when the rule holds). It is 1.0 exactly when the episode's score is, and pays
each correctly filled slot on the way; ``done`` at once earns 0.

* :func:`partial_score`: of an id grid (what :func:`~ace_gym.integrations.trl.environment_factory`
  pays with ``reward="partial"``); :func:`record_partial_score`: of a rollout record's final grid.
* :func:`partial_summary` and :func:`partial_reward`: the ``summary`` and reward function of
  :func:`~ace_gym.integrations.trl.rollout_func` for the partial score.
* :func:`turn_credit`: per turn, the partial score the turn added (the record replayed on its
  spec's env); the credits of an episode sum to its final partial score. :func:`credited_turn_samples`
  adds them to :func:`~ace_gym.runs.loop.turn_samples` as ``credit``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ace_gym.feedback.rubric import cells_of, grade
from ace_gym.instance import CompiledInstance, resolve_dataset
from ace_gym.runs.loop import turn_samples

REWARDS = ("score", "partial")
"""The episode rewards a trainer path offers: the 0/1 score, or the partial score."""


def partial_score(compiled: CompiledInstance, grid: Sequence[Sequence[str | None]]) -> float:
    """The partial score of an id grid (rows of item ids, None = empty) of ``compiled``."""
    return grade(compiled, cells_of(compiled, grid)).strict_score


def record_partial_score(record: Mapping[str, Any]) -> float:
    """The partial score of a rollout record's final ``grid`` (its instance from ``dataset``,
    ``domain`` and ``instance_index``)."""
    compiled = resolve_dataset(record["dataset"], record["domain"]).compiled(record["instance_index"])
    return partial_score(compiled, record["grid"])


def partial_summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`~ace_gym.integrations.trainer_callback.episode_summary` with ``partial_score``: the
    ``summary`` of ``rollout_func`` that :func:`partial_reward` reads."""
    from ace_gym.integrations.trainer_callback import episode_summary

    return {**episode_summary(record), "partial_score": record_partial_score(record)}


def partial_reward(ace_episode: Sequence[Mapping[str, Any]], **_: Any) -> list[float]:
    """A TRL reward function for ``rollout_func(..., summary=partial_summary)``: each episode's partial score."""
    return [float(episode["partial_score"]) for episode in ace_episode]


partial_reward.__name__ = "ace_partial"  # TRL names reward columns after this


def turn_credit(record: Mapping[str, Any]) -> list[float]:
    """Per turn of ``record`` (an :func:`~ace_gym.eval.run_episodes` record, which carries its
    replay fields), the partial score of the grid after the turn minus before it. The record's
    actions are played again on its spec's env (as ``ace-gym replay`` does), so a turn's credit is
    what its calls did to the grid; ConfigError (naming the field) for a record without replay fields."""
    from ace_gym.eval.replay import replay_spec

    spec = replay_spec(record)
    env = spec.make_env()
    env.reset(seed=spec.seed, options=spec.reset_options())
    core = env.unwrapped
    before = partial_score(core.compiled, core.grid)
    credits = []
    for turn in record["turns"]:
        env.step(turn["action"])
        after = partial_score(core.compiled, core.grid)
        credits.append(after - before)
        before = after
    env.close()
    return credits


def credited_turn_samples(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`~ace_gym.runs.loop.turn_samples` of ``record``, each with ``credit``: the partial
    score its turn added (:func:`turn_credit`)."""
    return [
        {**sample, "credit": credit} for sample, credit in zip(turn_samples(record), turn_credit(record), strict=True)
    ]

"""Partial credit for trainers: the partial score, its per-turn credit, and the TRL options that pay it."""

from __future__ import annotations

import json

import pytest

from ace_gym.agents import BatchingSolver
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import fit_spec
from ace_gym.feedback.rubric import graded_rules
from ace_gym.integrations.rewards import (
    credited_turn_samples,
    partial_reward,
    partial_score,
    partial_summary,
    record_partial_score,
    turn_credit,
)

SPEC = EpisodeSpec.of("course", instance_index=9, seed=4)
"""H=5: the batching solver fills its slots in its third turn and calls done in its fourth."""


def _env() -> AceEnv:
    env = AceEnv(SPEC.domain)
    env.reset(seed=SPEC.seed, options=SPEC.reset_options())
    return env


def test_partial_score__pays_each_slot_valid_item_and_the_rules_on_a_filled_grid_only() -> None:
    env = _env()
    compiled = env.compiled
    items = len(compiled.slots) + len(graded_rules(compiled))
    assert len(compiled.slots) == 5 and partial_score(compiled, env.grid) == 0.0
    for filled, slot in enumerate(compiled.slots, start=1):
        valid = compiled.item_ids[min(slot.valid_items)]
        env.step({"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": valid}})
        if filled < len(compiled.slots):  # the rules count once every slot is filled
            assert partial_score(compiled, env.grid) == pytest.approx(filled / items)
    solved = env.score().score == 1.0
    assert (partial_score(compiled, env.grid) == 1.0) == solved  # 1.0 exactly when the episode scores 1


def test_turn_credit__each_turn_earns_what_its_calls_did_to_the_grid_and_sums_to_the_final_partial_score() -> None:
    spec = fit_spec(SPEC)
    (record,) = run_episodes([spec], BatchingSolver())
    credits = turn_credit(record)
    assert record["score"] == 1.0 and len(credits) == len(record["turns"]) == 4
    assert credits[2] == pytest.approx(1.0) and credits[:2] == [0.0, 0.0] and credits[3] == 0.0
    assert sum(credits) == pytest.approx(record_partial_score(record)) == 1.0
    samples = credited_turn_samples(record)
    assert [sample["credit"] for sample in samples] == credits
    assert partial_summary(record)["partial_score"] == 1.0
    assert partial_reward([partial_summary(record)]) == [1.0] and partial_reward.__name__ == "ace_partial"
    with pytest.raises(ConfigError, match="replay"):
        turn_credit({key: value for key, value in record.items() if key != "replay"})


def test_environment_factory__reward_partial_pays_each_filled_slot_and_keeps_the_score_in_the_episode() -> None:
    from ace_gym.integrations.trl import environment_factory, train_dataset

    environment = environment_factory(["course"], reward="partial")["course"]()
    environment.reset(**train_dataset([SPEC])[0])
    compiled = _env().compiled
    items = len(compiled.slots) + len(graded_rules(compiled))
    slot = compiled.slots[0]
    reply = environment.set_slot(row=slot.row, col=slot.col, id=compiled.item_ids[min(slot.valid_items)])
    assert json.loads(reply)["status"] == "success"
    assert environment.get_reward() == pytest.approx(1 / items)
    assert environment.episode["score"] == 0.0  # AceMetrics still logs the 0/1 score
    with pytest.raises(ConfigError, match="reward"):
        environment_factory(["course"], reward="dense")

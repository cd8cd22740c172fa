"""Rendering, token accounting and whole-round truncation of histories; determinism of samples."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ace_gym.longbench.question_types import QUESTION_TYPES
from ace_gym.longbench.samples import SampleConfig, build_sample
from ace_gym.longbench.simulator import Behaviour, simulate
from ace_gym.longbench.trajectory import build_trajectory, render_round
from ace_gym.runs.tokens import message_tokens


@pytest.mark.parametrize("fmt", ["concise", "verbose"])
@pytest.mark.parametrize("budget", [3000, 20000, 90000])
def test_build_trajectory__keeps_whole_rounds_within_budget_and_the_next_round_would_not_fit(
    synthetic, tokenizer, fmt: str, budget: int
) -> None:
    rounds = simulate(synthetic, Behaviour(), fmt, np.random.default_rng(budget))
    trajectory = build_trajectory(synthetic, fmt, rounds, tokenizer, budget)
    assert trajectory.tokens == sum(message_tokens(tokenizer, m) for m in trajectory.messages) <= budget
    assert trajectory.next_round_tokens is not None and trajectory.tokens + trajectory.next_round_tokens > budget
    replay = simulate(synthetic, Behaviour(), fmt, np.random.default_rng(budget))
    next_round = render_round(synthetic, fmt, next(itertools.islice(replay, len(trajectory.rounds), None)))
    assert sum(message_tokens(tokenizer, m) for m in next_round) == trajectory.next_round_tokens
    assert trajectory.messages[-1]["role"] == "user" and trajectory.messages[-1]["content"].startswith(
        f"Round {len(trajectory.rounds)}: Guess "
    )


def test_render_round__first_round_of_a_game_has_no_tool_call_and_ids_pair_up(synthetic) -> None:
    rounds = simulate(synthetic, Behaviour(), "concise", np.random.default_rng(0))
    for played in (next(rounds) for _ in range(40)):
        messages = render_round(synthetic, "concise", played)
        if played.in_game == 1:
            assert [m["role"] for m in messages] == ["assistant", "user"]
        else:
            assert [m["role"] for m in messages] == ["assistant", "tool", "assistant", "user"]
            call = messages[0]["tool_calls"][0]
            assert call["id"] == messages[1]["tool_call_id"] == f"call_{played.number}"
            assert json.loads(call["function"]["arguments"]) == {
                "conditions": [c.to_json() for c in played.query.conditions]
            }
        assert messages[-2]["content"] == f"<answer>{synthetic.names[played.guess]}</answer>"


@pytest.mark.parametrize("question_type", QUESTION_TYPES)
def test_sample__observation_fits_the_budget_and_the_cut_is_tight(tokenizer, question_type: str) -> None:
    config = SampleConfig(target_tokens=30000, question_reserve=200)
    sample = build_sample(config, question_type, 11, tokenizer)
    observation = sample.observation()
    assert sum(message_tokens(tokenizer, m) for m in observation) == sample.tokens <= 30000
    budget = 30000 - sample.system_tokens - config.question_reserve
    assert sample.trajectory.tokens <= budget < sample.trajectory.tokens + sample.trajectory.next_round_tokens
    assert sample.question_tokens <= config.question_reserve


def test_sample__same_seed_gives_byte_identical_messages_and_other_seeds_differ(tokenizer) -> None:
    config = SampleConfig(fmt="verbose", target_tokens=40000)
    first, second, other = (build_sample(config, "Intersection", seed, tokenizer) for seed in (5, 5, 6))
    assert json.dumps(first.observation()) == json.dumps(second.observation())
    assert first.info() == second.info()
    assert json.dumps(first.observation()) != json.dumps(other.observation())


def test_sample__is_identical_in_another_process_with_other_hash_seeds(tokenizer) -> None:
    code = (
        "import hashlib, json; from ace_gym.longbench.samples import SampleConfig, build_sample; "
        "from ace_gym.runs.tokens import ApproxTokenizer; "
        "s = build_sample(SampleConfig(knowledge='ki', table='ace:shopping', target_tokens=20000), "
        "'Count Frequency(Env)', 9, ApproxTokenizer()); "
        "print(hashlib.sha256(json.dumps([s.observation(), s.question.answer]).encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    here = build_sample(
        SampleConfig(knowledge="ki", table="ace:shopping", target_tokens=20000), "Count Frequency(Env)", 9, tokenizer
    )
    assert digests == {hashlib.sha256(json.dumps([here.observation(), here.question.answer]).encode()).hexdigest()}

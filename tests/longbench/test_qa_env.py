"""ALB-QA-v0: Gymnasium conformance, determinism, official rewards, hostile answers, KF/KI bijection."""

from __future__ import annotations

import itertools
import json
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ace_gym.errors import ConfigError
from ace_gym.longbench.qa_env import ALBQAEnv
from ace_gym.longbench.question_types import QUESTION_TYPES
from ace_gym.longbench.questions import ask
from ace_gym.longbench.scoring import answer_text
from ace_gym.longbench.simulator import Behaviour, simulate
from ace_gym.longbench.tables import load_table, mask_table
from ace_gym.longbench.trajectory import build_trajectory


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"render": "text"}, {"fmt": "verbose", "knowledge": "ki", "table": "ace:meal", "target_tokens": "64k"}],
)
def test_check_env__passes_without_warnings(kwargs) -> None:
    env = gym.make("ALB-QA-v0", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)


def test_reset__same_seed_same_episode_other_seed_other_episode() -> None:
    env = ALBQAEnv(target_tokens=12000)
    first, info = env.reset(seed=3)
    second, again = ALBQAEnv(target_tokens=12000).reset(seed=3)
    assert json.dumps(first) == json.dumps(second) and info == again
    third, _ = env.reset(seed=4)
    assert json.dumps(third) != json.dumps(first)


SMALL_BUDGET = {"fmt": "verbose", "knowledge": "ki", "table": "ace:meal", "target_tokens": "64k"}
"""A budget that leaves one to three rounds: too few for a Find Duplicates question at some seeds."""


def test_reset__a_drawn_type_the_budget_cannot_fit_is_drawn_again_among_the_others() -> None:
    types = ["Find Duplicates(Tool)", "Find Target Offsets(Tool)"]
    env = ALBQAEnv(**SMALL_BUDGET, question_types=types)
    with pytest.raises(ConfigError, match="no feasible 'Find Duplicates"):  # seed 2 draws it, and it cannot fit
        ALBQAEnv(**SMALL_BUDGET, question_types=types[:1]).reset(seed=2)
    _, info = env.reset(seed=2)  # raised ConfigError before: a reset failed for some seeds
    assert info["question_type"] == "Find Target Offsets(Tool)"
    assert env.reset(seed=2)[1] == info  # still a function of the seed
    # a forced type is not replaced: the reset tries further sample seeds of the same type
    forced = env.reset(seed=2, options={"question_type": types[0]})[1]
    assert forced["question_type"] == types[0] and forced["seed"] != info["seed"]


@pytest.mark.parametrize("fmt", ["concise", "verbose"])
@pytest.mark.parametrize("question_type", QUESTION_TYPES)
def test_step__the_gold_answer_earns_reward_1_and_nonsense_0(fmt: str, question_type: str) -> None:
    env = ALBQAEnv(fmt=fmt, target_tokens=16000 if fmt == "concise" else 48000)
    _, info = env.reset(seed=1, options={"question_type": question_type})
    assert info["question_type"] == question_type and info["tokens"] <= info["target_tokens"]
    assert "gt" not in info  # the answer key stays with the grader
    observation, reward, terminated, truncated, step_info = env.step(answer_text(env.answer_key()))
    assert (reward, terminated, truncated, observation) == (1.0, True, False, [])
    assert step_info["score"] == 1.0 and step_info["gt"] == env.answer_key()
    env.reset(seed=1, options={"question_type": question_type})
    assert env.step("<answer>qwertz</answer>")[1] == 0.0


GARBAGE = "<answer>definitely not the answer 987654321</answer>"


def test_step__garbage_scores_0_on_every_seed_while_the_official_verdict_is_kept() -> None:
    """The official reading takes "not" for "no": garbage scored 1.0 on every yes/no question
    whose truth is no (issue 29). The strict default gives it 0 and keeps the official verdict in
    info; an answer that does say no still scores on those questions."""
    env = ALBQAEnv(target_tokens=6000, question_types="find_duplicates_tool", answers="paper")
    truths = []
    for seed in range(12):
        env.reset(seed=seed)
        _, reward, _, _, step_info = env.step(GARBAGE)
        truths.append(step_info["gt"])
        assert (reward, step_info["score"]) == (0.0, 0.0), seed
        assert step_info["official_score"] == float(step_info["gt"] is False), seed
        env.reset(seed=seed)
        assert env.step("<answer>No, none appears twice.</answer>")[1] == float(truths[-1] is False), seed
    assert set(truths) == {True, False}  # both truths were played
    drawn = ALBQAEnv(target_tokens=6000)
    for seed in range(24):
        drawn.reset(seed=seed)
        assert drawn.step(GARBAGE)[1] == 0.0, seed


def test_step__reward_official_pays_what_the_paper_scores() -> None:
    env = ALBQAEnv(target_tokens=6000, question_types="find_duplicates_tool", reward="official", answers="paper")
    seeds = []
    for seed in range(12):
        env.reset(seed=seed)
        if env.answer_key() is False:
            seeds.append(seed)
    assert seeds
    env.reset(seed=seeds[0])
    _, reward, _, _, info = env.step(GARBAGE)
    assert reward == info["score"] == info["official_score"] == 1.0


def test_step__assistant_message_actions_relaxed_tags_and_relative_error() -> None:
    env = ALBQAEnv(target_tokens=12000, question_types="count_correctness_env", require_answer_tag=False)
    env.reset(seed=0)
    assert env.step({"role": "assistant", "content": str(env.answer_key())})[1] == 1.0
    shaped = ALBQAEnv(target_tokens=12000, question_types="count_correctness_env", reward="relative_error")
    shaped.reset(seed=0)
    gold = shaped.answer_key()
    reward = shaped.step(f"<answer>{gold + 1}</answer>")[1]
    assert reward == pytest.approx(max(0.0, 1 - 1 / max(1, gold)))


def test_step__before_reset_raises_and_after_the_answer_gives_nothing() -> None:
    env = ALBQAEnv(target_tokens=12000)
    with pytest.raises(ResetNeeded):
        env.step("x")
    with pytest.raises(ResetNeeded):
        env.answer_key()
    env.reset(seed=0)
    env.step("<answer>1</answer>")
    _, reward, terminated, _, info = env.step("<answer>1</answer>")
    assert (reward, terminated) == (0.0, True) and "error" in info


ACTIONS = st.one_of(
    st.text(max_size=200),
    st.none(),
    st.integers(),
    st.floats(),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=20), st.integers(), st.none()), max_size=3),
    st.sampled_from(["<answer>" * 3000, "<answer>" + "9" * 5000 + "</answer>", "<answer>[" * 2000, "\ud800"]),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action=ACTIONS, question_type=st.sampled_from(QUESTION_TYPES))
def test_step__hostile_answers_never_raise(action, question_type: str) -> None:
    env = _hostile_env()
    env.reset(seed=0, options={"question_type": question_type})
    _, reward, terminated, truncated, info = env.step(action)
    assert 0.0 <= reward <= 1.0 and terminated and not truncated and "score" in info


_ENV: list[ALBQAEnv] = []


def _hostile_env() -> ALBQAEnv:
    if not _ENV:
        _ENV.append(ALBQAEnv(target_tokens=6000))
    return _ENV[0]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fmt": "short"},
        {"knowledge": "kx"},
        {"table": "ace:nope"},
        {"target_tokens": "3K"},
        {"target_tokens": 0},
        {"question_types": ["Intersections"]},
        {"render": "html"},
        {"reward": "dense"},
        {"behaviour": {"epsilon": 2}},
        {"evidence_position": 1.5},
        {"tokenizer": "tiktoken"},
    ],
)
def test_make__bad_configuration_is_a_config_error(kwargs) -> None:
    with pytest.raises(ConfigError):
        ALBQAEnv(**kwargs)


def _mapped(answer: object, names: dict[str, str]) -> object:
    if isinstance(answer, list):
        return [names[a] for a in answer]
    return names.get(answer, answer) if isinstance(answer, str) else answer


@pytest.mark.parametrize("fmt", ["concise", "verbose"])
def test_knowledge_free__same_seed_same_structure_and_mapped_answers(fmt: str, tokenizer) -> None:
    table = load_table("ace:course")
    masked, mask = mask_table(table, 0)
    names = dict(zip(table.names, masked.names, strict=True))
    for seed in range(3):
        behaviour = Behaviour(avoid_target=seed == 2)
        plain = list(itertools.islice(simulate(table, behaviour, fmt, np.random.default_rng(seed)), 12))
        other = list(itertools.islice(simulate(masked, behaviour, fmt, np.random.default_rng(seed)), 12))
        assert [(r.target, r.guess, r.remaining) for r in plain] == [(r.target, r.guess, r.remaining) for r in other]
        for a, b in zip(plain, other, strict=True):
            if a.query is not None:
                assert [mask.sections[c.section] for c in a.query.conditions] == [c.section for c in b.query.conditions]
                assert np.array_equal(a.query.intersection, b.query.intersection)
        trajectories = [
            build_trajectory(t, fmt, iter(r), tokenizer, 10**9) for t, r in ((table, plain), (masked, other))
        ]
        for question_type in QUESTION_TYPES:
            first, second = (ask(question_type, t, np.random.default_rng(seed)) for t in trajectories)
            assert (first is None) == (second is None)
            if first is not None:
                assert second.answer == _mapped(first.answer, names) and second.evidence == first.evidence


@pytest.mark.parametrize("question_type", QUESTION_TYPES)
def test_step__a_lone_surrogate_in_the_answer_never_reaches_info(question_type: str) -> None:
    env = _hostile_env()
    env.reset(seed=0, options={"question_type": question_type})
    info = env.step("<answer>\ud800, a\udfffb</answer>")[4]
    json.dumps(info, ensure_ascii=False).encode("utf-8")  # the prediction held the surrogate

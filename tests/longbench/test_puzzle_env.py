"""ALB-Puzzle-v0: conformance, the version space, a scripted solver, prefill, rewards, hostile turns."""

from __future__ import annotations

import itertools
import json
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ace_gym.longbench.puzzle_env import ALBPuzzleEnv
from ace_gym.longbench.tables import ItemTable
from tests.longbench.text_parser import parse_history


@pytest.mark.parametrize("kwargs", [{}, {"prefill_tokens": 3000}, {"fmt": "verbose", "reward": "shaped"}])
def test_check_env__passes_without_warnings(kwargs) -> None:
    env = gym.make("ALB-Puzzle-v0", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)


def _text_version_space(table: ItemTable, messages: list[dict]) -> list[str]:
    """Items consistent with every feedback of the current game, read from the conversation text."""
    feedback = [m for m in messages if m["role"] in ("user", "tool") and m["content"].startswith("Round ")]
    rounds = parse_history([{"role": "user", "content": m["content"]} for m in feedback])
    game = [r for r in rounds if r.game_start == rounds[-1].game_start] if rounds else []
    if rounds and rounds[-1].ends_game:
        game = []
    survivors = []
    for item in range(table.size):
        name = table.names[item]
        ok = all(name != r.guess for r in game)
        for played in game:
            for section, values in played.sections.items():
                mine = table.item_values(section, item)
                for value, mark in values:
                    if isinstance(mine, int):
                        number = int(value)
                        expected = (
                            "correct" if number == mine else "wrong, too low" if number < mine else "wrong, too high"
                        )
                        ok &= mark == expected
                    else:
                        ok &= (mark == "correct") == (value in mine)
        if ok:
            survivors.append(name)
    return survivors


def _query(table: ItemTable, messages: list[dict]) -> dict:
    """Conditions saying everything the current game's feedback said (read from the text)."""
    conditions = []
    feedback = [m for m in messages if m["role"] in ("user", "tool") and m["content"].startswith("Round ")]
    rounds = parse_history([{"role": "user", "content": m["content"]} for m in feedback])
    game = [r for r in rounds if r.game_start == rounds[-1].game_start] if rounds else []
    for played in game:
        for section, values in played.sections.items():
            for value, mark in values:
                if table.section(section).kind == "numeric":
                    comparator = {"correct": "==", "wrong, too low": ">", "wrong, too high": "<"}[mark]
                    conditions.append(
                        {"type": "numeric", "section": section, "comparator": comparator, "threshold": int(value)}
                    )
                else:
                    conditions.append(
                        {"type": "value", "section": section, "values": [value], "exclude": mark != "correct"}
                    )
    return {"conditions": conditions}


@pytest.mark.parametrize("prefill", [0, 2500])
def test_scripted_solver__solves_and_the_version_space_always_holds_the_target(prefill: int) -> None:
    env = ALBPuzzleEnv(table="synthetic:300", prefill_tokens=prefill, max_rounds=25)
    solved = 0
    for seed in range(8):
        messages, info = env.reset(seed=seed)
        table = env.table
        sizes = [info["version_space"]]
        assert len(_text_version_space(table, messages)) == info["version_space"]
        guessed: list[str] = []
        terminated = truncated = False
        while not (terminated or truncated):
            query = _query(table, info["messages"])
            if query["conditions"]:
                call = {"name": table.tool_name, "arguments": json.dumps(query)}
                turn = {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "q", "type": "function", "function": call}],
                }
                replies, *_, info = env.step(turn)
                candidates = json.loads(replies[0]["content"])["intersection"]
            else:
                candidates = list(table.names)
            space = _text_version_space(table, info["messages"])
            name = next(c for c in candidates if c not in guessed)
            assert name in space
            guessed.append(name)
            _, reward, terminated, truncated, info = env.step(f"<answer>{name}</answer>")
            assert info["consistent_guess"] == [True]
            sizes.append(info["version_space"])
            assert len(_text_version_space(table, info["messages"])) == info["version_space"] or terminated
        assert all(a >= b for a, b in itertools.pairwise(sizes)) and sizes[-1] >= 1
        solved += terminated
        assert terminated and reward == 1.0 and info["rounds"] <= 25
    assert solved == 8


def test_random_guesses__never_leave_the_target_outside_the_version_space() -> None:
    env = ALBPuzzleEnv(table="synthetic:200", max_rounds=40, reward="shaped")
    rng = np.random.default_rng(0)
    for seed in range(6):
        env.reset(seed=seed)
        done = False
        while not done:
            name = env.table.names[int(rng.integers(env.table.size))]
            _, reward, terminated, truncated, info = env.step(f"<answer>{name}</answer>")
            done = terminated or truncated
            assert reward == pytest.approx(
                (1.0 if terminated else 0.0) + (0.1 if info["consistent_guess"][0] else -0.1)
            )
        if not terminated:  # the space only shrinks, so holding the target at the end means holding it throughout
            space = _text_version_space(env.table, info["messages"])
            assert info["target"] in space and len(space) == info["version_space"]


def test_prefill__continues_an_unsolved_game_of_about_the_requested_size() -> None:
    env = ALBPuzzleEnv(prefill_tokens=6000)
    messages, info = env.reset(seed=4)
    assert info["prefill_rounds"] > 3 and 4000 < info["tokens"] <= 6000 + 200
    rounds = parse_history(messages[1:-1])
    assert not rounds[-1].ends_game and messages[-1]["content"].startswith("Continue the game")
    _, _, _, _, step_info = env.step("<answer>Item_1</answer>")
    assert f"Round {rounds[-1].number + 1}: Guess Item_1" in step_info["messages"][-1]["content"]


def test_step__errors_are_observations_and_limits_truncate() -> None:
    env = ALBPuzzleEnv(max_rounds=2, max_turns=5)
    env.reset(seed=0)
    replies, _, terminated, truncated, _ = env.step("I think I will wait.")
    assert replies[0]["role"] == "user" and "no tool call" in replies[0]["content"] and not (terminated or truncated)
    bad = '<tool_call>{"name": "query_items", "arguments": {"conditions": [{"type": "value", "section": "Attr_9"}]}}</tool_call>'
    replies, *_ = env.step(bad)
    assert "unknown section" in json.loads(replies[0]["content"])["error"]
    replies, *_ = env.step('<tool_call>{"name": "guess", "arguments": {"name": "Nobody"}}</tool_call>')
    assert replies[0]["content"].startswith("Unknown name") and env.step("<answer>Item_2</answer>")[4]["rounds"] == 1
    _, _, terminated, truncated, info = env.step("<answer>Item_3</answer>")
    assert truncated and not terminated and "target" in info
    assert env.step("<answer>Item_4</answer>")[4]["errors"] == ["the episode has ended"]


TURNS = st.one_of(
    st.text(max_size=200),
    st.none(),
    st.integers(),
    st.builds(
        lambda n, a: f'<tool_call>{{"name": "{n}", "arguments": {a}}}</tool_call>',
        st.sampled_from(["query_items", "guess", "x"]),
        st.sampled_from(["{}", "[]", "1", '{"conditions": "x"}', '{"conditions": [{}]}', '{"name": 3}', "{"]),
    ),
    st.dictionaries(
        st.sampled_from(["role", "content", "tool_calls"]),
        st.one_of(st.text(max_size=10), st.none(), st.lists(st.integers(), max_size=2)),
    ),
    st.sampled_from(["<answer>" * 2000, "<tool_call>" * 500, "<answer>\ud800</answer>"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turn=TURNS)
def test_step__hostile_turns_never_raise(turn) -> None:
    env = _env()
    env.reset(seed=0)
    replies, reward, *_ = env.step(turn)
    assert isinstance(replies, list) and replies and np.isfinite(reward)
    assert env.observation_space.contains(replies)


_ENVS: list[ALBPuzzleEnv] = []


def _env() -> ALBPuzzleEnv:
    if not _ENVS:
        _ENVS.append(ALBPuzzleEnv())
    return _ENVS[0]


def _openai_call(name: str, arguments: object) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "a", "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def _deep_dict(depth: int = 100_000) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "turn",
    [
        _openai_call("guess", {"name": 10**5000}),  # ValueError out of step() (issue 27)
        _openai_call("guess", _deep_dict()),  # RecursionError out of step()
        _openai_call("query_items", {"conditions": [{"type": "value", "section": 10**5000}]}),
        _openai_call("query_items", {"conditions": [{"type": "value", "section": [_deep_dict()]}]}),
        _openai_call("query_items", {"conditions": [{"type": np.array([1, 2]), "section": "Attr_2"}]}),
        '<tool_call>\n{"name": "x\ud800", "arguments": {',  # a lone surrogate in the tool message's name
        _openai_call("guess\ud800", {"\ud800": "\udfff"}),
        '<tool_call>{"name": "guess", "arguments": {"name": "\\ud800"}}</tool_call> \ud800',
    ],
)
def test_step__huge_deep_and_unencodable_arguments_are_answered_in_valid_utf8(turn) -> None:
    env = _env()
    env.reset(seed=0)
    replies, reward, *_, info = env.step(turn)
    assert replies and env.observation_space.contains(replies) and reward == 0.0
    json.dumps([replies, info["messages"]], ensure_ascii=False).encode("utf-8")  # every string encodes

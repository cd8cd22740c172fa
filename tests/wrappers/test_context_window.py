"""ContextWindow: the context policy for long horizons (issue 29, point 2): what the model is shown
each turn is the opening, a fresh grid state and the last N turns; records say so exactly."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import pytest

from ace_gym.agents.base import Completion
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import FIT, fit_spec
from ace_gym.eval.replay import replay_record
from ace_gym.policies import make_policy
from ace_gym.runs.loop import turn_samples
from ace_gym.stacks import StackSpec
from ace_gym.wrappers import ChatAdapter, ContextWindow, StepBudget, context_messages

GRID_CALL = '<tool_call>{"name": "get_current_grid_state", "arguments": {}}</tool_call>'
H15 = 28
"""The first instance of every domain of the bundled 5x5 data with 15 hidden slots."""


def _window(last_turns: int = 2, **adapter: Any) -> ContextWindow:
    return ContextWindow(ChatAdapter(AceEnv("course"), **adapter), last_turns=last_turns)


def _size(messages: list[dict[str, Any]]) -> int:
    """Characters the model reads: contents and the calls' names and arguments."""
    return sum(
        len(m.get("content") or "")
        + sum(len(c["function"]["name"] + c["function"]["arguments"]) for c in m.get("tool_calls", ()))
        for m in messages
    )


def test_context__is_the_whole_conversation_until_turns_are_left_out_then_opening_grid_and_last_turns() -> None:
    env = _window(last_turns=2)
    _, info = env.reset(options={"instance_index": 0})
    assert info["context"] == {"head": 2, "kept_from": 2, "grid_state": None}
    set_call = json.dumps({"name": "set_slot", "arguments": {"row": 0, "col": 0, "id": "X"}})
    for turn in range(1, 5):
        _, _, _, _, info = env.step(GRID_CALL if turn != 2 else f"<tool_call>{set_call}</tool_call>")
        conversation = list(info["messages"])
        assert len(conversation) == 2 + 2 * turn  # the full conversation stays in info["messages"]
        shown = env.context
        assert shown == context_messages(conversation, info["context"])
        if turn <= 2:
            assert shown == conversation and info["context"]["grid_state"] is None
            continue
        assert shown[:2] == conversation[:2]
        assert shown[2]["role"] == "user" and f"your first {turn - 2} turns are not shown" in shown[2]["content"]
        assert json.dumps(env.unwrapped.grid, separators=(",", ":")) in shown[2]["content"]  # the grid now
        assert shown[3:] == conversation[-4:] and shown[3]["role"] == "assistant"  # whole turns, calls first


def test_context__leaves_the_adapter_unchanged_observations_rewards_and_conversation() -> None:
    plain, windowed = ChatAdapter(AceEnv("meal")), ContextWindow(ChatAdapter(AceEnv("meal")), last_turns=1)
    first, second = plain.reset(seed=3), windowed.reset(seed=3)
    assert first[0] == second[0]
    for action in (GRID_CALL, "no call", GRID_CALL, '<tool_call>{"name": "done", "arguments": {}}</tool_call>'):
        a, b = plain.step(action), windowed.step(action)
        assert a[:4] == b[:4] and a[4]["messages"] == b[4]["messages"]


def test_context__refuses_a_bad_window_and_a_stack_without_an_adapter() -> None:
    with pytest.raises(ConfigError, match="last_turns"):
        _window(last_turns=0)
    with pytest.raises(ConfigError, match="ChatAdapter"):
        ContextWindow(AceEnv("course"))  # type: ignore[arg-type]


def test_context__is_a_registry_wrapper_and_its_stack_rebuilds_from_env_spec() -> None:
    stack = StackSpec.of("ACE-course-v0", {}, ["chat_adapter", "context_window", ("step_budget", {"max_turns": 9})])
    assert [name for name, _ in stack.wrappers] == ["chat_adapter", "context_window", "step_budget"]
    env = stack.make()
    assert isinstance(env, StepBudget) and isinstance(env.env, ContextWindow) and env.env.last_turns == 4
    rebuilt = gym.make(env.spec, disable_env_checker=True)
    assert rebuilt.get_wrapper_attr("last_turns") == 4


def test_episode_spec__without_a_context_plays_no_window_and_with_one_names_it() -> None:
    plain = EpisodeSpec.of("course", instance_index=0)
    assert "context" not in plain.to_json() and "context" not in plain.key("solver")
    windowed = EpisodeSpec.of("course", instance_index=0, max_turns=50, context={"last_turns": 3})
    named = '{"kwargs": {"last_turns": 3}, "name": "context_window"}'
    assert windowed.key("solver") != plain.key("solver") and named in windowed.key("solver")
    assert EpisodeSpec.from_json(windowed.to_json()) == windowed
    assert ("context_window", {"last_turns": 3}) in windowed.stack.wrappers


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_solver__solves_h15_under_a_context_of_four_turns_with_bounded_prompts(domain: str) -> None:
    default = EpisodeSpec.of(domain, instance_index=H15)
    (full,) = run_episodes([default], make_policy("solver"))
    (record,) = run_episodes(
        [EpisodeSpec.of(domain, instance_index=H15, context={"last_turns": 4})], make_policy("solver")
    )
    assert record["hidden_slots"] == 15 and record["score"] == 1.0 and record["terminated"]
    assert record["messages"] == full["messages"]  # the same episode; only what the model is shown differs
    samples = turn_samples(record)
    assert len(samples) == record["usage"]["turns"] > 40
    opening = record["messages"][:2]
    turns = _turn_groups(record["messages"])
    grid_states = [s["messages"][2] for s in samples if len(s["messages"]) > 2 and s["messages"][2]["role"] == "user"]
    assert len(grid_states) == len(samples) - 5  # from the sixth turn on (five played), the first are left out
    bound = _size(opening) + max(_size([g]) for g in grid_states) + 4 * max(map(_size, turns))
    largest = max(_size(s["messages"]) for s in samples)
    assert largest <= bound  # the prompt does not grow with the episode beyond the grid state
    assert _size(full["messages"][:-2]) > 2.5 * largest  # while the whole conversation grows with it


def _turn_groups(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The conversation's turns: each assistant message with the messages after it."""
    starts = [k for k, m in enumerate(messages) if m["role"] == "assistant"]
    return [messages[a:b] for a, b in zip(starts, [*starts[1:], len(messages)], strict=True)]


def test_solver_batch__solves_h15_under_fit_and_a_one_turn_context_on_every_domain() -> None:
    specs = [fit_spec(EpisodeSpec.of(d, instance_index=H15, context={"last_turns": 1})) for d in DOMAIN_NAMES]
    records = list(run_episodes(specs, make_policy(FIT["policy"])))
    assert [r["score"] for r in records] == [1.0] * len(DOMAIN_NAMES)
    for record in records:
        assert record["hidden_slots"] == 15 and record["usage"]["turns"] >= 3
        later = turn_samples(record)[2:]
        assert later and all(
            s["messages"][2]["role"] == "user" and "not shown" in s["messages"][2]["content"] for s in later
        )


def test_replay__an_episode_under_a_context_policy_replays_exactly_and_a_changed_context_is_found() -> None:
    (record,) = run_episodes(
        [EpisodeSpec.of("travel", instance_index=7, context={"last_turns": 2})], make_policy("solver")
    )
    assert all("context" in turn for turn in record["turns"])
    assert replay_record(json.loads(json.dumps(record))) is None
    tampered = json.loads(json.dumps(record))
    tampered["turns"][5]["context"]["kept_from"] += 2
    mismatch = replay_record(tampered)
    assert mismatch is not None and mismatch.turn == 5 and mismatch.field == "context"


class _Recorder:
    """A chat engine that calls get_current_grid_state every turn and keeps the conversations it was given."""

    def __init__(self) -> None:
        self.shown: list[list[dict[str, Any]]] = []

    def generate(self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[Any]) -> list[Completion]:
        self.shown += [[dict(m) for m in conversation] for conversation in conversations]
        return [Completion(GRID_CALL, prompt_tokens=1, completion_tokens=1) for _ in conversations]


def test_records__an_engine_is_shown_each_turn_s_context_and_the_record_s_samples_rebuild_it() -> None:
    recorder = _Recorder()
    spec = EpisodeSpec.of("shopping", instance_index=3, max_turns=7, context={"last_turns": 2})
    (record,) = run_episodes([spec], recorder)
    samples = turn_samples(record)
    assert [s["messages"] for s in samples] == recorder.shown and len(samples) == 7
    assert [len(s) for s in recorder.shown] == [2, 4, 6, 7, 7, 7, 7]  # opening, +grid state, 2 turns of 2
    assert record["tokens"] is None  # no single growing token sequence: samples are per turn
    (plain,) = run_episodes([EpisodeSpec.of("shopping", instance_index=3, max_turns=7)], _Recorder())
    assert all("context" not in turn for turn in plain["turns"])
    assert [s["messages"] for s in turn_samples(plain)][-1] == plain["messages"][:-2]


def test_feedback_rounds__the_feedback_message_is_shown_in_the_context_and_the_episode_replays() -> None:
    spec = EpisodeSpec.of(
        "course", instance_index=20, max_turns=30, feedback_rounds={"max_attempts": 3}, context={"last_turns": 2}
    )
    (record,) = run_episodes([spec], make_policy("greedy"))
    feedback_at = [k for k, m in enumerate(record["messages"]) if m["role"] == "user" and k > 1]
    assert feedback_at and record["score"] == 0.0  # greedy fails: feedback rounds after its attempts
    samples = turn_samples(record)
    after = [s for s in samples if len(s["messages"]) > 2 and record["messages"][feedback_at[0]] in s["messages"]]
    assert after and all(s["messages"][2]["content"].startswith("The conversation is shortened") for s in after)
    assert replay_record(json.loads(json.dumps(record))) is None

"""The one rollout loop, with a toy env and actor: batch refill, finishing order, usage, errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ace_gym.agents import Completion
from ace_gym.errors import ConfigError
from ace_gym.runs.loop import Actor, EngineActor, Episode, Turn, jsonable, run_loop


class CountdownEnv:
    """Ends after ``length`` steps; its info carries the step number."""

    def __init__(self, length: int) -> None:
        self.length, self.steps, self.closed = length, 0, False

    def reset(self, **_: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return [{"role": "user", "content": f"count {self.length}"}], {"tools": [], "length": self.length}

    def step(self, action: Any) -> tuple[None, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        return None, 1.0, self.steps == self.length, False, {"step": self.steps, "action": action}

    def close(self) -> None:
        self.closed = True


class EchoActor(Actor):
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def act(self, episodes: Sequence[Episode]) -> list[Turn]:
        self.batches.append([episode.key for episode in episodes])
        return [Turn(f"{episode.key}@{episode.usage['turns']}") for episode in episodes]


def _record(episode: Episode, terminated: bool, truncated: bool, info: dict[str, Any]) -> dict[str, Any]:
    return {"key": episode.key, "turns": episode.turns, "usage": dict(episode.usage), "env": episode.env}


def _open(length: int) -> tuple[Episode, Any, dict[str, Any]]:
    episode = Episode(f"e{length}", "echo", CountdownEnv(length), _record)
    return episode, *episode.reset()


def test_run_loop__refills_the_batch_as_episodes_end_and_yields_in_finishing_order() -> None:
    actor = EchoActor()
    records = list(run_loop([3, 1, 2], _open, actor, batch_size=2))
    assert [r["key"] for r in records] == ["e1", "e3", "e2"]
    assert actor.batches == [["e3", "e1"], ["e3", "e2"], ["e3", "e2"]]
    three = records[1]
    assert [t["info"]["action"] for t in three["turns"]] == ["e3@0", "e3@1", "e3@2"]
    assert three["usage"]["turns"] == 3 and three["usage"]["time_s"] >= three["usage"]["env_s"] > 0
    assert all(r["env"].closed for r in records)


def test_run_loop__refuses_a_bad_batch_size() -> None:
    for bad in (0, True, 2.0):
        with pytest.raises(ConfigError):
            run_loop([1], _open, EchoActor(), batch_size=bad)  # type: ignore[arg-type]


def test_engine_actor__charges_each_episode_the_whole_generate_call_and_checks_the_count() -> None:
    class Engine:
        def __init__(self, extra: int) -> None:
            self.extra = extra

        def generate(self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[Any]) -> list[Completion]:
            return [Completion("hi", prompt_tokens=2, completion_tokens=1)] * (len(conversations) + self.extra)

    records = list(run_loop([2, 2], _open, EngineActor(Engine(0)), batch_size=2))
    assert all(r["usage"]["prompt_tokens"] == 4 and r["usage"]["completion_tokens"] == 2 for r in records)
    assert records[0]["usage"]["generation_s"] == records[1]["usage"]["generation_s"] > 0
    with pytest.raises(RuntimeError, match="3 completions for 2 conversations"):
        list(run_loop([2, 2], _open, EngineActor(Engine(1)), batch_size=2))


def test_episode__policy_seed_given_as_a_function_is_computed_once_on_first_use() -> None:
    asked: list[int] = []

    def seed() -> int:
        asked.append(1)
        return 1234

    episode = Episode("e", "echo", CountdownEnv(1), _record, policy_seed=seed)
    assert asked == []
    assert episode.policy_seed == episode.policy_seed == 1234
    assert asked == [1]
    assert Episode("f", "echo", CountdownEnv(1), _record, policy_seed=7).policy_seed == 7


def test_jsonable__copies_flat_dicts_and_converts_keys_and_numpy_values() -> None:
    flat = {"tool": "done", "ok": True, "step": 3, "score": None}
    copied = jsonable(flat)
    assert copied == flat and copied is not flat
    assert jsonable({1: "a", "b": np.int64(2), "c": (np.float32(0.5), [np.bool_(True)])}) == {
        "1": "a",
        "b": 2,
        "c": [0.5, [True]],
    }
    assert type(jsonable({"b": np.int64(2)})["b"]) is int

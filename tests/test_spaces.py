"""The text and tool-call spaces: arguments as JSON that never raises, and async vector envs with
Gymnasium's defaults (shared memory) although no fixed-size buffer can hold their observations."""

from __future__ import annotations

import copy
import gc
import json
import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from ace_gym.spaces import ObservationFiles, SharedObservations, arguments_json
from ace_gym.wrappers import ChatAdapter
from tests.core_helpers import nested_list

HERMES_DONE = '<tool_call>{"name": "done", "arguments": {}}</tool_call>'


class _BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"row": 1, "id": "Ü"}, '{"row": 1, "id": "Ü"}'),
        ({"row": np.int64(3)}, '{"row": "np.int64(3)"}'),  # numpy scalars are written as their repr
        ({"row": 10**5000}, '"<unserialisable dict>"'),  # past Python's int->str digit limit
        (nested_list(), '"<unserialisable list>"'),  # past the recursion limit, for json and repr alike
        ({"x": _BrokenRepr()}, '"<unserialisable dict>"'),
    ],
)
def test_arguments_json__never_raises_and_names_what_it_cannot_write(arguments: Any, expected: str) -> None:
    assert arguments_json(arguments) == expected


def test_arguments_json__sorted_keys_make_equal_calls_equal() -> None:
    assert arguments_json({"b": 1, "a": 2}, sort_keys=True) == arguments_json({"a": 2, "b": 1}, sort_keys=True)


def _batch_pairs(mode: str, wrappers: list[Any]) -> list[tuple[Any, Any]]:
    """(observations, sync observations) after reset and two steps of the same actions."""
    actions = {
        "bare": [({"name": "get_current_grid_state"}, {"name": "done"}), ({"name": 5}, {"name": "done"})],
        "chat": [("no call here", HERMES_DONE), (HERMES_DONE, "<tool_call>{")],
    }["chat" if wrappers else "bare"]
    envs = [gym.make_vec("ACE-course-v0", 2, vectorization_mode=m, wrappers=wrappers) for m in (mode, "sync")]
    try:
        pairs = [(envs[0].reset(seed=4)[0], envs[1].reset(seed=4)[0])]
        for batch in actions:
            pairs.append((envs[0].step(batch)[0], envs[1].step(batch)[0]))
        return pairs
    finally:
        for env in envs:
            env.close()


@pytest.mark.parametrize("wrappers", [[], [ChatAdapter]], ids=["bare", "chat"])
def test_async_vector_env__works_with_default_kwargs_and_matches_sync(wrappers: list[Any]) -> None:
    for observations, expected in _batch_pairs("async", wrappers):
        assert isinstance(observations, tuple) and observations == expected


def test_async_vector_env__copy_false_gives_a_live_view_and_the_files_go_with_it() -> None:
    envs = gym.make_vec("ACE-course-v0", 2, vectorization_mode="async", vector_kwargs={"copy": False})
    try:
        view, _ = envs.reset(seed=0)
        assert isinstance(view, SharedObservations) and len(view) == 2
        first = tuple(view)
        envs.step(({"name": "get_current_grid_state"}, {"name": "get_global_check_budget"}))
        assert view[0] != first[0] and json.loads(view[1])["status"] == "success"
        assert view[-1] == view[1] and view[:1] == (view[0],) and copy.deepcopy(view) == tuple(view)
        directory = view.files.directory
    finally:
        envs.close()
    del envs, view
    gc.collect()
    assert not os.path.exists(directory)


def test_observation_files__a_reader_sees_the_latest_whole_observation(tmp_path: Any) -> None:
    files = ObservationFiles(2, str(tmp_path))
    assert files.read(0) is None  # before the first reset
    files.write(0, "a" * 100_000)
    files.write(0, [{"role": "tool", "content": "\ud800"}])  # anything picklable, lone surrogates too
    assert files.read(0) == [{"role": "tool", "content": "\ud800"}]
    assert sorted(os.listdir(tmp_path)) == ["0.pickle"]  # no temporary file left behind


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_env__an_action_no_process_can_receive_is_explained_and_envs_stay_in_step(mode: str) -> None:
    envs = gym.make_vec("ACE-course-v0", 2, vectorization_mode=mode)
    try:
        envs.reset(seed=0)
        budget = {"name": "get_global_check_budget", "arguments": {}}
        observations = envs.step(({"name": "set_slot", "arguments": nested_list()}, budget))[0]
        assert json.loads(observations[0])["messages"].startswith("Unknown tool, '<an action that cannot be sent")
        assert json.loads(observations[1])["status"] == "success"
        assert all(json.loads(o)["status"] == "success" for o in envs.step((budget, budget))[0])
    finally:
        envs.close()

"""Refine: a proposal is held back with a critique and never executed; the next call runs; the
before/after counts give improvement and degradation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ace_gym.agents.solver import ExactSolver
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.planning import Refine
from ace_gym.planning.taxonomy import DEFINITIONS
from tests.core_helpers import H15_INDEX

OPTIONS = {"instance_index": H15_INDEX}


def _counts(info: dict[str, Any]) -> dict[str, Any]:
    record = info["apb"]["refine"]
    return {k: record[k] for k in ("proposals", "correct_before", "correct_after", "improved", "degraded", "changed")}


def test_resubmitting_solver__scores_as_unwrapped_with_nothing_improved_or_degraded() -> None:
    for domain in ("course", "pc_build"):
        env = Refine(AceEnv(domain))
        observation, info = env.reset(seed=0, options=OPTIONS)
        episode = ExactSolver().start(observation, info, 0)
        calls = 0
        while True:
            observation, reward, terminated, truncated, info = env.step(episode.act(observation))
            calls += 1
            if terminated or truncated:
                break
        assert reward == 1.0 and calls % 2 == 0
        assert _counts(info) == {
            "proposals": calls // 2,
            "correct_before": calls // 2,
            "correct_after": calls // 2,
            "improved": 0,
            "degraded": 0,
            "changed": 0,
        }


def test_proposal__is_not_executed_and_gets_the_critique() -> None:
    env = Refine(AceEnv("meal"), critic="rules", mode="metric")
    env.reset(seed=0, options=OPTIONS)
    core = env.unwrapped
    slot = core.compiled.slots[0]
    bad = {"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": slot.candidate_ids[0]}}
    observation, reward, terminated, _, info = env.step(bad)
    envelope = json.loads(observation)
    assert envelope["status"] == "failed" and envelope["messages"].startswith("Not executed, ")
    assert "E4 (logic error)" in envelope["messages"] and DEFINITIONS["E6"] in envelope["messages"]
    assert (reward, terminated) == (0.0, False)
    assert info["apb"]["refine"]["phase"] == "proposal"
    assert "unobserved_id" in [f["cause"] for f in info["apb"]["refine"]["flags"]]
    assert core.state.grid[slot.cell] == -1  # not executed
    revision = {"name": "get_current_grid_state", "arguments": {}}
    observation, _, _, _, info = env.step(revision)
    assert json.loads(observation)["status"] == "success"
    assert _counts(info) == {
        "proposals": 1,
        "correct_before": 0,
        "correct_after": 1,
        "improved": 1,
        "degraded": 0,
        "changed": 1,
    }


def test_clean_proposal_revised_into_an_error__counts_as_degraded() -> None:
    env = Refine(AceEnv("course"), critic="none", mode="generic")
    env.reset(seed=0, options=OPTIONS)
    observation = env.step({"name": "get_current_grid_state", "arguments": {}})[0]
    message = json.loads(observation)["messages"]
    assert "rule checker" not in message and "E1" not in message
    info = env.step({"name": "teleport", "arguments": {}})[4]
    assert _counts(info)["degraded"] == 1 and _counts(info)["improved"] == 0


@pytest.mark.parametrize(("kwargs", "field"), [({"critic": "llm"}, "critic"), ({"mode": "verbose"}, "mode")])
def test_constructor__rejects_bad_arguments(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Refine(AceEnv("course"), **kwargs)
    assert raised.value.field == field

"""The Curriculum wrapper on a small procedural grid: where the scripted baselines take it, save
and restore, and the same levels in a single env and in sync and async vector envs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from ace_gym.curriculum import CurriculumState
from ace_gym.envs.procedural import ProceduralAceEnv
from ace_gym.errors import ConfigError
from ace_gym.eval import run_env_episodes, run_vector_episodes
from ace_gym.eval.curriculum_report import level_trajectory, success_per_level
from ace_gym.policies import make_policy
from ace_gym.wrappers import ChatAdapter, Curriculum, StepBudget

LADDER = [[2, 0], [3, 0], [3, 1], [4, 4], [4, 8]]
"""Greedy solves every B = 0 level and less and less of the others (about 0.4 at [3, 1])."""
GRID: dict[str, Any] = {"rows": 3, "cols": 4, "hidden_slots": [2, 3, 4], "decoy_budget": [0, 1, 4, 8]}
TOP = len(LADDER) - 1


def _procedural(**arguments: Any) -> ProceduralAceEnv:
    return ProceduralAceEnv("course", candidates_per_slot=6, **GRID, **arguments)


def _env(window: int = 4, shared: bool = False, **settings: Any) -> Curriculum:
    chat = StepBudget(ChatAdapter(_procedural()), 200)
    return Curriculum(chat, levels=LADDER, window=window, shared=shared, **settings)


def _single(policy: str, episodes: int, seed: int | None = 0, **settings: Any) -> list[dict[str, Any]]:
    return list(run_env_episodes(_env(**settings), make_policy(policy), num_episodes=episodes, seed=seed))


def _vector(kind: str, count: int, episodes: int, seed: int, **settings: Any) -> tuple[list[dict[str, Any]], Any]:
    vector = gym.vector.SyncVectorEnv if kind == "sync" else gym.vector.AsyncVectorEnv
    envs = vector([partial(_env, **settings) for _ in range(count)])
    try:
        records = list(run_vector_episodes(envs, make_policy("greedy"), num_episodes=episodes, seed=seed))
        return records, envs.call("curriculum_state")
    finally:
        envs.close()


def _levels(records: list[dict[str, Any]]) -> list[int]:
    return level_trajectory(records)["course"]


def _played(records: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    return [(r["instance_id"], r["curriculum_level"], r["score"]) for r in records]


def test_solver__climbs_to_the_top_level_one_window_at_a_time() -> None:
    assert _levels(_single("solver", 24)) == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4 + [4] * 8


def test_random__stays_at_the_bottom_level() -> None:
    assert _levels(_single("random", 24)) == [0] * 24


def test_greedy__settles_where_its_success_falls_below_the_target() -> None:
    records = _single("greedy", 160, window=8, target_success=0.6, floor=0.2)
    rates = {level: row["success_rate"] for level, row in success_per_level(records)["course"].items()}
    crossing = next(level for level, rate in rates.items() if rate <= 0.6)
    assert 0 < crossing < TOP and all(rates[level] > 0.6 for level in range(crossing))
    settled, _ = Counter(_levels(records)[80:]).most_common(1)[0]
    assert settled == crossing


def test_reset_info__records_the_level_and_the_instance_has_it() -> None:
    env = _env()
    _, info = env.reset(seed=1)
    assert info["curriculum"] == {"level": 0, "hidden_slots": 2, "decoy_budget": 0}
    assert (info["hidden_slots"], info["decoy_budget"]) == (2, 0)


def test_episode_end__reports_the_outcome_in_info() -> None:
    env = _env()
    env.reset(seed=1)
    *_, info = env.step('<tool_call>{"name": "done", "arguments": {}}</tool_call>')
    assert info["curriculum_outcome"] == {"domain": "course", "level": 0, "success": False, "reported": True}
    assert env.curriculum_state()["domains"]["course"] == {"position": 0, "outcomes": [0], "reported": 1}


def test_abandoned_episode__reports_nothing() -> None:
    env = _env()
    env.reset(seed=1)
    env.reset(seed=2)
    assert env.curriculum_state()["domains"] == {}


def test_shared__leaves_the_outcome_to_the_collector() -> None:
    env = _env(shared=True)
    env.reset(seed=1)
    *_, info = env.step('<tool_call>{"name": "done", "arguments": {}}</tool_call>')
    assert info["curriculum_outcome"]["reported"] is False
    assert env.curriculum_state()["domains"] == {}
    assert env.report(info["curriculum_outcome"]) == 0
    assert env.curriculum_state()["domains"]["course"]["reported"] == 1


def test_save_and_restore__mid_run_gives_identical_subsequent_levels() -> None:
    straight = _single("greedy", 48)
    first = _env()
    before = list(run_env_episodes(first, make_policy("greedy"), num_episodes=24, seed=0))
    saved = json.loads(json.dumps(first.curriculum_state()))
    restored = Curriculum(first.env, levels=LADDER, window=4)  # the same env stream, a fresh curriculum
    restored.load_curriculum_state(saved)
    after = list(run_env_episodes(restored, make_policy("greedy"), num_episodes=24, seed=None))
    assert _played(before + after) == _played(straight)
    assert len(set(_levels(straight))) > 2  # the run moved up and down


def test_load_curriculum_state__refuses_a_state_of_other_settings() -> None:
    saved = CurriculumState(LADDER, window=8).to_dict()
    with pytest.raises(ConfigError, match="other settings"):
        _env(window=4).load_curriculum_state(saved)


@pytest.mark.parametrize(
    "outcome",
    [
        None,
        {"level": 0, "success": True},
        {"domain": "course", "level": 9, "success": True},
        {"domain": "course", "level": 0, "success": 1},
    ],
)
def test_report__refuses_what_is_no_outcome(outcome: Any) -> None:
    with pytest.raises(ConfigError):
        _env().report(outcome)


def test_seeded_runs__are_deterministic() -> None:
    assert _played(_single("greedy", 30, seed=7)) == _played(_single("greedy", 30, seed=7))


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_vector__each_sub_env_plays_the_levels_of_a_single_env_with_its_seed(kind: str) -> None:
    records, states = _vector(kind, 2, 40, seed=5)
    singles = [_single("greedy", 40, seed=5 + i) for i in range(2)]
    assert set(_played(records)) <= set(_played(singles[0])) | set(_played(singles[1]))
    for played in (_played(single)[:10] for single in singles):  # each sub-env's first episodes are in
        assert set(played) <= set(_played(records))
    assert len({json.dumps(state) for state in states}) == 2  # two curricula


def test_shared_vector__sync_and_async_play_the_same_levels_and_keep_one_state() -> None:
    sync, sync_states = _vector("sync", 3, 60, seed=0, shared=True)
    asynchronous, async_states = _vector("async", 3, 60, seed=0, shared=True)
    assert _played(sync) == _played(asynchronous)
    assert all(state == sync_states[0] for state in [*sync_states, *async_states])
    replayed = CurriculumState(LADDER, window=4)  # the log replays the state
    for record in sync:
        replayed.report("course", record["curriculum_level"], record["score"] >= 1.0)
    assert replayed.to_dict() == sync_states[0]
    assert len(set(_levels(sync))) > 1


def test_make_vec__async_with_the_curriculum_as_its_outer_wrapper_plays_as_a_sync_vector_env() -> None:
    wrappers = [
        ChatAdapter,
        partial(StepBudget, max_turns=200),
        partial(Curriculum, levels=LADDER, window=4, shared=True),
    ]
    envs = gym.make_vec("ACE-course-procedural-v0", 3, "async", wrappers=wrappers, candidates_per_slot=6, **GRID)
    try:
        records = list(run_vector_episodes(envs, make_policy("greedy"), num_episodes=60, seed=0))
    finally:
        envs.close()
    assert _played(records) == _played(_vector("sync", 3, 60, seed=0, shared=True)[0])


def test_shared_vector_of_one__plays_the_levels_of_a_single_env() -> None:
    records, _ = _vector("sync", 1, 30, seed=3, shared=True)
    assert _played(records) == _played(_single("greedy", 30, seed=3))


def test_reset__refuses_options_that_pin_the_level() -> None:
    with pytest.raises(ConfigError, match="curriculum chooses"):
        _env().reset(seed=0, options={"decoy_budget": 4})


def test_reset__refuses_an_env_that_does_not_play_the_level() -> None:
    with pytest.raises(ConfigError, match="procedural env"):
        Curriculum(gym.make("ACE-course-v0")).reset(seed=0)


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")  # the wrapper is what is checked
def test_check_env__passes_on_a_curriculum_over_a_procedural_env() -> None:
    check_env(Curriculum(_procedural(), levels=LADDER, window=1), skip_render_check=True)


def test_bench_curriculum__prints_the_trajectories_and_agrees_across_env_kinds() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_curriculum.py"
    command = [sys.executable, str(script), "--episodes", "24", "--window", "4"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "solver: final level 4; trajectory 0x4 1x4 2x4 3x4 4x8" in completed.stdout
    assert "random: final level 0; trajectory 0x24" in completed.stdout

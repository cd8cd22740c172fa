"""The procedural env and the bundled 5x7 benchmark: conformance, seeding, configuration errors,
and generated data played through the core env's tools."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.envs.procedural import GeneratorSource, ProceduralAceEnv
from ace_gym.errors import ConfigError
from ace_gym.generators import generate_dataset, generate_instance
from ace_gym.generators.config import MAX_POOL_ITEMS, MAX_ROWS
from ace_gym.presets import PAPER_5X7
from ace_gym.registration import PROCEDURAL_ENV_IDS

ROOT = Path(__file__).resolve().parents[2]


def _play(env: AceEnv, replace: dict[int, str] | None = None) -> tuple[float, dict[str, Any]]:
    """Fill every hidden cell with its truth (or ``replace[slot index]``) via set_slot, then done."""
    compiled = env.compiled
    for s, slot in enumerate(compiled.slots):
        item_id = (replace or {}).get(s, compiled.item_ids[int(compiled.truth[slot.cell])])
        envelope = json.loads(
            env.step({"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": item_id}})[0]
        )
        assert envelope["status"] == "success", envelope
    _, reward, terminated, _, info = env.step({"name": "done", "arguments": {}})
    assert terminated
    return reward, info


def _a_decoy(env: AceEnv) -> dict[int, str]:
    entries = env.compiled.instance.slots
    s = next(k for k, entry in enumerate(entries) if entry.decoy_ids)
    return {s: entries[s].decoy_ids[0]}


@pytest.mark.parametrize("env_id", [i for i in PROCEDURAL_ENV_IDS if "10x10" not in i])
def test_check_env__passes_on_procedural_ids(env_id: str) -> None:
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [i for i in PROCEDURAL_ENV_IDS if "10x10" in i])
def test_check_env__passes_on_10x10_presets(env_id: str) -> None:
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    _, info = env.reset(seed=0)
    assert (info["rows"], info["cols"]) == (10, 10) and 20 <= info["hidden_slots"] <= 60


@pytest.mark.parametrize("env_id", PROCEDURAL_ENV_IDS)
def test_make__procedural_spec_kwargs_are_plain_values(env_id: str) -> None:
    spec = gym.spec(env_id)
    assert json.loads(json.dumps(spec.kwargs)) == spec.kwargs
    assert spec.entry_point == "ace_gym.envs.procedural:ProceduralAceEnv"


def test_reset__same_seed_same_instance_and_draws_from_the_lists() -> None:
    env = gym.make("ACE-course-procedural-v0", hidden_slots=[5, 11, 21], decoy_budget=[0, 10, 25])
    other = gym.make("ACE-course-procedural-v0", hidden_slots=[5, 11, 21], decoy_budget=[0, 10, 25])
    seen = set()
    for seed in range(8):
        first, info = env.reset(seed=seed)
        second, again = other.reset(seed=seed)
        assert first == second and info["instance_seed"] == again["instance_seed"]
        assert info["system_prompt"] == again["system_prompt"]
        assert info["instance_index"] == -1
        seen.add((info["hidden_slots"], info["decoy_budget"]))
        assert info["hidden_slots"] in (5, 11, 21) and info["decoy_budget"] in (0, 10, 25)
    assert len(seen) > 1


def test_reset__options_pin_the_instance() -> None:
    env = ProceduralAceEnv("meal", rows=4, cols=4, hidden_slots=[3, 6], decoy_budget=[2, 4])
    _, info = env.reset(seed=0, options={"hidden_slots": 6, "decoy_budget": 4, "instance_seed": 99})
    expected = generate_instance("meal", rows=4, cols=4, hidden_slots=6, decoy_budget=4, seed=99)
    assert env.compiled.instance == expected.model_copy(update={"instance_id": "meal_r4_c4_h6_b4_k25_s99"})
    assert (info["instance_id"], info["instance_seed"]) == ("meal_r4_c4_h6_b4_k25_s99", 99)


def test_reset__every_generated_grid_has_its_own_instance_id() -> None:
    env = ProceduralAceEnv("course", hidden_slots=11, decoy_budget=10)
    ids, grids = set(), set()
    for seed in range(4):
        observation, info = env.reset(seed=seed)
        assert info["instance_id"] == env.compiled.instance_id == env.compiled.instance.instance_id
        assert info["instance_id"] == f"course_r5_c7_h11_b10_k25_s{info['instance_seed']}"
        ids.add(info["instance_id"])
        grids.add(observation)
    assert len(grids) == len(ids) == 4
    assert (
        env.reset(seed=2)[1]["instance_id"]
        == ProceduralAceEnv("course", hidden_slots=11, decoy_budget=10).reset(seed=2)[1]["instance_id"]
    )
    wider = ProceduralAceEnv("course", hidden_slots=11, decoy_budget=10, candidates_per_slot=30)
    pinned = {"instance_seed": env.reset(seed=0)[1]["instance_seed"]}
    assert wider.reset(options=pinned)[1]["instance_id"] != env.reset(options=pinned)[1]["instance_id"]


def test_generator_source__any_ace_env_serves_it_as_the_procedural_id_does() -> None:
    made = gym.make("ACE-meal-procedural-v0", hidden_slots=[3, 6], decoy_budget=[np.int64(2), 4])
    source = GeneratorSource("meal", hidden_slots=[3, 6], decoy_budget=[2, 4])
    plain = AceEnv("meal", source=source)
    assert type(plain) is AceEnv and plain.dataset is None
    for seed in range(3):
        assert plain.reset(seed=seed) == made.reset(seed=seed)


def test_procedural_env__is_ace_env_on_a_generator_source_with_no_override() -> None:
    assert {name for name in vars(ProceduralAceEnv) if not name.startswith("__")} == set()
    env = ProceduralAceEnv("course", hidden_slots=5, decoy_budget=4)
    assert isinstance(env.source, GeneratorSource) and env.source.hidden_slot_choices == (5,)


def test_reset__dataset_options_raise_config_error() -> None:
    env = ProceduralAceEnv("travel", hidden_slots=3, decoy_budget=2)
    with pytest.raises(ConfigError, match="instance_seed"):
        env.reset(seed=0, options={"instance_index": 3})


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_procedural_env__truth_scores_one_and_a_decoy_scores_zero(domain: str) -> None:
    env = ProceduralAceEnv(domain, hidden_slots=7, decoy_budget=8)
    env.reset(seed=4)
    assert _play(env)[0] == 1.0
    env.reset(seed=4)
    reward, info = _play(env, _a_decoy(env))
    assert reward == 0.0 and info["reason"]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"hidden_slots": [5, 40]}, "hidden_slots"),
        ({"hidden_slots": []}, "hidden_slots"),
        ({"decoy_budget": "many"}, "decoy_budget"),
        ({"decoy_budget": [-1]}, "decoy_budget"),
        ({"rows": 0}, "rows"),
        ({"dataset": "5x5"}, "dataset"),
        ({"time_budget": 0}, "time_budget"),
        ({"time_budget": True}, "time_budget"),  # a bool is no number of seconds
        ({"hidden_slots": [5, True]}, "hidden_slots"),
        ({"domain": "curse"}, "domain"),
    ],
)
def test_procedural_env__invalid_config_raises_at_construction(arguments: dict, field: str) -> None:
    full = {"domain": "course", **arguments}
    with pytest.raises(ConfigError) as raised:
        ProceduralAceEnv(**full)
    assert raised.value.field == field


@pytest.mark.parametrize(
    ("arguments", "field", "largest"),
    [
        # reset() used to ask for 12.6 GiB: every hidden slot gets max(K, B + 2) candidates
        ({"hidden_slots": 5, "decoy_budget": 10**9}, "decoy_budget", (MAX_POOL_ITEMS - 35) // 5 - 1),
        ({"candidates_per_slot": 10**7}, "candidates_per_slot", (MAX_POOL_ITEMS - 35) // 21 + 1),  # H up to 21
        ({"decoy_budget": [0, 10**6]}, "decoy_budget", (MAX_POOL_ITEMS - 35) // 21 - 1),
        ({"rows": 10_000, "cols": 1, "hidden_slots": 1}, "rows", MAX_ROWS),
    ],
)
def test_make__knobs_that_would_exhaust_memory_raise_at_construction(arguments: dict, field: str, largest: int) -> None:
    with pytest.raises(ConfigError) as raised:
        gym.make("ACE-course-procedural-v0", **arguments)
    assert raised.value.field == field
    assert f"at most {largest}" in raised.value.problem


def test_make__largest_allowed_decoy_budget_is_accepted() -> None:
    largest = (MAX_POOL_ITEMS - 35) // 5 - 1
    assert gym.make(
        "ACE-course-procedural-v0", hidden_slots=5, decoy_budget=largest
    ).unwrapped.source.decoy_budget_choices == (largest,)
    with pytest.raises(ConfigError):
        gym.make("ACE-course-procedural-v0", hidden_slots=5, decoy_budget=largest + 1)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_bundled_5x7__paper_configuration_played_through_the_core_env(domain: str) -> None:
    env = AceEnv(domain, dataset="5x7")
    dataset = env.dataset
    expected = [
        f"{domain}_r5_c7_h{h}_b{b}"
        for h in PAPER_5X7["hidden_slots"]
        for b in PAPER_5X7["decoy_budgets"]  # type: ignore[attr-defined]
    ]
    assert list(dataset.instance_ids) == expected
    assert all(i.meta.certificate["holds"] for i in dataset)  # type: ignore[attr-defined]
    for instance_id in (f"{domain}_r5_c7_h21_b25", f"{domain}_r5_c7_h5_b2", f"{domain}_r5_c7_h1_b19"):
        env.reset(options={"instance_id": instance_id})
        assert _play(env)[0] == 1.0
        env.reset(options={"instance_id": instance_id})
        assert _play(env, _a_decoy(env))[0] == 0.0


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_bundled_5x7__is_reproduced_by_the_generator(domain: str) -> None:
    dataset = AceEnv(domain, dataset="5x7").dataset
    for h, b in ((1, 0), (11, 15), (21, 25)):
        instance = dataset[dataset.index_of(f"{domain}_r5_c7_h{h}_b{b}")]
        regenerated = generate_instance(domain, rows=5, cols=7, hidden_slots=h, decoy_budget=b, seed=42)
        assert regenerated == instance


def test_generated_file__loads_in_the_core_env(tmp_path: Path) -> None:
    path = tmp_path / "pc.json"
    generate_dataset("pc_build", rows=4, cols=6, hidden_slots=[3, 9], decoy_budgets=[0, 6], seed=8, path=path)
    env = AceEnv("pc_build", dataset=path)
    for index in range(4):
        env.reset(options={"instance_index": index})
        assert _play(env)[0] == 1.0


def test_import__envs_exports_the_procedural_env_lazily() -> None:
    # that import ace_gym loads no numba: tests/envs/test_ace_env.py
    code = (
        "import sys, ace_gym, ace_gym.envs\n"
        "assert 'ace_gym.generators' not in sys.modules, 'import ace_gym loaded the generator'\n"
        "assert 'ProceduralAceEnv' in dir(ace_gym.envs) and 'ProceduralAceEnv' in ace_gym.envs.__all__\n"
        "from ace_gym.envs import ProceduralAceEnv\n"
        "from ace_gym.envs.procedural import ProceduralAceEnv as direct\n"
        "assert ProceduralAceEnv is direct and 'ace_gym.generators' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

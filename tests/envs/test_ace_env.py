"""AceEnv: reset/step contract, reward, episode end, info, reproducibility across processes, pickling."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.error import ResetNeeded

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv, forget_stored_replies
from ace_gym.errors import ConfigError
from ace_gym.registration import ENV_IDS
from ace_gym.spaces import ToolCall
from ace_gym.tools import STOP
from ace_gym.tools.replies import texts_of
from tests.core_helpers import H1_INDEX, H15_INDEX, call, fill_with_truth, make_env, tool, truth_id

ROOT = Path(__file__).resolve().parents[2]
RESET_INFO_KEYS = {
    "domain",
    "instance_id",
    "instance_index",
    "rows",
    "cols",
    "hidden_slots",
    "hidden_positions",
    "decoy_budget",
    "system_prompt",
    "tools",
    "budgets",
}


def scripted_actions(env: gym.Env, count: int) -> list[dict[str, Any]]:
    """A fixed opening (query, set the truth, inspect) then ``count`` actions sampled from the seeded space."""
    compiled = env.unwrapped.compiled
    slot = compiled.slots[0]
    noun = env.unwrapped.domain.tool_noun
    actions: list[dict[str, Any]] = [
        {
            "name": f"query_{noun}_candidate_from_attribute",
            "arguments": {"row": slot.row, "col": slot.col, "field": "name", "operator": "not_in", "value": []},
        },
        {"name": "set_slot", "arguments": json.dumps({"row": slot.row, "col": slot.col, "id": truth_id(compiled, 0)})},
        {"name": "get_current_grid_state", "arguments": {}},
        {"name": f"check_{noun}_slot_constraints", "arguments": {"row": slot.row, "col": slot.col}},
    ]
    env.action_space.seed(7)
    actions += [env.action_space.sample() for _ in range(count)]
    return actions


def rollout(env_id: str, seed: int, steps: int = 40) -> dict[str, Any]:
    """Reset with ``seed``, play :func:`scripted_actions`, then ``done``; everything observed."""
    env = gym.make(env_id)
    observation, info = env.reset(seed=seed)
    record: dict[str, Any] = {"reset": observation, "instance_id": info["instance_id"], "steps": []}
    for action in [*scripted_actions(env, steps), {"name": "done", "arguments": {}}]:
        observation, reward, terminated, truncated, step_info = env.step(action)
        record["steps"].append([observation, reward, terminated, truncated, step_info.get("score")])
        if terminated or truncated:
            break
    return record


# -- reproducibility ---------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", [ENV_IDS[0], ENV_IDS[-1]])
def test_rollout__identical_in_a_fresh_process_with_another_hash_seed(env_id: str) -> None:
    here = rollout(env_id, seed=123)
    code = f"import json, ace_gym; from tests.envs.test_ace_env import rollout; print(json.dumps(rollout({env_id!r}, seed=123)))"
    for hash_seed in ("1", "2"):
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(result.stdout) == json.loads(json.dumps(here))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset__same_seed_gives_same_instance_and_observation(env_id: str) -> None:
    first, second = gym.make(env_id), gym.make(env_id)
    seen = set()
    for seed in range(12):
        obs_a, info_a = first.reset(seed=seed)
        obs_b, info_b = second.reset(seed=seed)
        assert (obs_a, info_a["instance_id"]) == (obs_b, info_b["instance_id"])
        seen.add(info_a["instance_id"])
    assert len(seen) > 3  # the seed actually chooses among instances


def test_reset__options_override_the_seed() -> None:
    env = AceEnv("travel")
    _, info = env.reset(seed=5, options={"instance_index": 18})
    assert (info["instance_index"], info["instance_id"]) == (18, "travel_r5_c5_h7_b10")
    _, info = env.reset(seed=5, options={"instance_id": "travel_r5_c5_h5_b4"})
    assert (info["instance_index"], info["instance_id"]) == (9, "travel_r5_c5_h5_b4")


@pytest.mark.parametrize("clone", ["pickle", "deepcopy"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env__pickles_mid_episode_and_continues_identically(env_id: str, clone: str) -> None:
    env = gym.make(env_id)
    env.reset(seed=3)
    actions = [*scripted_actions(env, 30), {"name": "done", "arguments": {}}]
    for action in actions[:10]:
        env.step(action)
    twin = pickle.loads(pickle.dumps(env)) if clone == "pickle" else copy.deepcopy(env)
    assert twin.unwrapped.state is not env.unwrapped.state
    for action in actions[10:]:
        mine, theirs = env.step(action), twin.step(action)
        assert mine[:4] == theirs[:4]
        assert mine[4].keys() == theirs[4].keys()
    assert env.unwrapped.state.grid == twin.unwrapped.state.grid


def test_envs__share_no_mutable_state() -> None:
    first, second = make_env("course", H15_INDEX), make_env("course", H15_INDEX)
    assert first.compiled is second.compiled  # the compiled instance is shared read-only
    fill_with_truth(first)
    call(
        first,
        tool(first, "query"),
        row=first.compiled.slots[0].row,
        col=first.compiled.slots[0].col,
        field="name",
        operator="not_in",
        value=[],
    )
    assert second.state.grid == list(second.compiled.initial_grid)
    assert second.state.query_calls == [0] * second.compiled.hidden_count


_EPISODE_ON_A_CACHED_DATASET = """
import sys
import gymnasium as gym
import ace_gym

def check(after):
    loaded = sorted({"numba", "pydantic", "pydantic_core"} & set(sys.modules))
    assert not loaded, f"{after} imported {loaded}"

check("import ace_gym")
import ace_gym.wrappers
check("import ace_gym.wrappers")
env = gym.make("ACE-course-v0")
env.reset(seed=0)
compiled, noun = env.unwrapped.compiled, env.unwrapped.domain.tool_noun
assert env.unwrapped.dataset._entry is not None, "the dataset was validated, not read from its cache entry"
slot, visible = compiled.slots[0], next(iter(compiled.visible_ids))
field = compiled.domain.numeric_attributes[0]
for name, arguments in [
    (f"query_{noun}_candidate_from_attribute", {"row": slot.row, "col": slot.col, "field": field, "operator": ">=", "value": 0}),
    (f"get_{noun}_item_info", {"id": visible}),
    *[
        ("set_slot", {"row": s.row, "col": s.col, "id": compiled.item_ids[int(compiled.truth[s.cell])]})
        for s in compiled.slots
    ],
    ("get_current_grid_state", {}),
    (f"check_{noun}_slot_constraints", {"row": slot.row, "col": slot.col}),
    (f"check_{noun}_global_constraints", {}),
    ("done", {}),
]:
    observation = env.step({"name": name, "arguments": arguments})[0]
    assert '"status": "success"' in observation, (name, observation)
check("an episode on a dataset read from its cache entry")
"""


def test_import_and_an_episode_on_a_cached_dataset__load_neither_numba_nor_pydantic(tmp_path: Path) -> None:
    # numba is for the generator's exact search, pydantic for validating a file: a process that
    # imports ace_gym and plays a file validated before (the common case) needs neither
    environment = {**os.environ, "ACE_GYM_CACHE_DIR": str(tmp_path / "cache")}
    warm = "import ace_gym; ace_gym.AceEnv('course')"  # validates the file and writes its entry
    subprocess.run([sys.executable, "-c", warm], cwd=ROOT, env=environment, capture_output=True, check=True)
    result = subprocess.run(
        [sys.executable, "-c", _EPISODE_ON_A_CACHED_DATASET],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# -- reset ------------------------------------------------------------------------------------


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_reset__info_carries_instance_budgets_prompt_and_tools(domain: str) -> None:
    env = AceEnv(domain, extra_query_num=1, global_check_alpha=1)
    observation, info = env.reset(options={"instance_index": 9})
    assert set(info) == RESET_INFO_KEYS
    compiled = env.compiled
    assert info["domain"] == domain
    assert info["instance_id"] == compiled.instance.instance_id == f"{domain}_r5_c5_h5_b4"
    assert (info["rows"], info["cols"], info["hidden_slots"], info["decoy_budget"]) == (5, 5, 5, 4)
    assert info["hidden_positions"] == [(p.row, p.col) for p in compiled.instance.hidden_slots]
    assert info["budgets"]["global_check_budget"] == 5
    assert len(info["budgets"]["hidden_slot_query_budget"]) == 5
    assert [t["function"]["name"] for t in info["tools"]] == list(env.tools.names)
    assert isinstance(info["system_prompt"], str) and compiled.instance.task_instruction in info["system_prompt"]
    assert env.observation_space.contains(observation)
    with pytest.raises(TypeError, match="read-only"):
        info["tools"][0]["function"]["name"] = "tampered"
    assert env.reset(options={"instance_index": 9})[1]["tools"] == info["tools"]


def test_reset__starts_a_fresh_episode() -> None:
    env = make_env("pc_build", H15_INDEX, global_check_alpha=1)
    fill_with_truth(env)
    call(env, tool(env, "global_check"))
    env.step({"name": "done", "arguments": {}})
    env.reset(options={"instance_index": H15_INDEX})
    assert env.state.grid == list(env.compiled.initial_grid)
    assert env.state.global_calls == 0
    assert call(env, "get_slot_id", row=0, col=0)["status"] == "success"


def test_step__before_reset_raises_reset_needed() -> None:
    with pytest.raises(ResetNeeded):
        AceEnv("course").step({"name": "done", "arguments": {}})


# -- step, reward and episode end -----------------------------------------------------------


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_step__reward_is_zero_until_a_successful_done_scores_the_grid(domain: str) -> None:
    env = make_env(domain, H15_INDEX)
    compiled = env.compiled
    for slot_index, slot in enumerate(compiled.slots):
        observation, reward, terminated, truncated, info = env.step(
            {"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": truth_id(compiled, slot_index)}}
        )
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info == {"tool": "set_slot", "ok": True, "step": slot_index + 1, "reply": info["reply"]}
        assert info["reply"].text == observation and info["reply"].ok  # the typed reply wrappers read
    observation, reward, terminated, truncated, info = env.step({"name": "done", "arguments": {}})
    assert observation == STOP
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["score"] == 1.0 and type(info["score"]) is float and info["reason"] is None
    assert info["grid"] == compiled.instance.truth_solution


def test_step__done_on_an_incomplete_grid_scores_zero_with_the_reason() -> None:
    env = make_env("shopping", H15_INDEX)
    observation, reward, terminated, truncated, info = env.step({"name": "done", "arguments": {}})
    assert (observation, reward, terminated, truncated) == (STOP, 0.0, True, False)
    assert (info["score"], info["reason"]) == (False, "solution still contains empty slots")
    assert info["grid"] == env.compiled.instance.partial_solution


def test_step__decoy_grid_scores_zero_with_a_global_reason() -> None:
    env = make_env("workforce", H15_INDEX)
    fill_with_truth(env)
    entry = next(e for e in env.compiled.instance.slots if e.decoy_ids)
    call(env, "set_slot", row=entry.row, col=entry.col, id=entry.decoy_ids[0])
    _, reward, terminated, _, info = env.step({"name": "done", "arguments": {}})
    assert (reward, terminated, info["score"]) == (0.0, True, False)
    assert info["reason"] in {rule.reason for rule in env.compiled.global_rules}


def test_step__max_steps_truncates_with_the_final_score() -> None:
    env = make_env("meal", H1_INDEX, max_steps=3)
    slot = env.compiled.slots[0]
    steps = [
        env.step(
            {"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": truth_id(env.compiled, 0)}}
        ),
        env.step({"name": "get_current_grid_state", "arguments": {}}),
        env.step({"name": "get_slot_id", "arguments": {"row": 0, "col": 0}}),
    ]
    assert [s[1:4] for s in steps] == [(0.0, False, False), (0.0, False, False), (1.0, False, True)]
    assert steps[-1][4]["score"] == 1.0 and steps[-1][4]["step"] == 3


def test_step__failed_calls_count_towards_max_steps() -> None:
    env = make_env("meal", H1_INDEX, max_steps=2)
    assert env.step({"name": "nope", "arguments": {}})[3] is False
    _, reward, terminated, truncated, info = env.step("not a tool call")  # type: ignore[arg-type]
    assert (reward, terminated, truncated, info["score"]) == (0.0, False, True, False)


@pytest.mark.parametrize("ending", ["done", "max_steps"])
def test_step__after_the_end_returns_a_failed_envelope(ending: str) -> None:
    env = make_env("course", H1_INDEX, max_steps=1)
    env.step({"name": "done" if ending == "done" else "get_current_grid_state", "arguments": {}})
    for _ in range(2):
        observation, reward, _, _, info = env.step({"name": "set_slot", "arguments": {"row": 0, "col": 0, "id": "x"}})
        assert json.loads(observation) == {
            "status": "failed",
            "messages": "Invalid tool arguments, the episode has ended; call reset()",
            "data": {},
        }
        assert reward == 0.0 and info["ok"] is False and "score" not in info


def test_step__accepts_tool_call_objects_and_json_string_arguments() -> None:
    env = make_env("travel", H1_INDEX)
    by_object = env.step(ToolCall("get_slot_id", {"row": 1, "col": 2}))[0]
    by_string = env.step({"name": "get_slot_id", "arguments": '{"row": 1, "col": 2}'})[0]
    by_dict = env.step({"name": "get_slot_id", "arguments": {"row": 1, "col": 2}})[0]
    assert by_object == by_string == by_dict
    assert env.action_space.contains(ToolCall("get_slot_id", {"row": 1, "col": 2}))
    no_arguments = env.step({"name": "get_current_grid_state"})
    assert no_arguments[4]["ok"] is True


# -- render -----------------------------------------------------------------------------------


def test_render__ansi_shows_the_live_grid_with_dots_for_empty_cells() -> None:
    env = AceEnv("course", render_mode="ansi")
    env.reset(options={"instance_index": H1_INDEX})
    compiled = env.compiled
    text = env.render()
    assert isinstance(text, str)
    lines = text.splitlines()
    assert len(lines) == compiled.rows
    slot = compiled.slots[0]
    assert lines[slot.row].split()[slot.col] == "."
    assert lines[0].split()[0] in (compiled.instance.partial_solution[0][0], ".")
    call(env, "set_slot", row=slot.row, col=slot.col, id=truth_id(compiled, 0))
    assert env.render().splitlines()[slot.row].split()[slot.col] == truth_id(compiled, 0)  # type: ignore[union-attr]


def test_render__without_a_render_mode_returns_none() -> None:
    env = make_env("course", H1_INDEX)
    assert env.render() is None


# -- departures from the published release (each one listed in AceEnv's docstring) -------------


def _failed(env: AceEnv, action: dict[str, Any]) -> str:
    """The message of the failed envelope ``action`` gets."""
    envelope = json.loads(env.step(action)[0])
    assert envelope["status"] == "failed" and envelope["data"] == {}, envelope
    return envelope["messages"]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_departure__arguments_that_are_not_an_object_are_refused_even_when_falsy(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    cases = {"list": ([], "[]", [1], "[1]"), "int": (0, "0", 5), "bool": (False, "false"), "str": ('"x"',)}
    for kind, arguments in cases.items():
        for given in arguments:
            for name in ("done", "get_current_grid_state", "get_slot_id"):
                message = _failed(env, {"name": name, "arguments": given})
                assert message == f"Invalid tool arguments, arguments must be a JSON object, got {kind}", given
    assert env.state.grid == list(env.compiled.initial_grid)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_departure__an_argument_named_self_and_non_string_keys_are_ignored(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    slot = env.compiled.slots[0]
    for arguments in ({"self": 1, "row": slot.row, "col": slot.col}, {0: 1, "row": slot.row, "col": slot.col}):
        assert call(env, "get_slot_id", **{str(k): v for k, v in arguments.items()})["status"] == "success"
        envelope = json.loads(env.step({"name": "get_slot_id", "arguments": arguments})[0])
        assert envelope["data"] == {"row": slot.row, "col": slot.col, "id": None}
    filled = {"self": None, "row": slot.row, "col": slot.col, "id": truth_id(env.compiled, 0)}
    assert json.loads(env.step({"name": "set_slot", "arguments": filled})[0])["status"] == "success"


DEEP = "[" * 5000
HUGE = "[" + "9" * 5000 + "]"


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_departure__deep_nesting_and_huge_integers_in_json_text_get_answers(domain: str) -> None:
    env = make_env(domain, H1_INDEX, extra_query_num=0)
    compiled, slot = env.compiled, env.compiled.slots[0]
    visible = compiled.item_ids[next(i for i in compiled.initial_grid if i >= 0)]
    invalid = "Invalid tool arguments, "
    for text in (DEEP, '{"row": ' + "9" * 5000 + ', "col": 0}'):
        assert _failed(env, {"name": "get_slot_id", "arguments": text}).startswith(
            invalid + "arguments are not valid JSON ("
        )
    attributes = tool(env, "item_attributes")
    for text in (DEEP, HUGE):
        message = _failed(env, {"name": attributes, "arguments": {"ids": text, "field": "name"}})
        assert message == invalid + "ids string must be a valid JSON list"
        message = _failed(env, {"name": attributes, "arguments": {"ids": [visible], "field": text}})
        assert message.startswith(f"{invalid}unknown field(s): {text[:200]}...[{len(text)} chars]. allowed fields: ")
        query = {"row": slot.row, "col": slot.col, "field": "name", "operator": "in", "value": " " + text}
        data = json.loads(env.step({"name": tool(env, "query"), "arguments": query})[0])["data"]
        assert data["value"] == [" " + text] and data["matches"] == []


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize("infinity", [float("inf"), float("-inf")])
def test_departure__row_or_col_of_infinity_is_not_an_integer(domain: str, infinity: float) -> None:
    env = make_env(domain, H1_INDEX)
    slot = env.compiled.slots[0]
    for name in ("set_slot", "get_slot_id", "get_hidden_slot_query_budget", tool(env, "slot_check")):
        for arguments in ({"row": infinity, "col": slot.col}, {"row": slot.row, "col": infinity}):
            message = _failed(env, {"name": name, "arguments": {**arguments, "id": truth_id(env.compiled, 0)}})
            assert message == "Invalid tool arguments, row and col must be integers", (name, arguments)
    query = {"row": infinity, "col": slot.col, "field": "name", "operator": "in", "value": []}
    assert _failed(env, {"name": tool(env, "query"), "arguments": query}).endswith("row and col must be integers")


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_departure__row_col_beyond_64_bits_are_described_not_echoed(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    for name in ("set_slot", "get_slot_id", "get_hidden_slot_query_budget"):
        message = _failed(env, {"name": name, "arguments": {"row": 2**70, "col": -(2**64)}})
        assert message == "Invalid tool arguments, Invalid slot (row=<71-bit integer>, col=<65-bit integer>)"
    assert _failed(env, {"name": "get_slot_id", "arguments": {"row": 2**63, "col": 0}}).endswith(
        f"Invalid slot (row={2**63}, col=0)"
    )


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_departure__echoed_model_strings_are_clipped_at_200_characters(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    long_id = "x" * 1000
    message = _failed(env, {"name": tool(env, "item_info"), "arguments": {"id": long_id}})
    assert message == (
        f"Invalid tool arguments, Item id {'x' * 200}...[1000 chars] is not accessible. "
        "You may only inspect ids from non-hidden slots."
    )
    assert _failed(env, {"name": tool(env, "item_info"), "arguments": {"id": "x" * 200}}).count("x") == 200


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_departure__schemas_have_an_operator_enum_and_a_fixed_order(domain: str) -> None:
    first = AceEnv(domain).reset(seed=1)[1]["tools"]
    second = AceEnv(domain).reset(seed=2)[1]["tools"]
    assert first == second
    query = next(t for t in first if t["function"]["name"].startswith("query_"))
    assert query["function"]["parameters"]["properties"]["operator"]["enum"] == [
        ">",
        ">=",
        "=",
        "<",
        "<=",
        "in",
        "not_in",
    ]


def test_score__is_what_the_last_step_reports_and_grid_is_a_copy() -> None:
    env = AceEnv("pc_build", max_steps=2)
    env.reset(options={"instance_index": 5})
    slot = env.compiled.slots[0]
    env.step({"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": slot.candidate_ids[0]}})
    before = env.score()
    grid = env.grid
    grid[0][0] = "changed"
    assert env.grid != grid
    _, reward, _, truncated, info = env.step({"name": "get_current_grid_state", "arguments": {}})
    assert truncated and (reward, info["reason"], info["grid"]) == tuple(before) == tuple(env.score())


def test_reset__instance_option_serves_that_instance_whatever_the_source() -> None:
    env = AceEnv("meal", "5x7")
    served = AceEnv("meal").dataset[H15_INDEX]
    _, info = env.reset(seed=3, options={"instance": served})
    assert (info["instance_id"], info["instance_index"]) == (served.instance_id, -1)
    assert env.compiled.instance is served
    fill_with_truth(env)
    assert env.step({"name": "done", "arguments": {}})[1] == 1.0
    for wrong in (served.model_dump(), AceEnv("course").dataset[0], None):
        with pytest.raises(ConfigError, match="options\\['instance'\\]"):
            env.reset(options={"instance": wrong})


def _played(env: AceEnv, index: int) -> list[str]:
    """The observations of one episode on instance ``index``: reset, a query, a set, the grid, done."""
    observation, _ = env.reset(options={"instance_index": index})
    slot = env.compiled.slots[0]
    calls = [
        (tool(env, "query"), {"row": slot.row, "col": slot.col, "field": "credits", "operator": ">=", "value": 0}),
        ("set_slot", {"row": slot.row, "col": slot.col, "id": truth_id(env.compiled, 0)}),
        ("get_current_grid_state", {}),
        ("done", {}),
    ]
    return [observation] + [env.step({"name": name, "arguments": arguments})[0] for name, arguments in calls]


def test_forget_stored_replies__the_next_episode_writes_them_again_alike() -> None:
    env = AceEnv("course")
    first = [_played(env, index) for index in (H1_INDEX, H15_INDEX)]
    h1, h15 = env.dataset.compiled(H1_INDEX), env.dataset.compiled(H15_INDEX)
    kept = {compiled: texts_of(compiled) for compiled in (h1, h15)}
    forget_stored_replies([h1])  # the given instances only
    assert texts_of(h1) is not kept[h1] and texts_of(h15) is kept[h15]
    forget_stored_replies()  # every instance
    assert texts_of(h15) is not kept[h15]
    assert [_played(env, index) for index in (H1_INDEX, H15_INDEX)] == first

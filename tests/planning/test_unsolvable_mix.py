"""UnsolvableMix: the observed share of unsolvable tasks, each kind's tool surface, the markers'
working forms in solvable tasks, the reward matrix, the answer key kept out of ``info``, and the
refusal metrics of always-refusing, never-refusing and careful policies."""

from __future__ import annotations

import json
import re
from typing import Any

import gymnasium as gym
import pytest

from ace_gym.agents.solver import ExactSolver
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.generators.certificate import certify
from ace_gym.planning import UnsolvableMix
from ace_gym.planning.probes import AlwaysRefuse, CarefulNeverRefuse, CarefulSolver
from ace_gym.planning.settings import setting_metrics
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.planning.unsolvable import (
    APPROVAL_POLICY_PATTERN,
    APPROVAL_TOOL,
    ATTACHMENT_TOOL,
    PHONE_LIMIT,
    REFUSAL_TOOL,
    needs_approval,
)

EPISODES = 40


def _play(env: gym.Env, policy: Any, seed: int) -> tuple[float, dict[str, Any], dict[str, Any]]:
    observation, reset_info = env.reset(seed=seed)
    episode = policy.start(observation, reset_info, seed)
    while True:
        observation, reward, terminated, truncated, info = env.step(episode.act(observation))
        if terminated or truncated:
            return float(reward), reset_info, info


def _names(info: dict[str, Any]) -> list[str]:
    return [schema["function"]["name"] for schema in info["tools"]]


def test_observed_share_of_unsolvable_tasks__matches_p() -> None:
    env = UnsolvableMix(AceEnv("course"), p_unsolvable=0.3)
    drawn = [env.reset(seed=seed) and env.answer_key()["unsolvable"] for seed in range(200)]
    assert abs(sum(drawn) / len(drawn) - 0.3) < 0.1  # 3 standard errors
    kinds = {env.reset(seed=seed) and env.answer_key()["kind"] for seed in range(60)}
    assert kinds >= set(UNSOLVABLE_KINDS)


def test_always_refuse__recall_one_false_refusal_one_and_the_matrix_rewards() -> None:
    env = UnsolvableMix(AceEnv("meal"), p_unsolvable=0.5)
    records, expected_right = [], 0
    for seed in range(EPISODES):
        reward, _, info = _play(env, AlwaysRefuse(), seed)
        kind = env.answer_key()["kind"]
        expected = 0.0 if not kind else 1.0 if kind == AlwaysRefuse.reason_code else 0.25
        assert reward == info["score"] == expected
        expected_right += kind == AlwaysRefuse.reason_code
        records.append({"turns": [{"info": info}]})
    metrics = setting_metrics(["unsolvable"], records)["unsolvable"]
    unsolvable = metrics["unsolvable_share"] * EPISODES
    assert 0 < unsolvable < EPISODES
    assert metrics["refusal_recall"] == 1.0 and metrics["false_refusal_rate"] == 1.0
    assert metrics["reason_code_accuracy"] == pytest.approx(expected_right / unsolvable)


def test_never_refuse__recall_zero_and_solvable_tasks_solved() -> None:
    env = UnsolvableMix(AceEnv("travel"), p_unsolvable=0.5)
    records = []
    for seed in range(EPISODES):
        reward, _, info = _play(env, CarefulNeverRefuse(), seed)
        unsolvable = env.answer_key()["unsolvable"]
        assert reward == (0.0 if unsolvable else 1.0)
        records.append({"turns": [{"info": info}]})
    metrics = setting_metrics(["unsolvable"], records)["unsolvable"]
    assert metrics["refusal_recall"] == 0.0 and metrics["false_refusal_rate"] == 0.0
    assert 0 < metrics["unsolvable_share"] < 1


def _episode_of_kind(kind: str, domain: str = "course") -> tuple[UnsolvableMix, dict[str, Any]]:
    """An episode of ``kind`` without the other kinds' markers."""
    env = UnsolvableMix(AceEnv(domain), p_unsolvable=1.0, kinds=[kind], marker_rate=0.0)
    for seed in range(50):
        _, info = env.reset(seed=seed)
        if env.answer_key()["kind"] == kind:
            return env, info
    raise AssertionError(f"no {kind} variant drawn")


def test_tool_outage__adds_an_approval_tool_in_outage_and_states_the_policy() -> None:
    env, info = _episode_of_kind("tool_outage")
    assert APPROVAL_TOOL in _names(info) and APPROVAL_TOOL in info["system_prompt"]
    slot = env.unwrapped.compiled.slots[0]
    arguments = {"row": slot.row, "col": slot.col, "id": slot.candidate_ids[0]}
    replies = {env.step({"name": APPROVAL_TOOL, "arguments": arguments})[0] for _ in range(3)}
    (reply,) = replies
    assert json.loads(reply)["messages"].startswith("Outage, ")


def test_missing_tool__states_the_approval_policy_without_its_tool_and_blocks_every_covered_set() -> None:
    env, info = _episode_of_kind("missing_tool")
    assert APPROVAL_POLICY_PATTERN.search(info["system_prompt"]) and APPROVAL_TOOL not in _names(info)
    assert "set_slot" in _names(info)  # the tool list alone does not tell
    compiled = env.unwrapped.compiled
    row, col, item = env.answer_key()["certificate"]["needs_approval"][0]  # a truth item the policy covers
    arguments = {"row": row, "col": col, "id": item}
    approval = json.loads(env.step({"name": APPROVAL_TOOL, "arguments": arguments})[0])
    assert approval["status"] != "success" and "approve_assignment" in approval["messages"]
    reply = json.loads(env.step({"name": "set_slot", "arguments": arguments})[0])
    assert reply["messages"].startswith("Not approved, ")
    assert env.unwrapped.state.grid[row * compiled.cols + col] == -1


def test_working_approval__is_needed_only_for_the_items_the_policy_covers() -> None:
    env = UnsolvableMix(AceEnv("course"), p_unsolvable=1.0, kinds=["conflicting_constraints"], marker_rate=1.0)
    for seed in range(40):
        env.reset(seed=seed)
        key, compiled = env.answer_key(), env.unwrapped.compiled
        covered = needs_approval(compiled, (key["approval_attribute"], key["approval_threshold"]))
        slot = compiled.slots[0]
        if key["approval"] == "working" and covered & set(slot.candidate_ids) and set(slot.candidate_ids) - covered:
            break
    else:
        raise AssertionError("no working approval covering some of a slot's candidates")
    above = {"row": slot.row, "col": slot.col, "id": sorted(covered & set(slot.candidate_ids))[0]}
    below = {**above, "id": sorted(set(slot.candidate_ids) - covered)[0]}
    assert json.loads(env.step({"name": "set_slot", "arguments": above})[0])["messages"].startswith("Not approved, ")
    assert json.loads(env.step({"name": "set_slot", "arguments": below})[0])["status"] == "success"
    assert json.loads(env.step({"name": APPROVAL_TOOL, "arguments": above})[0])["data"]["approved"] is True
    assert json.loads(env.step({"name": "set_slot", "arguments": above})[0])["status"] == "success"


def _fill(env: UnsolvableMix) -> None:
    compiled = env.unwrapped.compiled
    for slot in compiled.slots:
        truth = compiled.item_ids[int(compiled.truth[slot.cell])]
        env.step({"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": truth}})


def test_missing_information__the_global_check_cannot_confirm_the_grid() -> None:
    env, info = _episode_of_kind("missing_information")
    assert "agreed on the phone" in info["system_prompt"]
    _fill(env)
    data = json.loads(env.step({"name": "check_course_global_constraints", "arguments": {}})[0])["data"]
    assert data["is_valid"] is None and "not on file" in data["unverifiable"]


def test_missing_attachment__no_file_and_slot_checks_cannot_confirm() -> None:
    env, info = _episode_of_kind("missing_attachment")
    assert ATTACHMENT_TOOL in _names(info)
    assert json.loads(env.step({"name": ATTACHMENT_TOOL, "arguments": {}})[0])["data"]["attachment"] is None
    _fill(env)
    row, col = env.answer_key()["attachment_cells"][0]
    data = json.loads(env.step({"name": "check_course_slot_constraints", "arguments": {"row": row, "col": col}})[0])
    assert data["data"]["is_valid"] is None


def test_done_on_an_unsolvable_task__earns_the_completion_entry_of_the_matrix() -> None:
    env, _ = _episode_of_kind("missing_information")
    env.rewards["complete_unsolvable"] = -1.0
    _fill(env)
    _, reward, terminated, _, info = env.step({"name": "done", "arguments": {}})
    assert terminated and reward == info["score"] == -1.0 and info["grid_score"] == 1.0
    assert info["apb"]["unsolvable"]["refused"] is False


def test_p_zero_without_markers__is_a_no_op_on_base_rewards_but_offers_the_refusal_tool() -> None:
    bare, wrapped = AceEnv("shopping"), UnsolvableMix(AceEnv("shopping"), p_unsolvable=0.0, marker_rate=0.0)
    for seed in range(5):
        reward, _, info = _play(bare, ExactSolver(), seed)
        wrapped_reward, reset_info, wrapped_info = _play(wrapped, ExactSolver(), seed)
        assert (wrapped_reward, wrapped_info["grid"]) == (reward, info["grid"])
        assert _names(reset_info) == [*_names(bare.reset(seed=seed)[1]), REFUSAL_TOOL]


def test_perturbation__is_a_function_of_the_seed_and_recorded_in_info() -> None:
    env, other = (
        UnsolvableMix(AceEnv("workforce"), p_unsolvable=1.0),
        UnsolvableMix(AceEnv("workforce"), p_unsolvable=1.0),
    )
    assert env.reset(seed=12) == other.reset(seed=12)
    record = env.answer_key()
    assert record == other.answer_key()
    assert record["unsolvable"] and record["kind"] in UNSOLVABLE_KINDS and record["certificate"]


def test_refusal__ends_the_episode_and_later_calls_are_refused() -> None:
    env = UnsolvableMix(AceEnv("course"), p_unsolvable=0.0)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step({"name": REFUSAL_TOOL, "arguments": {"reason_code": "nonsense"}})
    assert terminated and reward == 0.0 and info["apb"]["unsolvable"]["reason_code"] == ""
    observation, _, terminated, _, _ = env.step({"name": "done", "arguments": {}})
    assert terminated and "episode has ended" in observation


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"p_unsolvable": 1.5}, "p_unsolvable"),
        ({"kinds": []}, "kinds"),
        ({"kinds": ["missing_tol"]}, "kinds"),
        ({"rewards": {"refuse_right": 1.0}}, "rewards"),
        ({"rewards": {"refuse_right_code": float("nan")}}, "rewards['refuse_right_code']"),
    ],
)
def test_constructor__rejects_bad_arguments(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        UnsolvableMix(AceEnv("course"), **kwargs)
    assert raised.value.field == field


# -- issue 38: no surface tells, no answer key in info, honest play earns the most ---------------------------


def test_markers_in_solvable_tasks__give_what_the_task_needs_or_withhold_what_does_not_matter() -> None:
    """Each marker in a solvable task either gives its piece (the limit in the notes, the sheet) or
    withholds one that the other rules make irrelevant (the truth stays the one completion), so
    the evidence of a missing piece marks solvable tasks too."""
    env = UnsolvableMix(AceEnv("travel"), p_unsolvable=0.0, marker_rate=1.0)
    forms: set[str] = set()
    for seed in range(12):
        _, info = env.reset(seed=seed)
        key, served = env.answer_key(), env.unwrapped.compiled.instance
        bare = AceEnv("travel")
        bare.reset(seed=seed)
        original = bare.compiled.instance
        assert APPROVAL_POLICY_PATTERN.search(info["system_prompt"]) and PHONE_LIMIT in info["system_prompt"]
        withheld = re.search(r"\((\d+)\) [^\n]*, where X is", info["system_prompt"])
        note = re.search(r"global constraint \((\d+)\): (-?\d+)\.", info["system_prompt"])
        assert withheld is not None and note is not None
        gives_limit = note.group(1) == withheld.group(1)
        assert gives_limit == (key["unverifiable_rule"] == "")
        reply = json.loads(env.step({"name": ATTACHMENT_TOOL, "arguments": {}})[0])["data"]["attachment"]
        assert (reply is not None) == bool(key["sheet_cells"]) != bool(key["attachment_cells"])
        for row, col in key["sheet_cells"]:
            assert f"For slot ({row}, {col}):" in reply and f"slot ({row}, {col}) must" not in info["system_prompt"]
        if gives_limit and key["sheet_cells"]:  # nothing withheld: the served rules are the drawn instance's
            assert served.global_constraints == original.global_constraints
            assert [x.slot_constraints for x in served.slots] == [x.slot_constraints for x in original.slots]
        else:  # withheld pieces the other rules make irrelevant
            assert certify(served).truth_valid and certify(served).truth_unique
        forms |= {"limit given" if gives_limit else "limit withheld", "sheet" if reply else "no file"}
        # the approval tool is out or not offered, and the truth needs no approval
        assert key["approval"] in ("outage", "missing") and (APPROVAL_TOOL in _names(info)) == (
            key["approval"] == "outage"
        )
        for slot in env.unwrapped.compiled.slots:
            truth = env.unwrapped.compiled.item_ids[int(env.unwrapped.compiled.truth[slot.cell])]
            arguments = {"row": slot.row, "col": slot.col, "id": truth}
            assert json.loads(env.step({"name": "set_slot", "arguments": arguments})[0])["status"] == "success"
        forms.add(key["approval"])
    assert forms == {"limit given", "limit withheld", "sheet", "no file", "outage", "missing"}


@pytest.mark.parametrize("domain", ["course", "travel"])
def test_rewards__careful_play_earns_the_most_and_blanket_refusal_less_than_never_refusing(domain: str) -> None:
    env = UnsolvableMix(AceEnv(domain), p_unsolvable=0.5)
    seeds = range(16)
    careful = [_play(env, CarefulSolver(), seed)[0] for seed in seeds]
    never = [_play(env, CarefulNeverRefuse(), seed)[0] for seed in seeds]
    kinds = [env.reset(seed=seed) and env.answer_key()["kind"] for seed in range(1000, 1016)]
    frequent = max(UNSOLVABLE_KINDS, key=kinds.count)
    refuse = type("RefuseFrequent", (AlwaysRefuse,), {"reason_code": frequent})()
    blanket = [_play(env, refuse, seed)[0] for seed in seeds]
    assert sum(careful) == len(seeds)
    assert sum(blanket) < sum(never) < sum(careful)

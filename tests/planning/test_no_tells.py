"""Issue 38: the planning probes pay only what needs the instance. One regression test per finding
an adversarial bank made at 1944dd5 (each fails there): the unsolvable kinds' surface tells (3),
the Holistic template (4), the blind StepWise guess (5), the unsolvable answer key in ``info`` (8)
and its neighbours in model-visible text (the Refine critique, the Holistic grade before acting).
Every policy here acts only on what a model sees; the outcome is read from the last step's
``info``, where it is recorded with the reward."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ace_gym.agents.solver import slot_rule_queries
from ace_gym.agents.task_view import read_task
from ace_gym.envs import AceEnv
from ace_gym.planning import Refine, UnsolvableMix
from ace_gym.planning.holistic import HolisticEnv
from ace_gym.planning.stepwise import StepWiseEnv
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.planning.unsolvable import (
    APPROVAL_POLICY_PATTERN,
    APPROVAL_TOOL,
    ATTACHMENT_RULE,
    ATTACHMENT_TOOL,
    PHONE_LIMIT,
    REFUSAL_TOOL,
)
from tests.planning.helpers import template_plan


def _names(info: dict[str, Any]) -> list[str]:
    return [schema["function"]["name"] for schema in info["tools"]]


def _marked(info: dict[str, Any]) -> dict[str, bool]:
    """Which marker of an unsolvable kind the surface shows (the tells the bank used)."""
    names, text = _names(info), info["system_prompt"]
    return {
        "no_set_slot": "set_slot" not in names,
        "approval": APPROVAL_TOOL in names or bool(APPROVAL_POLICY_PATTERN.search(text)),
        "phone": PHONE_LIMIT in text,
        "sheet": ATTACHMENT_TOOL in names or ATTACHMENT_RULE in text,
    }


def _outcome(env: UnsolvableMix) -> dict[str, Any]:
    """The episode's outcome, recorded on the step that ends it (``done`` at once)."""
    last = env.step({"name": "done", "arguments": {}})[4]
    return last["apb"]["unsolvable"]


def test_unsolvable_markers__every_phrase_and_tool_of_a_kind_also_marks_solvable_tasks() -> None:
    """Finding 3: each marker appeared in unsolvable tasks only; refusing on it caught 94/94."""
    env = UnsolvableMix(AceEnv("meal"), p_unsolvable=0.5)
    on_solvable: dict[str, int] = dict.fromkeys(("no_set_slot", "approval", "phone", "sheet"), 0)
    for seed in range(24):
        _, info = env.reset(seed=seed)
        marks = _marked(info)
        outcome = _outcome(env)
        assert not marks["no_set_slot"], outcome["kind"]  # set_slot is offered in every task
        if not outcome["unsolvable"]:
            for marker, shown in marks.items():
                on_solvable[marker] += shown
    assert on_solvable["approval"] and on_solvable["phone"] and on_solvable["sheet"]


def test_unsolvable_markers__an_approval_that_cannot_be_had_marks_solvable_tasks_as_often() -> None:
    """Finding 3 at 725c7af: the approval policy without its tool, or with the tool answering
    Outage, showed in unsolvable tasks only, so refusing on it needed no planning. The evidence
    is read as an agent reads it (the policy's opening words, the tool list, one approval call)."""
    shown = {True: 0, False: 0}  # unsolvable -> episodes showing the evidence
    for domain in ("course", "travel"):
        env = UnsolvableMix(AceEnv(domain), p_unsolvable=0.5)
        for seed in range(30):
            _, info = env.reset(seed=seed)
            if "Compliance policy:" not in info["system_prompt"]:
                continue
            if APPROVAL_TOOL in _names(info):
                reply = env.step({"name": APPROVAL_TOOL, "arguments": {"row": 0, "col": 0, "id": "x"}})[0]
                if "Outage" not in reply:
                    continue
            shown[bool(_outcome(env)["unsolvable"])] += 1
    assert shown[True] and shown[False] >= shown[True] / 2, shown


def test_unsolvable_answer_key__stays_out_of_info_until_the_episode_ends() -> None:
    """Finding 8: the kind and its certificate were in the reset info, the kind in every step's."""
    env = UnsolvableMix(AceEnv("course"), p_unsolvable=1.0)
    _, info = env.reset(seed=1)
    assert info["apb"]["unsolvable"].keys() == {"tools"}
    _, _, terminated, _, step_info = env.step({"name": "get_current_grid_state", "arguments": {}})
    assert not terminated and "unsolvable" not in step_info.get("apb", {})
    outcome = _outcome(env)
    assert outcome["unsolvable"] and outcome["kind"] in UNSOLVABLE_KINDS  # with the reward, at the end


def _task(messages: list[dict[str, Any]]) -> str:
    """The env's reset observation inside the first user message (before the plan request)."""
    return messages[1]["content"].split("\n\nBefore acting")[0]


def _template_carried_out_blindly(env: HolisticEnv, seed: int) -> float:
    """The episode's return: the template, then its queries, each cell set to a random id every
    query on it returned (no global reasoning), a global check and done."""
    messages, info = env.reset(seed=seed)
    total = env.step(json.dumps(template_plan(_task(messages), info)))[1]
    view = read_task(_task(messages), info)
    rng = np.random.default_rng(seed)
    for slot in view.slots:
        common: set[str] | None = None
        for query in slot_rule_queries(view, slot):
            answer = env.step(query)[0][-1]["content"]
            data = (json.loads(answer) if answer.startswith("{") else {}).get("data") or {}
            ids = {match["id"] for match in data.get("matches", ())}
            common = ids if common is None else common & ids
        pick = str(rng.choice(sorted(common))) if common else ""
        total += env.step({"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": pick}})[1]
    total += env.step({"name": view.tool("global_check"), "arguments": {}})[1]
    return float(total + env.step({"name": "done", "arguments": {}})[1])


def test_holistic__an_instance_agnostic_template_earns_at_most_a_tenth() -> None:
    """Finding 4: the template earned 1.000 on 40/40 tasks at its plan step."""
    env = HolisticEnv(domain="course")
    returns = [_template_carried_out_blindly(env, seed) for seed in range(6)]
    assert sum(returns) / len(returns) <= 0.1


def test_holistic__a_plan_alone_earns_nothing_and_keeps_apbs_grade_in_info() -> None:
    env = HolisticEnv(domain="course", act_after_plan=False)
    for seed in range(3):
        messages, info = env.reset(seed=seed)
        _, reward, terminated, _, step_info = env.step(template_plan(_task(messages), info))
        assert terminated and reward == 0.0 and step_info["plan_grade"] == 1.0


def test_stepwise__a_trajectory_blind_guess_earns_at_most_a_tenth() -> None:
    """Finding 5: the next call is a candidate query in most tasks, so "a query on the first hidden
    cell by its first stated rule", written without reading the trajectory, earned 0.51 (20 seeds)."""
    env = StepWiseEnv()
    rewards = []
    for seed in range(20):
        messages, info = env.reset(seed=seed)
        view = read_task(messages[1]["content"], {**info, "system_prompt": messages[0]["content"]})
        guess = slot_rule_queries(view, view.slots[0])[0]
        rewards.append(env.step([{"tool": guess["name"], "arguments": guess["arguments"]}])[1])
    assert sum(rewards) / len(rewards) <= 0.1


def test_refine_critique__never_tells_whether_the_task_can_be_done() -> None:
    """A neighbour of finding 8: the rules critic, read by the agent, judged a proposed ``done``
    on an unsolvable task "the task cannot be done" and a refusal of a solvable one "the task
    can be done"."""
    done, refusal = (
        {"name": "done", "arguments": {}},
        {"name": REFUSAL_TOOL, "arguments": {"reason_code": "missing_tool"}},
    )
    for p_unsolvable, proposal in ((1.0, done), (0.0, refusal)):
        env = Refine(UnsolvableMix(AceEnv("course"), p_unsolvable=p_unsolvable))
        env.reset(seed=1)
        critique = env.step(proposal)[0]
        assert "Not executed" in critique and "task can be done" not in critique and "cannot be done" not in critique


def test_holistic__the_grade_of_a_plan_to_carry_out_is_told_only_at_the_end() -> None:
    """A neighbour of finding 8: "Plan graded 0.2", shown before acting, told a plan for an
    unsolvable task apart (a plan for one is E1)."""
    env = HolisticEnv(domain="meal", settings=["unsolvable"], act_after_plan=True)
    plan = {"plan": "finish", "tool_chain": [{"name": "done", "arguments": {}}]}
    for seed in range(4):
        env.reset(seed=seed)
        reply, _, terminated, _, _ = env.step(plan)
        assert not terminated and "graded" not in reply[-1]["content"]

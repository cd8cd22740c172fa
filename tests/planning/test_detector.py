"""The E1-E6 detector: silent on every step of the exact solver, exactly one intended flag on each
single-fault mutation, and never silent on a call the tools refuse."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.planning.detector import ErrorTracker, detect_errors
from ace_gym.planning.knowledge import Knowledge, TaskFacts, ToolEntry, facts_from_reset, trace_knowledge
from ace_gym.planning.taxonomy import CAUSES, Flag, grade
from ace_gym.tools import failed_reply
from tests.core_helpers import H15_INDEX
from tests.planning.helpers import Step, solver_steps

PLAN_ONLY_CAUSES = {"short_prediction", "missing_done", "forward_reference", "unqueried_slot"}  # whole plans


@pytest.mark.parametrize("dataset", ["5x5", "5x7"])
@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_detector__never_flags_a_step_of_the_exact_solver(domain: str, dataset: str) -> None:
    env = AceEnv(domain, dataset)
    flagged = []
    for index in range(len(env.dataset)):
        observation, info = env.reset(seed=0, options={"instance_index": index})
        tracker = ErrorTracker(facts_from_reset(env.compiled, info))
        steps, reward = solver_steps(env, observation, info)
        assert reward == 1.0
        for number, (action, reply) in enumerate(steps):
            flags = tracker.judge(action)
            if flags:
                flagged.append((index, number, action, flags))
            tracker.observe(action, reply)
    assert flagged == []


# -- the single-fault mutation bank ------------------------------------------------------------------


@dataclass
class Scenario:
    """A solver trajectory on one bundled instance, to mutate."""

    env: AceEnv
    facts: TaskFacts
    steps: list[Step]

    def name(self, kind: str) -> str:
        found = self.facts.tool_named(kind)
        assert found is not None
        return found

    def first(self, kind: str) -> int:
        """Index of the first step calling a tool of ``kind``."""
        return next(i for i, (action, _) in enumerate(self.steps) if self.facts.tools[action["name"]].kind == kind)

    def last(self, kind: str) -> int:
        return max(i for i, (action, _) in enumerate(self.steps) if self.facts.tools[action["name"]].kind == kind)

    def hidden(self) -> tuple[int, int]:
        slot = self.env.compiled.slots[0]
        return slot.row, slot.col

    def visible(self) -> tuple[tuple[int, int], str]:
        compiled = self.env.compiled
        cell = compiled.cell_slot_list.index(-1)
        return divmod(cell, compiled.cols), compiled.item_ids[compiled.initial_grid[cell]]

    def replay(self, actions: list[dict[str, Any]]) -> list[Step]:
        """Execute ``actions`` on a fresh episode of the same instance: real replies."""
        self.env.reset(seed=0, options={"instance_index": H15_INDEX})
        return [(action, self.env.step(action)[4]["reply"]) for action in actions]


def _scenario(domain: str) -> Scenario:
    env = AceEnv(domain)
    observation, info = env.reset(seed=0, options={"instance_index": H15_INDEX})
    facts = facts_from_reset(env.compiled, info)
    steps, _ = solver_steps(env, observation, info)
    return Scenario(env, facts, steps)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


Built = tuple[TaskFacts, list[Step], Any]


def _at(s: Scenario, index: int, action: Any, facts: TaskFacts | None = None) -> Built:
    return (facts or s.facts, s.steps[:index], action)


def _with_tool(s: Scenario, entry: ToolEntry, **changes: Any) -> TaskFacts:
    return dataclasses.replace(s.facts, tools={**s.facts.tools, entry.name: entry}, **changes)


def _set_at_first_set(s: Scenario, **arguments: Any) -> Built:
    index = s.first("set_slot")
    return _at(s, index, _call("set_slot", **{**s.steps[index][0]["arguments"], **arguments}))


def _query_at_first_query(s: Scenario, **arguments: Any) -> Built:
    index = s.first("query")
    return _at(s, index, _call(s.name("query"), **{**s.steps[index][0]["arguments"], **arguments}))


def _observed_filter(s: Scenario) -> Built:
    """set_slot with a candidate the agent saw (a list-all query) that fails the slot's rules."""
    index = s.first("set_slot")
    knowledge = trace_knowledge(s.facts, s.steps[:index])
    for cell, seen in knowledge.observed.items():
        invalid = sorted(seen - s.facts.slot_valid[cell])
        if invalid:
            return _at(s, index, _call("set_slot", row=cell[0], col=cell[1], id=invalid[0]))
    raise AssertionError("no filter was observed before the first set_slot")


def _truth_before_any_query(s: Scenario) -> Built:
    compiled = s.env.compiled
    slot = compiled.slots[0]
    return _at(
        s, 0, _call("set_slot", row=slot.row, col=slot.col, id=compiled.item_ids[int(compiled.truth[slot.cell])])
    )


def _done_after_failed_check(s: Scenario) -> Built:
    """The solver's grid with one slot swapped for an observed decoy, a global check that fails, then done."""
    check = s.last("global_check")
    actions = [action for action, _ in s.steps[:check]]
    knowledge = trace_knowledge(s.facts, s.steps[:check])
    for cell, seen in knowledge.observed.items():
        for decoy in sorted((seen & s.facts.slot_valid[cell]) - {knowledge.grid[cell]}):
            prefix = s.replay(
                [*actions, _call("set_slot", row=cell[0], col=cell[1], id=decoy), _call(s.name("global_check"))]
            )
            if prefix[-1][1].data["is_valid"] is False:
                return (s.facts, prefix, _call("done"))
    raise AssertionError("no decoy breaks a global rule")


def _retry_broken_query(s: Scenario) -> Built:
    index = s.first("query")
    action = s.steps[index][0]
    failed = (action, failed_reply("Service error, the tool is out of service"))
    return (dataclasses.replace(s.facts, broken=frozenset({action["name"]})), [*s.steps[:index], failed], action)


def _refusal_tool() -> ToolEntry:
    return ToolEntry("report_infeasible", "refusal", ("reason_code", "explanation"), frozenset({"reason_code"}))


MUTATIONS: dict[str, Callable[[Scenario], Built]] = {
    # E1
    "prefilled_cell": lambda s: _set_at_first_set(s, row=s.visible()[0][0], col=s.visible()[0][1], id=s.visible()[1]),
    "refused_solvable": lambda s: _at(
        s, len(s.steps) - 1, _call("report_infeasible", reason_code="missing_tool"), _with_tool(s, _refusal_tool())
    ),
    "completed_unsolvable": lambda s: _at(
        s, len(s.steps) - 1, _call("done"), dataclasses.replace(s.facts, solvable=False, unsolvable_kind="missing_tool")
    ),
    # E2
    "empty_slots": lambda s: _at(s, s.first("set_slot"), _call("done")),
    "unverified_done": lambda s: _at(s, s.last("global_check"), _call("done")),
    # E3
    "slot_rule_violation": _observed_filter,
    "data_access": lambda s: _at(s, 0, _call(s.name("item_info"), id=s.env.compiled.slots[0].candidate_ids[0])),
    "policy_breach": lambda s: _at(
        s,
        s.first("set_slot"),
        s.steps[s.first("set_slot")][0],
        dataclasses.replace(s.facts, unapprovable=s.facts.item_ids),
    ),
    # E4
    "unobserved_id": _truth_before_any_query,
    "repeated_call": lambda s: _at(s, s.first("query") + 1, s.steps[s.first("query")][0]),
    "unfilled_check": lambda s: _at(s, s.first("set_slot"), _call(s.name("global_check"))),
    "ignored_result": _done_after_failed_check,
    "wrong_reason_code": lambda s: _at(
        s,
        0,
        _call("report_infeasible", reason_code="missing_tool"),
        _with_tool(s, _refusal_tool(), solvable=False, unsolvable_kind="tool_outage"),
    ),
    # E5
    "malformed_action": lambda s: _at(s, 0, None),
    "bad_arguments": lambda s: _at(s, 0, {"name": "set_slot", "arguments": "[1, 2]"}),
    "missing_argument": lambda s: _at(s, 0, _call("set_slot", col=1, id="x")),
    "wrong_type": lambda s: _set_at_first_set(s, row="two"),
    "cell_off_grid": lambda s: _set_at_first_set(s, row=s.facts.rows),
    "bad_operator": lambda s: _query_at_first_query(s, operator="~"),
    "too_many": lambda s: _at(
        s,
        0,
        _call(s.name("item_attributes"), ids=sorted(s.facts.visible_ids)[: s.facts.max_query_ids + 1], field="name"),
    ),
    "budget_exceeded": lambda s: _at(
        s, s.last("global_check"), _call(s.name("global_check")), dataclasses.replace(s.facts, global_budget=0)
    ),
    "distractor_tool": lambda s: _at(
        s, 0, _call("forecast_popularity"), _with_tool(s, ToolEntry("forecast_popularity", "distractor"))
    ),
    "broken_retry": _retry_broken_query,
    "not_hidden": lambda s: _at(
        s, 0, _call("get_hidden_slot_query_budget", row=s.visible()[0][0], col=s.visible()[0][1])
    ),
    "clear_empty": lambda s: _set_at_first_set(s, id=None),
    # E6
    "unknown_tool": lambda s: _at(s, 0, _call("teleport_to_solution")),
    "unknown_item": lambda s: _set_at_first_set(s, id="NO-SUCH-ID"),
    "unknown_field": lambda s: _query_at_first_query(s, field="colour"),
}


def test_mutation_bank__covers_every_action_cause() -> None:
    assert set(MUTATIONS) == set(CAUSES) - PLAN_ONLY_CAUSES


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_mutation_bank__each_mutation_raises_exactly_its_flag(domain: str) -> None:
    scenario = _scenario(domain)
    found = {}
    for cause, build in MUTATIONS.items():
        facts, prefix, action = build(scenario)
        flags = detect_errors(facts, trace_knowledge(facts, prefix), action)
        found[cause] = [(flag.code, flag.cause) for flag in flags]
    assert found == {cause: [(CAUSES[cause].code, cause)] for cause in MUTATIONS}


def test_grade__follows_the_rubric() -> None:
    def flags(*causes: str) -> list[Flag]:
        return [Flag(cause, "") for cause in causes]

    assert grade([]) == 1.0
    assert grade(flags("clear_empty")) == 0.8
    assert grade(flags("repeated_call")) == grade(flags("bad_operator")) == 0.6
    assert grade(flags("repeated_call", "bad_operator")) == grade(flags("empty_slots")) == 0.4
    assert grade(flags("unknown_tool")) == grade(flags("repeated_call", "bad_operator", "too_many")) == 0.2
    assert grade(flags("unknown_tool", "prefilled_cell")) == 0.0


# -- the detector is never silent when the tools refuse a call ---------------------------------------

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 8),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.sampled_from(["price", "name", "category", ">=", "in", "not_in", "1e500", " 3 ", "[]", '["a"]']),
    st.lists(st.text(max_size=3), max_size=3),
)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_detector__flags_every_call_the_tools_refuse(domain: str) -> None:
    env = AceEnv(domain, extra_query_num=0, global_check_alpha=0.2, max_steps=10**9)
    info = env.reset(seed=0, options={"instance_index": H15_INDEX})[1]
    facts = facts_from_reset(env.compiled, info)
    knowledge = [Knowledge.start(facts)]  # the episode's, replaced when an episode ends
    names = [*facts.tools, "nope"]
    compiled = env.compiled
    ids = [*compiled.slots[0].candidate_ids[:3], *sorted(facts.visible_ids)[:2], "nope"]

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(
        name=st.sampled_from(names),
        arguments=st.dictionaries(
            st.sampled_from(["row", "col", "id", "ids", "field", "operator", "value"]),
            st.one_of(_VALUES, st.sampled_from(ids), st.lists(st.sampled_from(ids), max_size=6)),
            max_size=6,
        ),
    )
    def run(name: str, arguments: dict[str, Any]) -> None:
        action = {"name": name, "arguments": arguments}
        flags = detect_errors(facts, knowledge[0], action)
        reply, _, terminated, _, info = env.step(action)
        if json.loads(reply)["status"] == "failed":
            assert flags, (action, reply)
        knowledge[0].observe(facts, action, info["reply"])
        if terminated:
            env.reset(seed=0, options={"instance_index": H15_INDEX})
            knowledge[0] = Knowledge.start(facts)

    run()

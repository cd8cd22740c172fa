"""``ACE-Holistic-v0``: APB's holistic planning on ACE: a whole plan first, graded by its structure,
then optionally carried out."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, flag
from ace_gym.instance import CompiledInstance
from ace_gym.planning.cost import plan_cost
from ace_gym.planning.knowledge import TaskFacts, facts_from_reset, split_action
from ace_gym.planning.plans import PlanGrade, grade_plan, plan_adherence, read_plan
from ace_gym.planning.settings import APB_INFO, apply_settings, check_settings
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.planning.unsolvable import REFUSAL_TOOL
from ace_gym.planning.unsolvable_mix import answer_key_of
from ace_gym.spaces import ObjectSpace
from ace_gym.text import valid_text
from ace_gym.tools import echo
from ace_gym.wrappers.chat_spaces import ChatMessages

ENDED = {"role": "user", "content": "The episode has ended; call reset()."}
MIN_GRIDS = 3
"""The fewest slot-valid grids a task has (:func:`grid_chance` at most 1/3): an instance whose
cells' own rules leave fewer is redrawn from the seed (with one grid nothing is left to plan)."""
MAX_DRAWS = 64
"""Instances a reset draws at most to find one with :data:`MIN_GRIDS` slot-valid grids."""
ACTING_ENV_KWARGS: dict[str, Any] = {"item_names": "renumbered", "global_check_alpha": 0}
"""The task a plan is carried out on: item names renumbered per episode (the published data's
give the truth away) and no global check (with checks, "fill at random, re-draw a cell while the
check fails" solves without planning: a plan carried out must be right without trial and error)."""
UNREWARDED_PLAN_CAUSES = frozenset({"bad_arguments", "empty_slots", "refused_solvable"})
"""Plan-wide flags that make a plan's score 0 whatever its APB grade: no plan at all (not a JSON
object, no tool_chain list), a plan that leaves a hidden cell unset (``done`` at once), a refusal
of a task that can be done. APB's rubric grades each as one flag (0.6, 0.4, 0.2): partial credit a
degenerate policy would collect."""


def plan_score(graded: PlanGrade) -> float:
    """The APB-style score of a plan that is not a refusal the unsolvable setting scores: 0 when
    a plan-wide flag of :data:`UNREWARDED_PLAN_CAUSES` is raised, else the APB grade. Not a
    reward on its own (:class:`HolisticEnv`): a plan's structure can be right without reading
    the instance."""
    if any(index == -1 and found.cause in UNREWARDED_PLAN_CAUSES for index, found in graded.flags):
        return 0.0
    return graded.grade


def executed_reward(plan: float, final: float, chance: float) -> float:
    """The reward of an executed plan: the plan's score times the env stack's final reward (the
    grid solved, or the unsolvable setting's matrix value) above ``chance``, the final reward a
    grid filled without planning earns (:func:`grid_chance`), rescaled so that 1 stays 1:
    ``plan * (final - chance) / (1 - chance)``. A random slot-valid grid earns 0 on average."""
    return plan * (final - chance) / (1 - chance)


def grid_chance(compiled: CompiledInstance) -> float:
    """The chance that a grid drawn uniformly among the hidden cells' slot-valid candidates is
    the solution: 1 / the number of such grids (every published instance has one solution; 0 when
    a cell has no slot-valid candidate)."""
    grids = math.prod(len(slot.valid_items) for slot in compiled.slots)
    return 1 / grids if grids else 0.0


class PlanOrCallSpace(ObjectSpace):
    """A plan (a JSON object, as text or a dict) or, after the plan, one tool call dict."""

    def __init__(self, seed: Any = None) -> None:
        super().__init__(dtype=object, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        rng = self.np_random
        chain = [
            {"name": "get_current_grid_state", "arguments": {}, "reason": "look"}
            for _ in range(int(rng.integers(0, 3)))
        ]
        return json.dumps({"plan": "sampled", "tool_chain": [*chain, {"name": "done", "arguments": {}}]})

    def contains(self, x: Any) -> bool:
        return isinstance(x, (str, Mapping))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlanOrCallSpace)


def plan_prompt(refusal_allowed: bool) -> str:
    """The request for a whole plan, appended to the first user message."""
    ending = (
        'If the task cannot be completed as specified, answer {"status": "REJECT", "reason_code": one of '
        f'{", ".join(UNSOLVABLE_KINDS)}, "reason": str}} instead.'
        if refusal_allowed
        else "Assume every tool works and the task can be completed."
    )
    return (
        "Before acting, write your whole plan as one JSON object: "
        '{"plan": str, "tool_chain": [{"name": str, "arguments": object, "reason": str}, ...]}, one entry per '
        "tool call in order, ending with done. Write static values (rows, columns, fields, bounds) as they are; "
        "write a value that comes from an earlier call's result as a string naming that step, e.g. \"the id chosen "
        f'from step 3". {ending}'
    )


class HolisticEnv(gym.Env[list[dict[str, Any]], Any]):
    """Plan an ACE task whole, without feedback; optionally carry the plan out.

    ## Description
    At reset an instance is drawn (``domain`` fixed, or drawn from the reset seed) on the env
    stack of ``settings`` (e.g. ``["unsolvable"]`` for APB's holistic-unsolvable split,
    ``["extraneous"]`` for distractors, ``["cost"]`` for costs). The first action is a plan,
    graded by :func:`ace_gym.planning.grade_plan` (a linear chain cannot choose among candidates it
    has not seen, so the *structure* is graded). A ``{"status": "REJECT", ...}`` plan is a refusal:
    with the ``unsolvable`` setting it is reported through ``report_infeasible`` (the mix records
    refusal recall and reason-code accuracy).

    ## Observation
    Chat messages: the system prompt and the first user message with the plan request
    (:func:`plan_prompt`); after the plan a user message with its grade when the plan ends the
    episode, else a request to carry it out (a grade then would tell an unsolvable task apart); in the acting phase a
    tool message per call.

    ## Action
    The plan (JSON text or dict); with ``act_after_plan``, then one tool call per step.

    ## Reward
    Only what needs the instance is rewarded (issue 38): a plan's structure does not, since one
    instance-agnostic template (per hidden cell one query per stated slot rule and a ``set_slot``
    of "the id chosen from step k", a global check, ``done``) grades 1.0 on every task.
    * A refusal (``{"status": "REJECT", ...}``) with the ``unsolvable`` setting earns
      :class:`~ace_gym.planning.unsolvable_mix.UnsolvableMix`'s matrix value on the plan step
      (right kind 1, wrong kind 0.25, a solvable task 0); without it, 0.
    * Any other plan earns 0 on the plan step. With ``act_after_plan`` (the default) the plan is
      then carried out, one tool call per step, and the last step earns the plan's score times
      the env stack's final reward above chance (:func:`executed_reward`): 1 when the grid is
      solved, ``-chance / (1 - chance)`` when not, where ``chance`` (:func:`grid_chance`,
      ``info["chance"]``) is the chance that a random slot-valid grid solves. The executed plan
      must solve this instance, and a grid filled without planning earns 0 on average. The task
      is carried out on :data:`ACTING_ENV_KWARGS` (renumbered names, no global check) and has at
      least :data:`MIN_GRIDS` slot-valid grids (redrawn from the seed otherwise). Without
      ``act_after_plan`` the episode ends at the plan: an evaluation of APB's grade, whose
      reward carries nothing but the refusal decision.
    ``info["plan_grade"]`` keeps APB's grade (what the paper reports) and ``info["plan_score"]``
    the grade with the degenerate plans at 0 (:func:`plan_score`, the reward until issue 38).
    ``info["score"]`` is the reward of the step that ends the episode.

    ## Information
    Plan step: ``score`` (when the plan ends the episode), ``plan_score``, ``plan_flags`` (step index, -1 for the whole plan, and the flag), ``plan_grade``,
    ``plan_correct``, ``refused``, ``reason_code``, ``planned_tools``; with the ``cost`` setting
    also ``plan_cost`` (what the chain would cost) and ``reference_cost`` (the cost-aware solver's). Last acting step: the env's
    final info plus ``chance``, ``plan_adherence`` (longest common subsequence of planned and executed tool
    names over the plan's length), ``plan_score``, ``final_reward`` (the env stack's) and
    ``score`` (the reward).

    ## Version History
    * v0: first release; until issue 38 the plan step earned :func:`plan_score`,
      ``act_after_plan`` was off by default, and then a carried-out plan earned the final reward
      itself on the published names with unlimited global checks.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium declares it per instance)

    def __init__(
        self,
        domain: str | None = None,
        dataset: str = "5x5",
        act_after_plan: bool = True,
        settings: Sequence[str] = (),
        setting_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.domains = DOMAIN_NAMES if domain is None else (get_domain(domain).name,)
        self.act_after_plan = flag("act_after_plan", act_after_plan)
        self.settings = check_settings(settings)
        options = {k: dict(v) for k, v in (setting_options or {}).items()}
        self._envs = {
            name: apply_settings(AceEnv(name, dataset, **ACTING_ENV_KWARGS), self.settings, options)
            for name in self.domains
        }
        self.observation_space = ChatMessages()
        self.action_space = PlanOrCallSpace()
        self._env: gym.Env | None = None
        self._facts: TaskFacts | None = None
        self._plan: PlanGrade | None = None
        self._executed: list[str] = []
        self._calls = 0
        self._started = False
        self._costs: dict[str, Any] = {}
        self._plan_score = 0.0
        self._chance = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        super().reset(seed=seed)
        env = self._env = self._envs[self.domains[int(self.np_random.integers(len(self.domains)))]]
        for _ in range(MAX_DRAWS):
            observation, info = env.reset(seed=int(self.np_random.integers(2**31)), options=options)
            compiled = env.get_wrapper_attr("compiled")
            self._chance = grid_chance(compiled)
            if self._chance <= 1 / MIN_GRIDS:
                break
        else:
            raise ConfigError(
                "instance", info["instance_id"], f"fewer than {MIN_GRIDS} slot-valid grids in {MAX_DRAWS} draws"
            )
        self._facts = facts_from_reset(compiled, info, answer_key_of(env))
        self._plan = None
        self._executed = []
        self._calls = 0
        self._started = True
        self._costs = info.get(APB_INFO, {}).get("cost", {})
        refusal = any(schema["function"]["name"] == REFUSAL_TOOL for schema in info["tools"])
        messages = [
            {"role": "system", "content": info["system_prompt"]},
            {"role": "user", "content": f"{observation}\n\n{plan_prompt(refusal)}"},
        ]
        return messages, info

    def step(self, action: Any) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        if not self._started:
            raise gym.error.ResetNeeded("Cannot call step() before reset()")
        if self._env is None:
            return [dict(ENDED)], 0.0, True, False, {}
        if self._plan is None:
            return self._planned(action)
        return self._acted(action)

    def _planned(self, action: Any) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        assert self._env is not None and self._facts is not None
        graded = self._plan = grade_plan(self._facts, action)
        info: dict[str, Any] = {
            "plan_flags": [{"step": index, **found.as_dict()} for index, found in graded.flags],
            "plan_grade": graded.grade,
            "plan_correct": graded.correct,
            "refused": graded.refused,
            "reason_code": graded.reason_code,
            "planned_tools": [valid_text(name) for name in graded.tool_names],  # the model's names
        }
        if self._costs:
            chain = (read_plan(action) or {}).get("tool_chain")
            info["plan_cost"] = plan_cost(self._costs["costs"], self._costs["per_id"], chain)
            info["reference_cost"] = self._costs["reference"]
        self._plan_score = info["plan_score"] = plan_score(graded)
        reward = 0.0
        if graded.refused and REFUSAL_TOOL in self._facts.tools:
            plan = read_plan(action) or {}
            report = {"reason_code": graded.reason_code, "explanation": echo(plan.get("reason", ""))}
            info.update(self._env.step({"name": REFUSAL_TOOL, "arguments": report})[4])  # the mix's score
            reward = float(info["score"])
        ends = graded.refused or not self.act_after_plan
        if ends:
            self._env = None
            info["score"] = reward
        # the grade is told once it is the episode's end: before acting it would tell an unsolvable task apart
        text = (
            f"Plan graded {graded.grade:.1f}." if ends else "Plan received. Now carry it out, one tool call per step."
        )
        return [{"role": "user", "content": text}], reward, ends, False, info

    def _acted(self, action: Any) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        assert self._env is not None and self._plan is not None
        self._calls += 1
        name = split_action(action)[0]
        self._executed.append(name if isinstance(name, str) else "")
        reply, reward, terminated, truncated, info = self._env.step(action)
        if terminated or truncated:
            info["plan_adherence"] = plan_adherence(self._plan.tool_names, self._executed)
            info["plan_score"] = self._plan_score
            info["final_reward"] = float(reward)
            info["chance"] = self._chance
            reward = info["score"] = executed_reward(self._plan_score, float(reward), self._chance)
            self._env = None
        message = {"role": "tool", "tool_call_id": f"call_{self._calls}_0", "name": echo(name), "content": reply}
        return [message], float(reward), terminated, truncated, info

"""Tool costs, cheaper composite tools and cost-aware rewards (APB's efficiency-aware setting)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym

from ace_gym.domains import get_domain
from ace_gym.envs import AceEnv
from ace_gym.envs.ace_env import ActionType
from ace_gym.errors import ConfigError, choice, did_you_mean, flag, number
from ace_gym.planning.cost import (
    COMPOSITE_KINDS,
    DEFAULT_COSTS,
    call_cost,
    composite_names,
    multi_query_schema,
    set_and_check_schema,
)
from ace_gym.planning.cost_solver import CostAwareSolver
from ace_gym.planning.knowledge import decode_arguments, json_argument, real_tool_kinds, split_action
from ace_gym.planning.replies import success
from ace_gym.planning.surface import called_name, record
from ace_gym.tools import REPLY_INFO, reply_in
from ace_gym.tools.readonly import ReadOnlyDict, read_only
from ace_gym.tools.replies import invalid

if TYPE_CHECKING:
    from ace_gym.dataset_schema import Instance

INFO_KEY = "cost"
REWARDS = ("penalty", "efficiency")
_ANNOTATED_LIMIT = 1024
"""How many annotated schemas a wrapper keeps before it starts over (schemas made per episode
below it, such as a replacement tool's, would otherwise pile up)."""


class CostAnnotatedTools(gym.Wrapper[str, ActionType, str, ActionType], gym.utils.RecordConstructorArgs):
    """Give every tool a cost, add cheaper composite tools, and optionally reward frugality.

    ## Tools
    Every schema's description ends with ``Cost: <c> per call.`` (a new read-only schema, built
    once per wrapper for each shared schema below it) (costs by tool kind,
    :data:`ace_gym.planning.cost.DEFAULT_COSTS`, ``costs`` overrides entries; the item-attributes
    tool costs its base plus ``per_id`` for each id asked). With ``composites=True`` two tools are
    added: ``query_<D>_candidates_by_conditions(row, col, conditions)`` answers several attribute
    conditions on one hidden cell at once (its ``matches`` are the candidates every condition
    matches, with each condition's field), and ``set_and_check_slot(row, col, id)`` fills a cell
    and checks its slot rules. Each is run as its atomic calls on the env below, so its output
    is their composition by construction; it charges the query budget once per condition and
    counts one env step per atomic call. Only calls reaching this wrapper are charged: stack it
    innermost (tools added or answered above it have no cost).

    ## Reward
    ``reward="penalty"`` (default): the env's reward minus ``lam`` x the call's cost (so the
    episode's return is the base reward - lam x total cost; ``lam=0`` leaves rewards unchanged).
    ``reward="efficiency"``: on the last step, score x ref_cost / max(cost, ref_cost), 0 elsewhere.

    ## Information
    Every step: ``info["cost"]`` (the episode's accumulated cost) and ``info["call_cost"]``. At
    reset ``info["apb"]["cost"]``: ``costs`` (tool name -> cost), ``per_id`` (the item-attributes
    tool's cost per id asked), ``composites`` (name -> kind) and
    ``reference`` (the cost of :class:`ace_gym.planning.cost_solver.CostAwareSolver` on this
    instance with the same tools and costs, or -1.0 with ``reference=False``); on every step its
    ``total`` and ``reference``, on the last also ``efficiency``. The reference is a
    deterministic solver with the agent's information only, not a proven optimum.
    """

    def __init__(
        self,
        env: gym.Env,
        costs: Mapping[str, float] | None = None,
        composites: bool = True,
        lam: float = 0.0,
        reward: str = "penalty",
        reference: bool = True,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, costs=costs, composites=composites, lam=lam, reward=reward, reference=reference
        )
        table = _costs(costs)
        composites = flag("composites", composites)
        lam = float(number("lam", lam, minimum=0, finite=True))
        reward = choice("reward", reward, REWARDS)
        reference = flag("reference", reference)
        if reward == "efficiency" and not reference:
            raise ConfigError("reference", reference, "the efficiency reward needs the reference cost")
        gym.Wrapper.__init__(self, env)
        self.costs, self.composites, self.lam, self.reward, self.reference = table, composites, lam, reward, reference
        self._kinds: dict[str, str] = {}
        self._cost = 0.0
        self._reference_cost = -1.0
        self._annotated: dict[tuple[int, float], tuple[Mapping[str, Any], ReadOnlyDict]] = {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._kinds = real_tool_kinds(info["domain"])
        noun = get_domain(info["domain"]).tool_noun
        tools = list(info["tools"])
        added = {}
        if self.composites:
            added = composite_names(noun)
            self._kinds.update(added)
            tools += _composite_schemas(noun)
        info["tools"] = [self._annotated_schema(schema) for schema in tools]
        self._cost = 0.0
        instance = self.env.get_wrapper_attr("compiled").instance
        self._reference_cost = (
            reference_cost(instance, info["budgets"], self.costs, self.composites) if self.reference else -1.0
        )
        named = {name: self.costs[kind] for name, kind in self._kinds.items()}
        per_id = self.costs["item_attributes_per_id"]
        record(
            info,
            INFO_KEY,
            {"costs": named, "per_id": per_id, "composites": added, "reference": self._reference_cost},
        )
        info["cost"] = 0.0
        return observation, info

    def _annotated_schema(self, schema: Mapping[str, Any]) -> ReadOnlyDict:
        """``schema`` with its cost at the end of its description, as a new read-only schema;
        kept for a read-only ``schema`` (shared by episodes), so each is annotated once."""
        name = schema["function"]["name"]
        cost = self.costs[self._kinds[name]] if name in self._kinds else 0.0
        key = (id(schema), cost)
        found = self._annotated.get(key)
        if found is not None and found[0] is schema:
            return found[1]
        function = schema["function"]
        description = f"{function['description']} Cost: {cost:g} per call."
        annotated: ReadOnlyDict = read_only({**schema, "function": {**function, "description": description}})
        if type(schema) is ReadOnlyDict:
            if len(self._annotated) >= _ANNOTATED_LIMIT:
                self._annotated.clear()
            self._annotated[key] = (schema, annotated)  # holding ``schema`` keeps its id unique
        return annotated

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        name = called_name(action)
        kind = self._kinds.get(name or "")
        cost = call_cost(self.costs, kind, split_action(action)[1])
        reward: SupportsFloat
        if kind in COMPOSITE_KINDS:
            observation, reward, terminated, truncated, info = self._composite(kind, action)
        else:
            observation, reward, terminated, truncated, info = self.env.step(action)
        self._cost += cost
        info.update(cost=self._cost, call_cost=cost)
        reward = float(reward) - self.lam * cost if self.reward == "penalty" else 0.0
        record(info, INFO_KEY, {"total": self._cost, "reference": self._reference_cost})
        if terminated or truncated:
            score = float(info.get("score") or 0.0)
            reference = self._reference_cost
            efficiency = score * reference / max(self._cost, reference) if reference > 0 else 0.0
            if self.reward == "efficiency":
                reward = efficiency
            record(info, INFO_KEY, {"efficiency": efficiency})
        return observation, reward, terminated, truncated, info

    # -- composites: run as their atomic calls ------------------------------------------------

    def _composite(self, kind: str, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        arguments = decode_arguments(split_action(action)[1])
        if arguments is None:
            return _refused(kind, "arguments must be a JSON object")
        if kind == "multi_query":
            return self._multi_query(arguments)
        return self._set_and_check(arguments)

    def _atomic(self, kind: str, arguments: dict[str, Any]) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        name = next(n for n, k in self._kinds.items() if k == kind)
        return self.env.step({"name": name, "arguments": arguments})

    def _multi_query(self, arguments: dict[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        conditions = json_argument(arguments.get("conditions"))
        if not isinstance(conditions, list) or not conditions or not all(isinstance(c, Mapping) for c in conditions):
            return _refused("multi_query", "conditions must be a non-empty list of {field, operator, value} objects")
        cell: dict[str, Any] = {key: arguments[key] for key in ("row", "col") if key in arguments}
        matches: dict[str, dict[str, Any]] | None = None
        fields = []
        total = 0.0
        for condition in conditions:
            query = {**cell, **{k: condition[k] for k in ("field", "operator", "value") if k in condition}}
            observation, reward, terminated, truncated, info = self._atomic("query", query)
            total += float(reward)
            reply = reply_in(info)
            if reply is None or not reply.ok or terminated or truncated:
                return observation, total, terminated, truncated, info
            data = reply.data
            fields.append({"field": data["field"], "operator": data["operator"], "value": data["value"]})
            found = {m["id"]: m for m in data["matches"]}
            if matches is None:
                matches = {item: dict(match) for item, match in found.items()}
            else:
                matches = {item: {**known, **found[item]} for item, known in matches.items() if item in found}
        payload = {
            "row": data["row"],
            "col": data["col"],
            "conditions": fields,
            "matches": list((matches or {}).values()),
            "remaining_budget": data["remaining_budget"],
        }
        reply = success(payload)
        return reply.text, total, False, False, {**info, "tool": "multi_query", REPLY_INFO: reply}

    def _set_and_check(self, arguments: dict[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self._atomic("set_slot", arguments)
        placed = reply_in(info)
        if placed is None or not placed.ok or terminated or truncated:
            return observation, float(reward), terminated, truncated, info
        data = placed.data
        check, check_reward, terminated, truncated, info = self._atomic(
            "slot_check", {"row": data["row"], "col": data["col"]}
        )
        checked = reply_in(info)
        if checked is None or not checked.ok:
            return check, float(reward) + float(check_reward), terminated, truncated, info
        reply = success({**data, **checked.data})
        return (
            reply.text,
            float(reward) + float(check_reward),
            terminated,
            truncated,
            {**info, "tool": "set_and_check", REPLY_INFO: reply},
        )


def _refused(kind: str, detail: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """A composite call refused before any atomic call ran (``info["tool"]`` is its kind)."""
    reply = invalid(detail)
    return reply.text, 0.0, False, False, {"tool": kind, "ok": False, REPLY_INFO: reply}


@functools.cache
def _composite_schemas(noun: str) -> tuple[ReadOnlyDict, ReadOnlyDict]:
    """The read-only schemas of the two composite tools of a domain noun (built once)."""
    return multi_query_schema(noun), set_and_check_schema()


def _costs(costs: Mapping[str, float] | None) -> dict[str, float]:
    if costs is None:
        return dict(DEFAULT_COSTS)
    if not isinstance(costs, Mapping):
        raise ConfigError("costs", costs, f"must be a mapping of tool kinds among {list(DEFAULT_COSTS)} to costs")
    table = dict(DEFAULT_COSTS)
    for key, value in costs.items():
        if key not in DEFAULT_COSTS:
            raise ConfigError(
                "costs", key, f"unknown tool kind; known: {list(DEFAULT_COSTS)}{did_you_mean(key, DEFAULT_COSTS)}"
            )
        table[key] = float(number(f"costs[{key!r}]", value, minimum=0, finite=True))
    return table


_BUDGET_ARGUMENTS = (
    "extra_query_num",
    "global_check_alpha",
    "check_include_reason",
    "max_query_ids",
    "max_query_fields",
    "max_steps",
)


def reference_cost(
    instance: Instance, budgets: Mapping[str, Any], costs: Mapping[str, float], composites: bool
) -> float:
    """What :class:`CostAwareSolver` spends on ``instance`` under ``budgets`` (an env's
    ``info["budgets"]``) with these costs and composites, played on a fresh env of its own."""
    core = AceEnv(instance.domain, **{key: budgets[key] for key in _BUDGET_ARGUMENTS if key in budgets})
    twin = CostAnnotatedTools(core, costs=costs, composites=composites, reference=False)
    observation, info = twin.reset(seed=0, options={"instance": instance})
    episode = CostAwareSolver().start(observation, info, 0)
    while True:
        observation, _, terminated, truncated, info = twin.step(episode.act(observation))
        if terminated or truncated:
            return float(info["cost"])

"""What policies that do not plan earn on the planning probes (issue 38), next to honest play.

    python benchmarks/bench_planning_floors.py [--seeds N] [--first-seed S]

Every policy acts only on what a model sees. Mean reward over seeds S..S+N-1 (default 0-39):

* ``ACE-<domain>-unsolvable-v0``, per domain: ``tells`` (refuse with the kind a surface phrase or
  tool marks: no ``set_slot`` offered -> missing_tool; ``approve_assignment`` or the compliance
  sentence -> tool_outage; "agreed on the phone" -> missing_information; ``get_attachment`` or
  "attached sheet" -> missing_attachment), then the exact solver when none fires; ``refuse``
  (always refuse with the kind most frequent on seeds 1000-1039); ``solver`` (the exact solver,
  never refusing); ``careful`` and ``careful-never-refuse`` (:class:`ace_gym.planning.probes.CarefulSolver`,
  the honest reference, where it exists) and ``careful-greedy`` (its evidence, without counting
  completions: a missing limit or sheet is refused; the grid filled by greedy-local: no search). Also the tells' catch rate on unsolvable tasks and
  false-fire rate on solvable ones.
* ``ACE-Holistic-v0``, per domain: ``template`` (per hidden cell one query per stated slot rule,
  ``set_slot`` "the id chosen from step k", a global check where offered, ``done``) and, when the env acts
  after the plan, the template carried out blindly (each cell set to a random id its queries
  returned for every rule) and carried out by the exact solver (the honest reference).
* ``ACE-StepWise-v0`` (domains drawn from the seed): ``blind`` (a query on the first hidden cell
  by its first stated rule, as the solver writes it, without reading the trajectory),
  ``next-cell`` (the same on the first hidden cell the trajectory has not queried yet),
  ``reference`` (the solver's calls).

Runs on any commit that has these env ids (the answer key is read from ``UnsolvableMix.answer_key``
where it exists, else from the reset ``info`` that carried it before issue 38).
"""

from __future__ import annotations

import argparse
import collections
import json
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

import ace_gym  # noqa: F401 (registers the env ids)
from ace_gym.agents import ExactSolver
from ace_gym.agents.greedy import GreedyLocal
from ace_gym.agents.solver import slot_rule_queries
from ace_gym.agents.task_view import read_task
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.planning.probes import AlwaysRefuse

try:  # since issue 38
    from ace_gym.planning.probes import CarefulNeverRefuse, CarefulSolver
    from ace_gym.planning.unsolvable_mix import answer_key_of
except ImportError:
    CarefulSolver = CarefulNeverRefuse = None  # type: ignore[assignment,misc]
    answer_key_of = None  # type: ignore[assignment]

TELLS = (
    ("missing_tool", lambda tools, text: "set_slot" not in tools),
    ("tool_outage", lambda tools, text: "approve_assignment" in tools or "Compliance policy" in text),
    ("missing_information", lambda tools, text: "agreed on the phone" in text),
    ("missing_attachment", lambda tools, text: "get_attachment" in tools or "attached sheet" in text),
)


if CarefulSolver is not None:

    class CarefulGreedy(CarefulSolver):  # type: ignore[misc,valid-type]
        """The careful evidence without search: a missing piece refused, the grid filled by greedy-local."""

        name = "careful-greedy"
        filler = GreedyLocal
        counts = False


def kind_of(env: gym.Env, reset_info: Mapping[str, Any]) -> str:
    if answer_key_of is not None:
        return str((answer_key_of(env) or {}).get("kind", ""))
    return str(reset_info["apb"]["unsolvable"]["kind"])


def tell(info: Mapping[str, Any]) -> str:
    tools = {schema["function"]["name"] for schema in info["tools"]}
    return next((kind for kind, fires in TELLS if fires(tools, info["system_prompt"])), "")


class Tells(ExactSolver):
    name = "tells"

    def start(self, observation: str, info: Mapping[str, Any], seed: int) -> Any:
        found = tell(info)
        if found:
            return refusing(found).start(observation, info, seed)
        return super().start(observation, info, seed)


def refusing(code: str) -> AlwaysRefuse:
    """:class:`AlwaysRefuse` with reason code ``code``."""
    return type(f"Refuse_{code}", (AlwaysRefuse,), {"reason_code": code})()


def play(env: gym.Env, policy: Any, seed: int) -> tuple[float, str, dict[str, Any]]:
    observation, info = env.reset(seed=seed)
    kind = kind_of(env, info)
    episode = policy.start(observation, info, seed)
    while True:
        observation, reward, terminated, truncated, _ = env.step(episode.act(observation))
        if terminated or truncated:
            return float(reward), kind, info


def unsolvable_rows(seeds: range) -> list[str]:
    rows = []
    for domain in DOMAIN_NAMES:
        env = gym.make(f"ACE-{domain}-unsolvable-v0")
        frequent = collections.Counter()
        for seed in range(1000, 1040):
            _, info = env.reset(seed=seed)
            frequent[kind_of(env, info)] += 1
        most = max((k for k in frequent if k), key=lambda k: frequent[k])
        policies: dict[str, Any] = {"tells": Tells(), f"refuse({most})": refusing(most), "solver": ExactSolver()}
        if CarefulSolver is not None:
            policies |= {
                "careful": CarefulSolver(),
                "careful-never-refuse": CarefulNeverRefuse(),
                "careful-greedy": CarefulGreedy(),
            }
        means, caught, fired, unsolvable = {}, 0, 0, 0
        for name, policy in policies.items():
            rewards = []
            for seed in seeds:
                reward, kind, info = play(env, policy, seed)
                rewards.append(reward)
                if name == "tells":
                    unsolvable += bool(kind)
                    caught += bool(kind) and tell(info) == kind
                    fired += not kind and bool(tell(info))
            means[name] = float(np.mean(rewards))
        solvable = len(seeds) - unsolvable
        cells = " | ".join(f"{name} {value:.3f}" for name, value in means.items())
        rows.append(f"| {domain} | {caught}/{unsolvable} | {fired}/{solvable} | {cells} |")
    return rows


def template_plan(observation: str, info: Mapping[str, Any]) -> dict[str, Any]:
    """The instance-agnostic template: it reads the hidden cells and their stated rules only."""
    view = read_task(observation, info)
    chain: list[dict[str, Any]] = []
    for slot in view.slots:
        for query in slot_rule_queries(view, slot):
            chain.append({"name": query["name"], "arguments": query["arguments"], "reason": "query"})
        step = len(chain)
        chain.append(
            {
                "name": view.tool("set_slot"),
                "arguments": {"row": slot.row, "col": slot.col, "id": f"the id chosen from step {step}"},
                "reason": "fill",
            }
        )
    if view.global_check_budget != 0:  # a check where the task offers one
        chain.append({"name": view.tool("global_check"), "arguments": {}, "reason": "verify"})
    chain.append({"name": "done", "arguments": {}, "reason": "finish"})
    return {"plan": "query, fill, verify", "tool_chain": chain}


def blind_fill(observation: str, info: Mapping[str, Any], rng: np.random.Generator) -> Any:
    """The template carried out without planning: a random id each cell's queries all returned."""
    view = read_task(observation, info)
    for slot in view.slots:
        common: set[str] | None = None
        for query in slot_rule_queries(view, slot):
            data = json.loads((yield query)).get("data") or {}
            ids = {m["id"] for m in data.get("matches", ())}
            common = ids if common is None else common & ids
        if common:
            yield {
                "name": view.tool("set_slot"),
                "arguments": {"row": slot.row, "col": slot.col, "id": str(rng.choice(sorted(common)))},
            }
    if view.global_check_budget != 0:
        yield {"name": view.tool("global_check"), "arguments": {}}
    yield {"name": "done", "arguments": {}}


def holistic_rows(seeds: range) -> list[str]:
    rows = []
    for domain in DOMAIN_NAMES:
        env = gym.make("ACE-Holistic-v0", domain=domain)
        acts = env.unwrapped.act_after_plan
        results: dict[str, list[float]] = collections.defaultdict(list)
        for execution in ("blind", "solver") if acts else ("plan only",):
            for seed in seeds:
                messages, info = env.reset(seed=seed)
                observation = messages[1]["content"].split("\n\nBefore acting")[0]
                _, reward, terminated, truncated, _ = env.step(json.dumps(template_plan(observation, info)))
                total = reward
                if not (terminated or truncated):
                    core_info = {**info, "system_prompt": messages[0]["content"]}
                    script: Any = (
                        blind_fill(observation, core_info, np.random.default_rng(seed))
                        if execution == "blind"
                        else ExactSolver().start(observation, core_info, seed)
                    )
                    reply: Any = None
                    first = True
                    while not (terminated or truncated):
                        if execution == "blind":
                            try:
                                action = next(script) if first else script.send(reply)
                            except StopIteration:
                                action = {"name": "done", "arguments": {}}
                        else:
                            action = script.act(reply)
                        first = False
                        observation_messages, reward, terminated, truncated, _ = env.step(action)
                        reply = observation_messages[-1]["content"]
                        total += reward
                results[f"template, {execution}"].append(total)
        cells = " | ".join(f"{name} {np.mean(values):.3f}" for name, values in results.items())
        rows.append(f"| {domain} | {cells} |")
    return rows


def _rule_query(messages: list[dict[str, Any]], info: Mapping[str, Any], cell: tuple[int, int] | None) -> Any:
    """A query on ``cell`` (None: the first hidden cell) by its first stated rule, as the solver writes it."""
    view = read_task(messages[1]["content"], {**info, "system_prompt": messages[0]["content"]})
    slot = next((s for s in view.slots if s.cell == cell), view.slots[0])
    query = slot_rule_queries(view, slot)[0]
    return [{"tool": query["name"], "arguments": query["arguments"]}]


def _next_cell(task: Any) -> tuple[int, int] | None:
    """The first hidden cell (row-major) the trajectory has not queried yet."""
    queried = {(a["arguments"].get("row"), a["arguments"].get("col")) for a, _ in task.prefix if "query" in a["name"]}
    return next((cell for cell in sorted(task.facts.hidden) if cell not in queried), None)


def stepwise_rows(seeds: range) -> list[str]:
    env = gym.make("ACE-StepWise-v0")
    results: dict[str, list[float]] = collections.defaultdict(list)
    predictions: dict[str, Callable[[Any, list[dict[str, Any]], Mapping[str, Any]], Any]] = {
        "blind": lambda task, messages, info: _rule_query(messages, info, None),
        "next-cell": lambda task, messages, info: _rule_query(messages, info, _next_cell(task)),
        "reference": lambda task, messages, info: [dict(action) for action, _ in task.reference],
    }
    for name, predict in predictions.items():
        for seed in seeds:
            messages, info = env.reset(seed=seed)
            results[name].append(float(env.step(predict(env.unwrapped._task, messages, info))[1]))
    return ["| " + " | ".join(f"{name} {np.mean(values):.3f}" for name, values in results.items()) + " |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--only", choices=("unsolvable", "holistic", "stepwise"), default=None)
    args = parser.parse_args()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"seeds {seeds.start}-{seeds.stop - 1}")
    if args.only in (None, "unsolvable"):
        print("| domain | tells catch | tells false fire | mean reward |")
        print("\n".join(unsolvable_rows(seeds)))
    if args.only in (None, "holistic"):
        print("| domain | mean reward |")
        print("\n".join(holistic_rows(seeds)))
    if args.only in (None, "stepwise"):
        print("| mean reward |")
        print("\n".join(stepwise_rows(seeds)))


if __name__ == "__main__":
    main()

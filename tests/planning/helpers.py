"""Helpers shared by the planning tests: solver trajectories on bundled and tiny generated instances."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from typing import Any

import gymnasium as gym

from ace_gym.agents import ExactSolver
from ace_gym.agents.solver import slot_rule_queries
from ace_gym.agents.task_view import read_task
from ace_gym.dataset_schema import Instance
from ace_gym.generators import generate_instance
from ace_gym.instance import CompiledInstance
from ace_gym.planning.trajectory import Step, scripted_trajectory
from ace_gym.scoring import evaluate_grid


def solver_steps(env: gym.Env, observation: Any, info: dict[str, Any], seed: int = 0) -> tuple[list[Step], float]:
    """Play the exact solver on a reset env; the executed (action, reply) pairs and the final reward."""
    return scripted_trajectory(env, ExactSolver(), observation, info, seed)


@functools.cache
def tiny_instance(domain: str, seed: int, hidden_slots: int = 3, decoy_budget: int = 3) -> Instance:
    """A small certified instance: 2x3 grid, 5 candidates per hidden slot (125 completions at H=3)."""
    return generate_instance(
        domain, rows=2, cols=3, hidden_slots=hidden_slots, decoy_budget=decoy_budget, candidates_per_slot=4, seed=seed
    )


def valid_completions(compiled: CompiledInstance) -> Iterator[tuple[int, ...]]:
    """Every assignment of candidates (any candidate, slot-valid or not) to the hidden cells that
    scores 1 under the compiled instance's rules: the brute force the certificates are checked by."""
    grid = list(compiled.initial_grid)
    for choice in itertools.product(*(slot.candidate_items for slot in compiled.slots)):
        for slot, item in zip(compiled.slots, choice, strict=True):
            grid[slot.cell] = item
        if evaluate_grid(compiled, grid)[0]:
            yield choice


def template_plan(observation: str, info: dict[str, Any]) -> dict[str, Any]:
    """The instance-agnostic holistic plan an adversarial bank found (issue 38, finding 4): per
    hidden cell one query per stated slot rule and a set of "the id chosen from step k", a global
    check where the task offers one, done. It reads the hidden cells and their stated rules only."""
    view = read_task(observation, info)
    chain: list[dict[str, Any]] = []
    for slot in view.slots:
        chain += [{**query, "reason": "query"} for query in slot_rule_queries(view, slot)]
        reference = f"the id chosen from step {len(chain)}"
        chain.append({"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": reference}})
    if view.global_check_budget != 0:  # a check where the task offers one
        chain.append({"name": view.tool("global_check"), "arguments": {}})
    chain.append({"name": "done", "arguments": {}})
    return {"plan": "query, fill, verify", "tool_chain": chain}

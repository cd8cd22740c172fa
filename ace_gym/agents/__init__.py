"""Agents that play ACE envs: scripted baselines (exact solver, greedy-local, greedy-local with a
revise step, random) and the interfaces LLM policies implement (``ace_gym.agents.llm``). Policies
by name (``make_policy``) are in :mod:`ace_gym.policies`."""

from __future__ import annotations

from ace_gym.agents.base import ChatEngine, Completion, Policy, ScriptedEpisode, ScriptedPolicy
from ace_gym.agents.greedy import GreedyLocal
from ace_gym.agents.policies import is_engine_spec, policy_name
from ace_gym.agents.random_policy import RandomPolicy
from ace_gym.agents.revise import GreedyRevise
from ace_gym.agents.solver import BatchingSolver, ExactSolver
from ace_gym.agents.task_view import DONE, Script, ToolCallDict

__all__ = [
    "DONE",
    "BatchingSolver",
    "ChatEngine",
    "Completion",
    "ExactSolver",
    "GreedyLocal",
    "GreedyRevise",
    "Policy",
    "RandomPolicy",
    "Script",
    "ScriptedEpisode",
    "ScriptedPolicy",
    "ToolCallDict",
    "is_engine_spec",
    "policy_name",
]

"""Agents that play ACE envs: scripted baselines (exact solver, greedy-local, greedy-local with a
revise step, random), the interfaces LLM policies implement (``ace_gym.agents.llm``), and
policies by name (:func:`make_policy`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ace_gym.agents.base import ChatEngine, Completion, Policy, ScriptedEpisode, ScriptedPolicy
from ace_gym.agents.greedy import GreedyLocal
from ace_gym.agents.random_policy import RandomPolicy
from ace_gym.agents.revise import GreedyRevise
from ace_gym.agents.solver import ExactSolver
from ace_gym.agents.task_view import DONE, Script, ToolCallDict
from ace_gym.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from ace_gym.agents.policies import (
        POLICY_SPECS,
        SCRIPTED_POLICIES,
        check_policy_spec,
        is_engine_spec,
        make_policy,
        make_scripted_policy,
        policy_label,
        policy_name,
    )

__all__ = [
    "DONE",
    "POLICY_SPECS",
    "SCRIPTED_POLICIES",
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
    "check_policy_spec",
    "is_engine_spec",
    "make_policy",
    "make_scripted_policy",
    "policy_label",
    "policy_name",
]

_POLICY_NAMES = [
    "POLICY_SPECS",
    "SCRIPTED_POLICIES",
    "check_policy_spec",
    "is_engine_spec",
    "make_policy",
    "make_scripted_policy",
    "policy_label",
    "policy_name",
]
# The policies by name include the planning probes, which import the solver from here.
__getattr__, __dir__ = lazy_exports(__name__, "ace_gym.agents.policies", _POLICY_NAMES)

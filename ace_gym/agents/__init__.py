"""Agents that play ACE envs: scripted baselines (exact solver, greedy-local, greedy-local with a revise step, random) and the
interfaces LLM policies implement (``ace_gym.agents.llm``)."""

from __future__ import annotations

from ace_gym.agents.base import (
    DONE,
    ChatEngine,
    Completion,
    Policy,
    Script,
    ScriptedEpisode,
    ScriptedPolicy,
    ToolCallDict,
)
from ace_gym.agents.greedy import GreedyLocal
from ace_gym.agents.random_policy import RandomPolicy
from ace_gym.agents.revise import GreedyRevise
from ace_gym.agents.solver import ExactSolver
from ace_gym.errors import ConfigError, did_you_mean

SCRIPTED_POLICIES: dict[str, type[ScriptedPolicy]] = {
    policy.name: policy for policy in (ExactSolver, GreedyLocal, GreedyRevise, RandomPolicy)
}


def make_scripted_policy(name: str) -> ScriptedPolicy:
    """The scripted policy called ``name`` (``solver``, ``greedy``, ``greedy-revise``, ``random``)."""
    if name not in SCRIPTED_POLICIES:
        raise ConfigError(
            "policy",
            name,
            f"known scripted policies: {', '.join(SCRIPTED_POLICIES)}{did_you_mean(name, SCRIPTED_POLICIES)}",
        )
    return SCRIPTED_POLICIES[name]()


__all__ = [
    "DONE",
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
    "make_scripted_policy",
]

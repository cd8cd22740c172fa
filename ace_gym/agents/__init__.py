"""Agents that play ACE envs: scripted baselines (exact solver, greedy-local, random) and the
interfaces LLM policies implement (``ace_gym.agents.llm``)."""

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

__all__ = ["DONE", "ChatEngine", "Completion", "Policy", "Script", "ScriptedEpisode", "ScriptedPolicy", "ToolCallDict"]

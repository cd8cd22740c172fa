"""What names a policy without knowing the table of policies by name (:mod:`ace_gym.policies`,
which lists the benchmark homes' scripted policies and so sits above them)."""

from __future__ import annotations

from ace_gym.agents.llm import ENGINE_KINDS


def policy_name(policy: object) -> str:
    """How a policy object is named in records when no label is given: its ``name`` attribute,
    else its class name."""
    return str(getattr(policy, "name", None) or type(policy).__name__)


def is_engine_spec(spec: str) -> bool:
    """Whether ``spec`` names an LLM engine (``KIND:TARGET`` with a known kind)."""
    kind, sep, target = spec.partition(":")
    return bool(sep and target) and kind in ENGINE_KINDS

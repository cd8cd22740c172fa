"""What names a policy without knowing the table of policies by name (:mod:`ace_gym.policies`,
which lists the benchmark homes' scripted policies and so sits above them).

``SCRIPTED_POLICIES``, ``POLICY_SPECS``, ``check_policy_spec``, ``policy_label``,
``make_scripted_policy`` and ``make_policy`` moved to :mod:`ace_gym.policies`; they stay importable
from here for one release (importing one warns, DeprecationWarning).
"""

from __future__ import annotations

from ace_gym.agents.llm import ENGINE_KINDS
from ace_gym.lazy_exports import moved_names

MOVED: dict[str, str] = dict.fromkeys(
    ["POLICY_SPECS", "SCRIPTED_POLICIES", "check_policy_spec", "make_policy", "make_scripted_policy", "policy_label"],
    "ace_gym.policies",
)
"""The policies by name, which moved to :mod:`ace_gym.policies` (import them from there)."""


def policy_name(policy: object) -> str:
    """How a policy object is named in records when no label is given: its ``name`` attribute,
    else its class name."""
    return str(getattr(policy, "name", None) or type(policy).__name__)


def is_engine_spec(spec: str) -> bool:
    """Whether ``spec`` names an LLM engine (``KIND:TARGET`` with a known kind)."""
    kind, sep, target = spec.partition(":")
    return bool(sep and target) and kind in ENGINE_KINDS


__all__ = ["is_engine_spec", "policy_name", *MOVED]  # the moved names for one release, as in ace_gym.agents

__getattr__, __dir__ = moved_names(__name__, MOVED)

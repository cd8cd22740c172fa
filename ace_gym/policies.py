"""Policies by name: the one way the command line, the examples and the integrations name a policy.

A policy spec is a scripted policy's name (``solver``, ``solver-batch`` (the solver with independent calls in one turn), ``greedy``, ``greedy-revise``, ``random``; the planning
settings' ``cost-solver``, ``refuse`` and ``probe-retry|replace|alternative|refuse``, see
:mod:`ace_gym.planning.probes`) or an LLM engine
``KIND:TARGET`` (``vllm:MODEL_PATH``, ``hf:MODEL_PATH``, ``openai:MODEL@URL``; see
:func:`~ace_gym.agents.llm.make_engine`). :func:`policy_label` is how a policy is named in episode
records and keys; :func:`make_policy` builds it.

The table lists the core's scripted policies and those the benchmarks declare
(:data:`ace_gym.stacks.BENCHMARKS`: APB's probes and cost-aware solver), so it sits above the
benchmark homes, in the stacks layer (docs/architecture.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ace_gym.agents.base import Policy, ScriptedPolicy
from ace_gym.agents.greedy import GreedyLocal
from ace_gym.agents.policies import is_engine_spec
from ace_gym.agents.random_policy import RandomPolicy
from ace_gym.agents.revise import GreedyRevise
from ace_gym.agents.solver import BatchingSolver, ExactSolver
from ace_gym.errors import ConfigError, did_you_mean
from ace_gym.stacks import BENCHMARKS


def _declared_policies() -> list[type[ScriptedPolicy]]:
    """The benchmarks' scripted policies, in declaration order; ConfigError naming the benchmark
    for one that is no :class:`ScriptedPolicy` class."""
    found = []
    for benchmark in BENCHMARKS:
        for policy in benchmark.scripted_policies():
            if not (isinstance(policy, type) and issubclass(policy, ScriptedPolicy)):
                raise ConfigError(f"{benchmark.name}.policies", policy, "must name ScriptedPolicy classes")
            found.append(policy)
    return found


_SCRIPTED_CLASSES: tuple[type[ScriptedPolicy], ...] = (
    ExactSolver,
    BatchingSolver,
    GreedyLocal,
    GreedyRevise,
    RandomPolicy,
    *_declared_policies(),
)
SCRIPTED_POLICIES: dict[str, type[ScriptedPolicy]] = {policy.name: policy for policy in _SCRIPTED_CLASSES}
__all__ = [
    "POLICY_SPECS",
    "SCRIPTED_POLICIES",
    "check_policy_spec",
    "make_policy",
    "make_scripted_policy",
    "policy_label",
]

POLICY_SPECS = (
    f"{'|'.join(SCRIPTED_POLICIES)}|vllm:MODEL_PATH|hf:MODEL_PATH|openai:MODEL@URL "
    "(URL: the server's base URL, e.g. http://127.0.0.1:8000/v1)"
)
"""The policy specs, as a command line's help shows them."""


def check_policy_spec(spec: str) -> None:
    """ConfigError (with a suggestion) unless ``spec`` is a scripted policy or an engine spec."""
    if spec not in SCRIPTED_POLICIES and not is_engine_spec(spec):
        raise ConfigError(
            "policy",
            spec,
            f"expected {', '.join(SCRIPTED_POLICIES)} or vllm:PATH, hf:PATH, openai:MODEL@URL"
            f"{did_you_mean(spec, SCRIPTED_POLICIES)}",
        )


def policy_label(spec: str, engine_options: Mapping[str, Any] | None = None) -> str:
    """How the policy of ``spec`` is named in episode records and keys: the spec, followed by the
    engine options as sorted JSON when there are any (they change results). Checks ``spec``
    (:func:`check_policy_spec`); engine options for a scripted policy are a ConfigError."""
    check_policy_spec(spec)
    if not engine_options:
        return spec
    if spec in SCRIPTED_POLICIES:
        raise ConfigError("engine options", dict(engine_options), f"apply to LLM policies only, not to {spec!r}")
    return f"{spec} {json.dumps(dict(engine_options), sort_keys=True)}"


def make_scripted_policy(name: str) -> ScriptedPolicy:
    """The scripted policy called ``name`` (``solver``, ``greedy``, ``random``)."""
    if name not in SCRIPTED_POLICIES:
        raise ConfigError(
            "policy",
            name,
            f"known scripted policies: {', '.join(SCRIPTED_POLICIES)}{did_you_mean(name, SCRIPTED_POLICIES)}",
        )
    return SCRIPTED_POLICIES[name]()


def make_policy(spec: str, **engine_options: Any) -> Policy:
    """Build the policy ``spec`` names (loading an LLM policy's model); ``engine_options`` go to
    the engine's constructor. ConfigError for a spec of no known shape, for engine options given
    to a scripted policy, and for an engine whose optional back end is not installed."""
    policy_label(spec, engine_options)  # checks the spec and the options
    if spec in SCRIPTED_POLICIES:
        return make_scripted_policy(spec)
    try:  # the engines import their back end (vllm, transformers, openai) when built
        from ace_gym.agents.llm import make_engine

        return make_engine(spec, **engine_options)
    except ImportError as error:
        kind = spec.partition(":")[0]
        raise ConfigError(
            "policy",
            spec,
            f"LLM policies need ace_gym.agents.llm and its optional dependencies ({error}); "
            f"install e.g. pip install '.[{kind}]' in an ace-gym checkout",
        ) from None

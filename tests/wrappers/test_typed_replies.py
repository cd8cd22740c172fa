"""Wrappers read a step's typed reply (``info["reply"]``), never the observation text (issue 28).

Each planning wrapper is run twice over the same calls: on the env as it is, and on the env with
every step's observation replaced by an opaque non-JSON string while its info (the typed reply
included) is left intact. What the wrappers report (rewards, ends, infos) must not change, and
what they answer themselves must be the same text.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.planning import CostAnnotatedTools, Refine, UnsolvableMix
from ace_gym.planning.cost import SET_AND_CHECK_TOOL, multi_query_name
from ace_gym.tools import REPLY_INFO, ToolReply, tool_name
from tests.core_helpers import H15_INDEX
from tests.planning.helpers import solver_steps

OPTIONS = {"instance_index": H15_INDEX}
OPAQUE = "<an observation no wrapper may parse>"


class OpaqueObservations(gym.Wrapper):
    """The env with every step's observation replaced by :data:`OPAQUE` (info left as it is)."""

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        _, reward, terminated, truncated, info = self.env.step(action)
        return OPAQUE, reward, terminated, truncated, info


def _stack(domain: str, opaque: bool, kind: str) -> gym.Env:
    base: gym.Env = AceEnv(domain)
    if opaque:
        base = OpaqueObservations(base)
    costed = CostAnnotatedTools(base, composites=True, reference=False)
    return Refine(UnsolvableMix(costed, p_unsolvable=1.0, kinds=[kind], marker_rate=0.0))  # the solver asks no approval


def _calls(domain: str) -> list[dict[str, Any]]:
    """The exact solver's calls, with the two composite tools tried on its first hidden cell."""
    bare = AceEnv(domain)
    observation, info = bare.reset(seed=0, options=OPTIONS)
    steps, _ = solver_steps(bare, observation, info)
    actions = [dict(action) for action, _ in steps]
    query = next(a for a in actions if a["name"] == tool_name("query", domain))
    placed = next(a for a in actions if a["name"] == "set_slot")
    multi = {
        "name": multi_query_name(bare.domain.tool_noun),
        "arguments": {
            "row": query["arguments"]["row"],
            "col": query["arguments"]["col"],
            "conditions": [{k: query["arguments"][k] for k in ("field", "operator", "value")}] * 2,
        },
    }
    composite = {"name": SET_AND_CHECK_TOOL, "arguments": dict(placed["arguments"])}
    return [multi, composite, *actions]


def _play(env: gym.Env, calls: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    env.reset(seed=0, options=OPTIONS)
    played = []
    for call in calls:
        for _ in range(2):  # Refine holds the proposal back; the revision runs
            observation, reward, terminated, truncated, info = env.step(call)
            played.append((observation, float(reward), terminated, truncated, info))
            if terminated or truncated:
                return played
    return played


@pytest.mark.parametrize("kind", ["missing_information", "missing_attachment"])
@pytest.mark.parametrize("domain", DOMAIN_NAMES[:3])
def test_planning_wrappers__behave_the_same_when_observations_are_opaque(domain: str, kind: str) -> None:
    calls = _calls(domain)
    plain = _play(_stack(domain, False, kind), calls)
    opaque = _play(_stack(domain, True, kind), calls)
    assert len(plain) == len(opaque)
    for (text, *rest, info), (opaque_text, *opaque_rest, opaque_info) in zip(plain, opaque, strict=True):
        reply = info[REPLY_INFO]
        assert isinstance(reply, ToolReply)
        assert reply.text == text  # the typed reply is what the agent was shown
        assert rest == opaque_rest
        assert info == opaque_info
        if opaque_text != text:  # passed through from the env below: only the env's own text differs
            assert opaque_text == OPAQUE
    answered_here = [entry for entry, opaque_entry in zip(plain, opaque, strict=True) if entry[0] == opaque_entry[0]]
    assert any(entry[4]["tool"] in ("multi_query", "set_and_check") for entry in answered_here)
    if kind == "missing_information":  # the global check's "valid" was rewritten from the typed reply
        assert any(entry[4][REPLY_INFO].data.get("unverifiable") for entry in opaque)

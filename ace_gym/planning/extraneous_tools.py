"""Distractor tools: plausible, useless tools shuffled in among the real ones (APB's tool-extraneous setting)."""

from __future__ import annotations

import functools
import hashlib
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ace_gym.domains import get_domain
from ace_gym.envs.ace_env import ActionType
from ace_gym.errors import choice, integer, number
from ace_gym.planning import replies
from ace_gym.planning.knowledge import call_key, decode_arguments, split_action
from ace_gym.planning.replies import success
from ace_gym.planning.surface import answered, called_name, episode_rng, record, schema_names
from ace_gym.planning.vocabulary import Distractor, distractor_parameters, draw_distractors, tool_schema
from ace_gym.tools import ToolReply
from ace_gym.tools.readonly import ReadOnlyDict

STYLES = ("related", "unrelated")
BEHAVIOURS = ("inert", "error", "misleading")
MAX_DISTRACTORS = 32
INFO_KEY = "extraneous_tools"
_STREAM_TAG = 0xD157
_TRENDS = ("rising", "stable", "falling")
_CONFIDENCE = ("low", "medium", "high")


@functools.cache
def _distractor_schema(distractor: Distractor) -> ReadOnlyDict:
    """The read-only schema of ``distractor`` (a finite vocabulary: built once per distractor)."""
    return tool_schema(distractor.name, distractor.description, *distractor_parameters(distractor.scope))


class ExtraneousTools(gym.Wrapper[str, ActionType, str, ActionType], gym.utils.RecordConstructorArgs):
    """Add ``n`` distractor tools to the tool list, shuffled in with the real ones.

    ## Tools
    Each episode draws ``n`` names from the domain's vocabulary (:mod:`ace_gym.planning.vocabulary`):
    ``style="related"`` speaks of the domain's items (``forecast_course_popularity``),
    ``"unrelated"`` of anything else (``summarize_news_headlines``). A name never equals,
    contains or is contained in a tool name the env below offers. The whole tool list in
    ``info["tools"]`` is shuffled with the episode's generator; a distractor's schema is read-only,
    built once per distractor and shared by every episode that draws it.

    ## Behaviour of a distractor call
    It never reaches the env below and changes nothing. ``"inert"`` (default): a success with
    plausible numbers drawn from a hash of the episode, the tool and its arguments; ``"error"``: a
    failed ``Unavailable, <name> has no data for this task``; ``"misleading"``: as inert, and a
    tool about one grid cell also "recommends" candidate ids of that cell picked by the hash from
    the sorted candidate list. No output ever depends on which candidate is the truth (our choice:
    recommending decoys, as first proposed, would reveal the truth by elimination).

    ## Reward
    The env's, minus ``penalty`` per distractor call.

    ## Information
    ``info["apb"]["extraneous_tools"]``: at reset ``names`` (in drawn order), ``style``,
    ``behaviour``, ``salt`` (what the outputs' hash starts from); on every step ``calls`` (distractor calls so far) and ``called`` (this step);
    on the last step ``strict_success``: solved (score 1.0) without touching a distractor.

    ## Arguments
    ``n`` (0 to 32; 0 adds none), ``style``, ``behaviour``, ``penalty`` (>= 0). Randomness comes
    from the wrapper's own generator, seeded from the ``reset`` seed.
    """

    def __init__(
        self, env: gym.Env, n: int = 4, style: str = "related", behaviour: str = "inert", penalty: float = 0.0
    ) -> None:
        n = integer("n", n, minimum=0, maximum=MAX_DISTRACTORS)
        style = choice("style", style, STYLES)
        behaviour = choice("behaviour", behaviour, BEHAVIOURS)
        penalty = float(number("penalty", penalty, minimum=0, finite=True))
        gym.utils.RecordConstructorArgs.__init__(self, n=n, style=style, behaviour=behaviour, penalty=penalty)
        gym.Wrapper.__init__(self, env)
        self.n, self.style, self.behaviour, self.penalty = n, style, behaviour, penalty
        self._rng: np.random.Generator | None = None
        self._distractors: dict[str, Distractor] = {}
        self._salt = ""
        self._calls = 0
        self._ended = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        rng = self._rng = episode_rng(seed, _STREAM_TAG, self._rng, info["instance_id"])
        domain = get_domain(info["domain"])
        tools = list(info["tools"])
        drawn = draw_distractors(domain, self.n, self.style, schema_names(tools), rng)
        self._distractors = {d.name: d for d in drawn}
        self._salt = str(int(rng.integers(2**63)))
        tools += [_distractor_schema(d) for d in drawn]
        info["tools"] = [tools[i] for i in rng.permutation(len(tools)).tolist()]
        self._calls = 0
        self._ended = False
        drawn_names = [d.name for d in drawn]
        record(
            info,
            INFO_KEY,
            {"names": drawn_names, "style": self.style, "behaviour": self.behaviour, "salt": self._salt},
        )
        return observation, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        name = called_name(action)
        if not self._ended and name in self._distractors:
            self._calls += 1
            reply = self._answer(self._distractors[name], action)
            info = answered(action, reply)
            record(info, INFO_KEY, {"calls": self._calls, "called": True})
            return reply.text, -self.penalty, False, False, info
        observation, reward, terminated, truncated, info = self.env.step(action)
        record(info, INFO_KEY, {"calls": self._calls, "called": False})
        if (terminated or truncated) and not self._ended:
            self._ended = True
            record(info, INFO_KEY, {"strict_success": info.get("score") == 1.0 and self._calls == 0})
        return observation, reward, terminated, truncated, info

    def _answer(self, distractor: Distractor, action: Any) -> ToolReply:
        if self.behaviour == "error":
            return replies.unavailable(distractor.name)
        arguments = decode_arguments(split_action(action)[1])
        digest = hashlib.blake2b(
            f"{self._salt}|{call_key(distractor.name, arguments or {})}".encode("utf-8", "replace"), digest_size=16
        ).digest()
        draw = np.random.default_rng(list(digest))
        data: dict[str, Any] = {"metric": distractor.name, "value": round(float(draw.random()), 3)}
        data["trend"] = _TRENDS[int(draw.integers(3))]
        data["confidence"] = _CONFIDENCE[int(draw.integers(3))]
        data["sample_size"] = int(draw.integers(20, 2000))
        recommended = self._recommended(distractor, arguments, draw) if self.behaviour == "misleading" else None
        if recommended is not None:
            data["recommended"] = recommended
        return success(data)

    def _recommended(
        self, distractor: Distractor, arguments: dict[Any, Any] | None, draw: np.random.Generator
    ) -> list[str] | None:
        """1-3 candidate ids of the named hidden cell, from its sorted candidate list (never
        from which one is the truth); None for tools not about a hidden cell."""
        if distractor.scope != "cell" or arguments is None:
            return None
        row, col = arguments.get("row"), arguments.get("col")
        if type(row) is not int or type(col) is not int:
            return None
        compiled = self.env.get_wrapper_attr("compiled")
        slot = next((s for s in compiled.slots if (s.row, s.col) == (row, col)), None)
        if slot is None:
            return None
        ordered = sorted(slot.candidate_ids)
        picks = draw.choice(len(ordered), size=min(len(ordered), int(draw.integers(1, 4))), replace=False)
        return [ordered[i] for i in sorted(picks.tolist())]

"""A broken tool and its working replacement (APB's tool-broken setting)."""

from __future__ import annotations

import copy
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ace_gym.domains import get_domain
from ace_gym.envs.ace_env import ActionType
from ace_gym.errors import ConfigError, flag
from ace_gym.planning import replies
from ace_gym.planning.knowledge import decode_arguments, real_tool_kinds, split_action
from ace_gym.planning.settings import APB_INFO
from ace_gym.planning.surface import answered, called_name, episode_rng, record, schema_names
from ace_gym.planning.vocabulary import renamed_parameters, replacement_name
from ace_gym.tools import TOOL_KEYS, ToolReply, tool_name
from ace_gym.tools.readonly import read_only
from ace_gym.tools.replies import invalid

INFO_KEY = "broken_tool"
AUTO_TARGET = "query"
"""The tool kind ``target="auto"`` breaks: the candidate query, which every solution needs."""
CATEGORIES: dict[int, str] = {
    0: "no failure yet",
    1: "called the replacement",
    2: "used another working tool",
    3: "retried the broken tool",
    4: "ended or refused",
    5: "other",
}
"""APB's five categories of the first action after the first failure (0: not classified yet)."""
CORRECT_CATEGORIES = frozenset({1, 2})
_STREAM_TAG = 0xB20C
_ENDING_KINDS = ("done", "refusal")


class BrokenTool(gym.Wrapper[str, ActionType, str, ActionType], gym.utils.RecordConstructorArgs):
    """Break one tool for the whole episode and offer a working replacement under another name.

    ## Tools
    ``target`` ("auto": the candidate query; or a tool kind such as ``"item_attributes"``,
    ``"global_check"``; or a tool's full name) fails on every call with a persistent error,
    ``Service error, <tool> is out of service for the rest of this task and will not recover``
    (worded apart from the transient failures of ``ToolFailureInjection``), and never reaches
    the env. A replacement is in the tool list from the start, at a seeded position: every word
    of the target's name but the domain noun replaced by a synonym (never an affix variant like
    ``_v2``), its parameters renamed, the same description. It answers exactly what the target
    answers for the same arguments (it is the target, called under its original parameter names).
    ``hint=True`` names the replacement in the error.

    ## Classification
    The first action after the first failure is put in one of APB's categories: 1 the
    replacement; 2 another offered tool (not a distractor) that succeeds; 3 the broken tool
    again; 4 ``done`` or the refusal tool; 5 anything else. Categories 1 and 2 are correct. Only
    actions that reach this wrapper count, so stack it outside every wrapper that answers calls
    itself (``ExtraneousTools``, ``UnsolvableMix``), as :mod:`ace_gym.planning.settings` does.

    ## Information
    ``info["apb"]["broken_tool"]``: at reset ``tool``, ``replacement``, ``parameter_map``
    (replacement parameter -> original parameter), ``hint``; on every step ``failures``,
    ``retries`` (calls of the broken tool after its first failure), ``category`` (int, 0 before
    the first failure) and ``category_name``; on the last step ``recovered`` (solved after a failure).
    """

    def __init__(self, env: gym.Env, target: str = "auto", hint: bool = False) -> None:
        if not isinstance(target, str) or not target:
            raise ConfigError("target", target, "must be 'auto', a tool kind or a tool name")
        hint = flag("hint", hint)
        gym.utils.RecordConstructorArgs.__init__(self, target=target, hint=hint)
        gym.Wrapper.__init__(self, env)
        self.target, self.hint = target, hint
        self._rng: np.random.Generator | None = None
        self._broken = ""
        self._replacement = ""
        self._renamed: dict[str, str] = {}
        self._required: list[str] = []
        self._kinds: dict[str, str] = {}
        self._failures = self._retries = self._category = 0
        self._ended = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        rng = self._rng = episode_rng(seed, _STREAM_TAG, self._rng, info["instance_id"])
        domain = get_domain(info["domain"])
        tools = list(info["tools"])
        names = schema_names(tools)
        self._broken = self._target_name(domain.name, names)
        original = tools[names.index(self._broken)]
        self._replacement = replacement_name(self._broken, domain, names, rng)
        parameters = original["function"]["parameters"]
        self._renamed = renamed_parameters(tuple(parameters["properties"]), rng)
        new_name = {old: new for new, old in self._renamed.items()}
        schema = copy.deepcopy(original)
        schema["function"]["name"] = self._replacement
        schema["function"]["parameters"]["properties"] = {
            new_name[p]: spec for p, spec in parameters["properties"].items()
        }
        self._required = [new_name[p] for p in parameters.get("required", [])]
        schema["function"]["parameters"]["required"] = list(self._required)
        tools.insert(int(rng.integers(len(tools) + 1)), read_only(schema))
        info["tools"] = tools
        apb = info.get(APB_INFO, {})
        self._kinds = {
            **dict.fromkeys(apb.get("extraneous_tools", {}).get("names", ()), "distractor"),
            **apb.get("unsolvable", {}).get("tools", {}),
            **real_tool_kinds(domain.name),
        }
        self._failures = self._retries = self._category = 0
        self._ended = False
        record(
            info,
            INFO_KEY,
            {
                "tool": self._broken,
                "replacement": self._replacement,
                "parameter_map": dict(self._renamed),
                "hint": self.hint,
            },
        )
        return observation, info

    def _target_name(self, domain: str, names: list[str]) -> str:
        wanted = AUTO_TARGET if self.target == "auto" else self.target
        found = tool_name(wanted, domain) if wanted in TOOL_KEYS else wanted  # type: ignore[arg-type]
        if found not in names:
            raise ConfigError("target", self.target, f"is no tool this env offers; offered: {', '.join(names)}")
        return found

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._ended:
            return self.env.step(action)
        name = called_name(action)
        classify = self._failures > 0 and self._category == 0
        reward: SupportsFloat
        if name == self._broken:
            self._retries += self._failures > 0
            self._failures += 1
            reply = replies.broken(self._broken, self._replacement if self.hint else None)
            observation, reward, terminated, truncated = reply.text, 0.0, False, False
            info = answered(action, reply)
        elif name == self._replacement:
            translated = self._translated(action)
            if isinstance(translated, ToolReply):  # the replacement's own argument check failed
                observation, reward, terminated, truncated, info = (
                    translated.text,
                    0.0,
                    False,
                    False,
                    answered(action, translated),
                )
            else:
                observation, reward, terminated, truncated, info = self.env.step(translated)
        else:
            observation, reward, terminated, truncated, info = self.env.step(action)
        if classify:
            self._category = self._category_of(name, bool(info.get("ok")))
        record(
            info,
            INFO_KEY,
            {
                "failures": self._failures,
                "retries": self._retries,
                "category": self._category,
                "category_name": CATEGORIES[self._category],
            },
        )
        if terminated or truncated:
            self._ended = True
            record(info, INFO_KEY, {"recovered": self._failures > 0 and info.get("score") == 1.0})
        return observation, reward, terminated, truncated, info

    def _category_of(self, name: str | None, ok: bool) -> int:
        if name == self._replacement:
            return 1
        if name == self._broken:
            return 3
        kind = self._kinds.get(name or "")
        if kind in _ENDING_KINDS:
            return 4
        if kind is not None and kind != "distractor" and ok:
            return 2
        return 5

    def _translated(self, action: Any) -> dict[str, Any] | ToolReply:
        """The replacement call as a call of the broken tool under its original parameter names,
        or the failed reply when a required parameter is missing."""
        arguments = decode_arguments(split_action(action)[1])
        if arguments is None:  # not an object: let the env explain, under the original name
            return {"name": self._broken, "arguments": split_action(action)[1]}
        missing = [p for p in self._required if p not in arguments]
        if missing:
            return invalid(f"missing required argument(s): {', '.join(missing)}")
        return {
            "name": self._broken,
            "arguments": {old: arguments[new] for new, old in self._renamed.items() if new in arguments},
        }

"""Random tool failures, as the published benchmark's ``tool_failure_rate`` injects them (docs/compatibility.md §3.1)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np

from ace_gym.domains.tool_names import TOOL_NAMES, ToolKey, tool_name
from ace_gym.envs.ace_env import ActionType, tool_label
from ace_gym.errors import ConfigError, choice, did_you_mean, integer, probability
from ace_gym.spaces import ToolCall, arguments_json
from ace_gym.tools import REPLY_INFO, ToolReply
from ace_gym.tools.replies import failed_reply, ok_reply

_FAILURE_REPLIES: dict[str, ToolReply] = {
    "failed": failed_reply("Tool call failed"),  # the published envelope
    "timeout": failed_reply("Timeout, the tool did not respond in time"),
    "rate_limit": failed_reply("RateLimitError, too many requests, retry the call later"),
    "empty": ok_reply({})._replace(ok=False),
    "truncated": ToolReply('{"status": "success", "messages": "Successfully executed tool", "data": {"', ok=False),
}
"""The typed reply of each mode, with its envelope's values like every other reply (none for
``"truncated"``, cut on purpose); never ``ok``, whatever its envelope says: the call did not run."""
FAILURE_ENVELOPES: dict[str, str] = {mode: failed.text for mode, failed in _FAILURE_REPLIES.items()}
"""What an injected failure returns, by mode."""
RNG_KINDS = ("numpy", "python")
DRAW_SEEDS = ("episode", "reset_seed")
"""What seeds the draws at a seeded reset: ``"episode"`` the (seed, instance, trial) of the episode,
``"reset_seed"`` the reset seed alone (every episode of a seed fails alike: the published release's
pattern, and ace-gym's draws before issue 40, which records played then replay with)."""
_STREAM_TAG = 0xFA11  # separates this wrapper's stream from the env's own np_random for the same seed


class ToolFailureInjection(gym.Wrapper[str, ActionType, str, ActionType], gym.utils.RecordConstructorArgs):
    """Fail each tool call with probability ``rate`` without running it.

    A failed call returns the envelope of a failure mode drawn from ``failure_modes``
    (:data:`FAILURE_ENVELOPES`): ``"failed"`` (the published ``{"status": "failed", "messages":
    "Tool call failed", "data": {}}``, the default), ``"timeout"`` (a failed ``Timeout`` envelope),
    ``"rate_limit"`` (a failed ``RateLimitError`` envelope asking to retry later), ``"empty"`` (a
    success envelope with empty data) or ``"truncated"`` (a success envelope cut off inside its
    data: not valid JSON). The call never reaches the wrapped env: nothing changes, no budget is
    charged and it does not count toward the env's ``max_steps``; a failed ``done`` does not end
    the episode. ``tool_rates`` gives some tools their own rate, by tool key
    (:data:`~ace_gym.domains.tool_names.TOOL_NAMES`: ``"query"``, ``"set_slot"``, ...); the others fail at
    ``rate``. Wrap the tool-call env (below :class:`ChatAdapter`).

    Randomness: one uniform draw per call (a second one picks the mode when several are given;
    none at all when every rate is 0), from the wrapper's own RNG, re-seeded at every seeded
    ``reset`` and independent of the env's own draws; ``reset`` without a seed continues the
    stream. ``draws="episode"`` (default) seeds it from the episode: the reset seed, the instance
    the env reset to (reset info ``domain``, ``instance_id`` and, for a generated instance,
    ``instance_seed``) and the ``trial`` reset option (an int >= 0, default 0; members of a
    GRPO-style group differ in it), so every episode of a run fails independently and a replay
    fails alike. ``draws="reset_seed"`` seeds it from the reset seed alone: every episode of a
    seed fails at the same calls. ``rng="numpy"`` (default) uses a numpy Generator;
    ``rng="python"`` a private ``random.Random`` failing iff ``random() < rate``, which with
    ``draws="reset_seed"`` reproduces the published release's failure pattern after
    ``random.seed(seed)``.

    Info on every step: ``failure_injected`` (bool), ``failure_mode`` (str or None),
    ``injected_failures`` (count this episode) and ``recovered_failures`` (injected failures
    recovered so far). An injected failure's step also has ``failure_id`` (its number this
    episode, from 1). A failure is *recovered* by the first later call of the same tool with
    equivalent arguments (the same canonical JSON, arguments given as JSON text decoded first)
    that reaches the env and succeeds (its ``ok``); that step's info lists the ids it recovers in
    ``recovers``. :mod:`ace_gym.eval.recovery` turns these into per-failure recovery records.
    """

    def __init__(
        self,
        env: gym.Env[str, ActionType],
        rate: float,
        *,
        failure_modes: Sequence[str] = ("failed",),
        rng: str = "numpy",
        tool_rates: Mapping[str, float] | None = None,
        draws: str = "episode",
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, rate=rate, failure_modes=failure_modes, rng=rng, tool_rates=tool_rates, draws=draws
        )
        rate = probability("rate", rate)
        if tool_rates is not None and not isinstance(tool_rates, Mapping):
            raise ConfigError("tool_rates", tool_rates, "must map tool keys to failure rates")
        rates_by_key = {
            str(key): probability(f"tool_rates[{key!r}]", value) for key, value in (tool_rates or {}).items()
        }
        unknown_tools = [key for key in rates_by_key if key not in TOOL_NAMES]
        if unknown_tools:
            raise ConfigError(
                "tool_rates",
                dict(tool_rates or {}),
                f"unknown tool key {unknown_tools[0]!r}; known: {', '.join(TOOL_NAMES)}"
                f"{did_you_mean(unknown_tools[0], TOOL_NAMES)}",
            )
        modes = tuple(failure_modes) if not isinstance(failure_modes, str) else (failure_modes,)
        unknown = [m for m in modes if m not in FAILURE_ENVELOPES]
        if not modes or unknown:
            raise ConfigError(
                "failure_modes", failure_modes, f"must be a non-empty subset of {list(FAILURE_ENVELOPES)}"
            )
        choice("rng", rng, RNG_KINDS)
        choice("draws", draws, DRAW_SEEDS)
        gym.Wrapper.__init__(self, env)
        self.rate = rate
        self.tool_rates = {cast(ToolKey, key): value for key, value in rates_by_key.items()}  # keys checked above
        self.failure_modes = modes
        self.rng_kind = rng
        self.draw_seed = draws
        self._draws = rate > 0 or any(value > 0 for value in rates_by_key.values())
        self._rates_by_name: dict[str, float] = {}
        self._draw: Any = None
        self._injected = 0
        self._recovered = 0
        self._unrecovered: dict[str, list[int]] = {}  # call key -> ids of its failures not yet recovered

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        trial = integer("options['trial']", (options or {}).get("trial", 0), minimum=0)
        observation, info = self.env.reset(seed=seed, options=options)
        if seed is not None or self._draw is None:
            self._draw = self._seeded_draw(self._episode_seed(seed, trial, info))
        self._injected = self._recovered = 0
        self._unrecovered = {}
        domain = info.get("domain")
        self._rates_by_name = (
            {tool_name(key, domain): value for key, value in self.tool_rates.items()} if domain else {}
        )
        return observation, info

    def _episode_seed(self, seed: int | None, trial: int, info: Mapping[str, Any]) -> int | None:
        """The seed of this episode's draws (class docstring): None unseeded, the reset seed under
        ``draws="reset_seed"``, else one int from the seed, the instance and the trial."""
        if seed is None or self.draw_seed == "reset_seed":
            return seed
        instance = json.dumps([info.get("domain"), info.get("instance_id"), info.get("instance_seed")], default=str)
        words = np.frombuffer(hashlib.sha256(instance.encode()).digest()[:16], dtype=np.uint32)  # ASCII JSON
        entropy = np.random.SeedSequence([int(seed), _STREAM_TAG, *map(int, words), trial])
        return int(entropy.generate_state(1, dtype=np.uint64)[0])

    def _seeded_draw(self, seed: int | None) -> Any:
        """The ``random()`` method of a fresh RNG of the configured kind seeded with ``seed``."""
        if self.rng_kind == "python":
            return random.Random(seed).random
        return (np.random.default_rng() if seed is None else np.random.default_rng([seed, _STREAM_TAG])).random

    def step(self, action: ActionType) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._draw is None:
            return self.env.step(action)  # not reset yet: let the env raise its own ResetNeeded
        name = _call_parts(action)[0]
        if self._draws and self._draw() < self._rate_of(name):
            mode = self.failure_modes[0] if len(self.failure_modes) == 1 else self._pick_mode()
            self._injected += 1
            self._unrecovered.setdefault(_call_key(action), []).append(self._injected)
            info = {
                "tool": tool_label(name),
                "ok": False,
                "failure_injected": True,
                "failure_mode": mode,
                "failure_id": self._injected,
                REPLY_INFO: _FAILURE_REPLIES[mode],
            }
            return FAILURE_ENVELOPES[mode], 0.0, False, False, self._with_stats(info)
        observation, reward, terminated, truncated, info = self.env.step(action)
        info.update(failure_injected=False, failure_mode=None)
        if self._unrecovered and info.get("ok"):
            recovers = self._unrecovered.pop(_call_key(action), None)
            if recovers:
                info["recovers"] = recovers
                self._recovered += len(recovers)
        return observation, reward, terminated, truncated, self._with_stats(info)

    def _rate_of(self, name: Any) -> float:
        return self._rates_by_name.get(name, self.rate) if isinstance(name, str) else self.rate

    def _pick_mode(self) -> str:
        return self.failure_modes[min(int(self._draw() * len(self.failure_modes)), len(self.failure_modes) - 1)]

    def _with_stats(self, info: dict[str, Any]) -> dict[str, Any]:
        info["injected_failures"] = self._injected
        info["recovered_failures"] = self._recovered
        return info


def _call_parts(action: Any) -> tuple[Any, Any]:
    """(tool name, arguments) of an action as sent; (None, action) when it is not shaped like a call."""
    if isinstance(action, ToolCall):
        return action.name, action.arguments
    if isinstance(action, Mapping):
        return action.get("name"), action.get("arguments")
    return None, action


def _call_key(action: Any) -> str:
    """The identity of an action for "same call again" comparisons: canonical JSON of its name and
    arguments (JSON-string arguments decoded first). A str whatever the action, so comparing two
    keys never raises (a numpy array as the name, say)."""
    name, arguments = _call_parts(action)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            pass  # compared as the string the model wrote
    return arguments_json([name, arguments], sort_keys=True)

"""Random tool failures, as the published benchmark's ``tool_failure_rate`` injects them (docs/compatibility.md §3.1)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ace_gym.envs.ace_env import tool_label
from ace_gym.errors import ConfigError, choice, probability
from ace_gym.spaces import ToolCall, arguments_json
from ace_gym.tools import TOOL_CALL_FAILED, failure

#: what an injected failure returns, by mode; "failed" is the published envelope
FAILURE_ENVELOPES: dict[str, str] = {
    "failed": TOOL_CALL_FAILED,
    "timeout": failure("Timeout, the tool did not respond in time"),
    "empty": '{"status": "success", "messages": "Successfully executed tool", "data": {}}',
}
RNG_KINDS = ("numpy", "python")
_STREAM_TAG = 0xFA11  # separates this wrapper's stream from the env's own np_random for the same seed


class ToolFailureInjection(gym.Wrapper):
    """Fail each tool call with probability ``rate`` without running it.

    A failed call returns the envelope of a failure mode drawn from ``failure_modes``:
    ``"failed"`` (the published ``{"status": "failed", "messages": "Tool call failed", "data": {}}``,
    the default), ``"timeout"`` (a failed ``Timeout`` envelope) or ``"empty"`` (a success envelope
    with empty data). The call never reaches the wrapped env: nothing changes, no budget is
    charged and it does not count toward the env's ``max_steps``; a failed ``done`` does not end
    the episode. Wrap the tool-call env (below :class:`ChatAdapter`).

    Randomness: one uniform draw per call (a second one picks the mode when several are given;
    none at all when ``rate`` is 0), from the wrapper's own RNG, re-seeded from the ``reset`` seed
    and independent of the env's instance choice; ``reset`` without a seed continues the stream.
    ``rng="numpy"`` (default) uses a numpy Generator seeded from ``(seed, stream tag)``;
    ``rng="python"`` uses a private ``random.Random(seed)`` and fails iff ``random() < rate``,
    which reproduces the published release's failure pattern after ``random.seed(seed)``.

    Info on every step: ``failure_injected`` (bool), ``failure_mode`` (str or None),
    ``injected_failures`` (count this episode) and ``retried_failed_calls`` (injected failures
    whose very next call was the same tool with the same arguments).
    """

    def __init__(
        self,
        env: gym.Env,
        rate: float,
        *,
        failure_modes: Sequence[str] = ("failed",),
        rng: str = "numpy",
    ) -> None:
        rate = probability("rate", rate)
        modes = tuple(failure_modes) if not isinstance(failure_modes, str) else (failure_modes,)
        unknown = [m for m in modes if m not in FAILURE_ENVELOPES]
        if not modes or unknown:
            raise ConfigError(
                "failure_modes", failure_modes, f"must be a non-empty subset of {list(FAILURE_ENVELOPES)}"
            )
        choice("rng", rng, RNG_KINDS)
        super().__init__(env)
        self.rate = rate
        self.failure_modes = modes
        self.rng_kind = rng
        self._draw: Any = None
        self._injected = 0
        self._retried = 0
        self._failed_call: str | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        if seed is not None or self._draw is None:
            self._draw = self._seeded_draw(seed)
        self._injected = self._retried = 0
        self._failed_call = None
        return observation, info

    def _seeded_draw(self, seed: int | None) -> Any:
        """The ``random()`` method of a fresh RNG of the configured kind."""
        if self.rng_kind == "python":
            return random.Random(seed).random
        return (np.random.default_rng() if seed is None else np.random.default_rng([seed, _STREAM_TAG])).random

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._draw is None:
            return self.env.step(action)  # not reset yet: let the env raise its own ResetNeeded
        if self._failed_call is not None:
            if _call_key(action) == self._failed_call:
                self._retried += 1
            self._failed_call = None
        if self.rate and self._draw() < self.rate:
            mode = self.failure_modes[0] if len(self.failure_modes) == 1 else self._pick_mode()
            self._injected += 1
            self._failed_call = _call_key(action)
            info = {
                "tool": tool_label(_call_parts(action)[0]),
                "ok": False,
                "failure_injected": True,
                "failure_mode": mode,
            }
            return FAILURE_ENVELOPES[mode], 0.0, False, False, self._with_stats(info)
        observation, reward, terminated, truncated, info = self.env.step(action)
        info.update(failure_injected=False, failure_mode=None)
        return observation, reward, terminated, truncated, self._with_stats(info)

    def _pick_mode(self) -> str:
        return self.failure_modes[min(int(self._draw() * len(self.failure_modes)), len(self.failure_modes) - 1)]

    def _with_stats(self, info: dict[str, Any]) -> dict[str, Any]:
        info["injected_failures"] = self._injected
        info["retried_failed_calls"] = self._retried
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

"""openenv-core (``pip install openenv-core``): an ace-gym tool-call env as an OpenEnv
``Environment``, served by openenv-core's own ``create_app`` instead of ``ace-gym serve``.

:class:`AceEnvironment` wraps ``gym.make(env_id, **kwargs)`` (the core env: one tool call per
step). Its action is :class:`ToolCallAction` (``{"name": ..., "arguments": ...}``, the fields the
env reads; a malformed call is answered by the env's error observation, as locally) and its
observation :class:`AceObservation` carries ``ace-gym serve``'s wire format: ``value``, ``info``,
``terminated``, ``truncated`` beside OpenEnv's ``reward`` and ``done``, so a client reads the same
reset and step results from either server (infos without answer keys: :mod:`ace_gym.runs.answer_keys`). :func:`create_openenv_app` builds openenv-core's app
over it. Steps and resets run on the event loop (``step_async``/``reset_async``: an ACE step takes
microseconds, less than a thread hop); ``on_loop=False`` keeps openenv-core's default, each
session's calls in its own one-thread executor.

``ace-gym serve`` stays ace-gym's server: ``benchmarks/bench_server.py --server ace-gym openenv``
measures both under the same load, and docs/server.md ("openenv-core's app") has the numbers.
What openenv-core's app does not offer: several env ids and wrapper stacks per session (``make``),
HTTP sessions, actions other than a tool call (the chat stack's text turns), ``--data-dir``.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

import gymnasium as gym
from fastapi import FastAPI, HTTPException
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
from pydantic import ConfigDict, Field

import ace_gym  # noqa: F401  (registers the ids)
from ace_gym.errors import AceGymError
from ace_gym.runs.answer_keys import client_info
from ace_gym.server.protocol import ERROR_STATUS, reset_result, step_result


class ToolCallAction(Action):
    """One tool call, as the core env's ``step`` takes it. Any JSON object passes validation
    (openenv's ``Action`` forbids extra keys; this one keeps them): the env, not the app, answers
    a wrong, missing or extra key (with an error observation), as ``ace-gym serve`` does."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, arbitrary_types_allowed=True)

    metadata: Any = Field(default_factory=dict)

    def call(self) -> dict[str, Any]:
        """The action as sent, ``metadata`` (openenv's own field) left out."""
        return self.model_dump(exclude={"metadata"}, exclude_unset=True)


class AceObservation(Observation):
    """A reset or step result in ``ace-gym serve``'s wire format (docs/server.md, "Wire format");
    OpenEnv's own ``metadata`` field is never sent (openenv 0.10 would add an empty one)."""

    metadata: dict[str, Any] = Field(default_factory=dict, exclude=True)
    value: Any = None
    info: dict[str, Any] = Field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False


class AceEnvironment(Environment[ToolCallAction, AceObservation, State]):
    """``gym.make(env_id, **kwargs)`` behind OpenEnv's ``Environment`` interface; one per session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str = "ACE-course-v0", **kwargs: Any) -> None:
        super().__init__()
        self.env = gym.make(env_id, disable_env_checker=True, **kwargs)
        self._state = State(episode_id=None, step_count=0)
        self._reset = False  # a step before the first reset is refused as ``ace-gym serve`` refuses it

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> AceObservation:
        """``env.reset(seed=seed, options=options)``; other reset fields are ignored. Options the
        env refuses are an HTTP 422 naming them, as ``ace-gym serve`` answers."""
        try:
            observation, info = self.env.reset(seed=seed, options=options)
        except AceGymError as error:
            raise HTTPException(ERROR_STATUS["VALIDATION_ERROR"], f"reset refused: {str(error)[:500]}") from None
        self._reset = True
        self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        return _observation(reset_result(observation, client_info(info)))

    def step(self, action: ToolCallAction, timeout_s: float | None = None, **kwargs: Any) -> AceObservation:
        """``env.step(action.call())``: the action's keys as sent; before a reset an HTTP 409, as
        ``ace-gym serve`` answers (OpenEnv's HTTP ``/step`` builds a fresh env for every request,
        so episodes are played over the WebSocket ``/ws``)."""
        if not self._reset:
            raise HTTPException(
                ERROR_STATUS["RESET_NEEDED"],
                "call reset before step: HTTP /step runs on a fresh env; play episodes over the WebSocket /ws",
            )
        observation, reward, terminated, truncated, info = self.env.step(action.call())
        result = step_result(observation, reward, terminated, truncated, client_info(info))
        self._state.step_count += 1
        return _observation(result)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self.env.close()


class AceLoopEnvironment(AceEnvironment):
    """:class:`AceEnvironment` whose resets and steps run on the server's event loop."""

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> AceObservation:
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(self, action: ToolCallAction, timeout_s: float | None = None, **kwargs: Any) -> AceObservation:
        return self.step(action)


def _observation(result: dict[str, Any]) -> AceObservation:
    return AceObservation(**result["observation"], reward=result["reward"], done=result["done"])


def create_openenv_app(
    env_id: str = "ACE-course-v0", max_sessions: int = 1024, on_loop: bool = True, **kwargs: Any
) -> FastAPI:
    """openenv-core's app serving ``env_id`` (made with ``kwargs``), up to ``max_sessions``
    WebSocket sessions; its WebSocket is ``/ws``, its HTTP ``/reset`` and ``/step`` build a fresh
    env per request (OpenEnv's HTTP semantics)."""
    environment = AceLoopEnvironment if on_loop else AceEnvironment
    return create_app(
        functools.partial(environment, env_id, **kwargs),
        ToolCallAction,
        AceObservation,
        env_name=env_id,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions),
    )

"""The routes that describe the server and its envs, and touch no session: ``GET /health``,
``GET /envs`` (the served ids), OpenEnv's ``GET /schema`` and ``GET /metadata`` of an env id,
and the play page ``GET /ui`` (``ace-gym serve --ui``)."""

from __future__ import annotations

import functools
import os
from importlib import resources
from typing import Any

import gymnasium as gym
from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from ace_gym.server.context import context_of, json_response
from ace_gym.server.spaces import space_schema
from ace_gym.version import __version__

PLAY_PAGE = resources.files("ace_gym.server") / "ui" / "play.html"
"""The play page ``--ui`` serves: a person plays an env through the same HTTP session routes clients use."""


async def health(request: Request) -> Response:
    """This worker process: its index and pid, the number of workers, its open sessions and cap."""
    context = context_of(request)
    config = context.config
    return json_response(
        {
            "status": "healthy",
            "worker": config.worker,
            "pid": os.getpid(),
            "workers": config.workers,
            "sessions": len(context.store),
            "max_sessions": config.max_sessions,
        }
    )


async def list_envs(request: Request) -> Response:
    """The served ids, and the one the root endpoints serve (None on a server of several ids)."""
    context = context_of(request)
    return json_response({"env_ids": list(context.factory.env_ids), "default": context.default_env_id})


async def schema(request: Request) -> Response:
    """OpenEnv's ``/schema`` of the env id (:func:`env_schemas`, worked out once per id)."""
    context = context_of(request)
    env_id = context.env_id_of(request)
    if env_id not in context.schemas:
        probe = gym.make(env_id, disable_env_checker=True)
        context.schemas[env_id] = env_schemas(probe)
        probe.close()
    return json_response(context.schemas[env_id])


async def metadata(request: Request) -> Response:
    """OpenEnv's ``/metadata`` of the env id."""
    env_id = context_of(request).env_id_of(request)
    entry_point = gym.spec(env_id).entry_point
    return json_response(
        {
            "name": env_id,
            "description": f"ace-gym {env_id} ({entry_point}): ACE grid planning for tool-using LLM agents",
            "version": __version__,
            "readme_content": None,
            "author": None,
            "documentation_url": None,
        }
    )


async def play_page(request: Request) -> Response:
    """The play page (:data:`PLAY_PAGE`)."""
    return HTMLResponse(_play_page_text())


@functools.cache
def _play_page_text() -> str:
    return PLAY_PAGE.read_text(encoding="utf-8")


def env_schemas(env: gym.Env) -> dict[str, Any]:
    """OpenEnv's ``/schema``: JSON schemas of the action, the observation object and the state."""
    observation = {
        "type": "object",
        "properties": {
            "value": space_schema(env.observation_space),
            "info": {"type": "object"},
            "terminated": {"type": "boolean"},
            "truncated": {"type": "boolean"},
        },
        "required": ["value", "info", "terminated", "truncated"],
    }
    state = {
        "type": "object",
        "properties": {
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer", "minimum": 0},
            "session_id": {"type": "string"},
            "env_id": {"type": "string"},
            "make": {"type": "object"},
            "observation_space": {"type": ["object", "null"]},
            "action_space": {"type": ["object", "null"]},
        },
    }
    return {"action": space_schema(env.action_space), "observation": observation, "state": state}

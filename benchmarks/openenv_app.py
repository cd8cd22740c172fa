"""openenv-core's app over an ace-gym env, for ``bench_server.py --server openenv``: a factory for
``uvicorn --factory openenv_app:create_app`` (uvicorn's ``--workers`` needs an import string).
``BENCH_OPENENV_MAX_SESSIONS``: sessions per worker; ``BENCH_OPENENV_ON_LOOP=0``: openenv-core's
default thread-per-session executor instead of steps on the event loop."""

from __future__ import annotations

import os

from fastapi import FastAPI

from ace_gym.integrations.openenv import create_openenv_app


def create_app() -> FastAPI:
    return create_openenv_app(
        max_sessions=int(os.environ.get("BENCH_OPENENV_MAX_SESSIONS", "1024")),
        on_loop=os.environ.get("BENCH_OPENENV_ON_LOOP", "1") != "0",
    )

"""Run the env server for a test: in a thread of the test process, or as ``ace-gym serve``.

Import it after ``pytest.importorskip("fastapi")``: it needs the ``serve`` extra."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from ace_gym.server.app import create_app
from ace_gym.server.config import ServerConfig
from ace_gym.server.runner import uvicorn_options
from ace_gym.tools import REPLY_INFO
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def serving(config: ServerConfig | None = None) -> Iterator[tuple[str, FastAPI]]:
    """A server on a free loopback port in a background thread: yields (base URL, app). The
    uvicorn server is ``app.state.server`` (its ``server_state.tasks``: the requests in flight)."""
    config = config or ServerConfig()
    app = create_app(config)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    listening.listen(1024)
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, **uvicorn_options(config, "warning")))
    app.state.server = server
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listening.close()


@contextlib.contextmanager
def serve_process(*arguments: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``ace-gym serve`` as a child process on a free port: yields (base URL, process)."""
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "ace_gym", "serve", "--port", str(port), "--log-level", "warning", *arguments]
    process = subprocess.Popen(command, cwd=ROOT, env=environment)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ace-gym serve did not start (exit code {process.poll()})")
            time.sleep(0.1)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def as_sent(info: Mapping[str, Any]) -> Any:
    """A local env's step ``info`` as the server sends it: JSON, without the step's typed reply
    (``info["reply"]``, whose text is the observation)."""
    return json.loads(json.dumps({key: value for key, value in info.items() if key != REPLY_INFO}))


def step_as_sent(step: tuple[Any, ...]) -> Any:
    """A local env's ``step`` result as a remote env returns it (see :func:`as_sent`)."""
    *values, info = step
    return [*json.loads(json.dumps(values)), as_sent(info)]

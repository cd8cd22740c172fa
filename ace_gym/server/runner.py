"""Run the env server with uvicorn: one process, or N worker processes sharing one port.

With N > 1 workers the parent binds the listening socket and starts N spawned processes that all
accept on it (as ``uvicorn --workers`` does), but each worker knows its index: session ids carry
it, and each worker also listens on ``<runtime dir>/worker-<i>.sock`` so that an HTTP request
reaching the wrong worker is forwarded to the session's own (see :mod:`ace_gym.server.app`). The
parent restarts a worker that dies after it started serving (its sessions are lost), stops the
server when one dies before, and stops every worker on SIGINT or SIGTERM.
"""

from __future__ import annotations

import dataclasses
import errno
import gc
import logging
import multiprocessing
import shutil
import signal
import socket
import tempfile
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI

from ace_gym.errors import ConfigError, InUseError, integer
from ace_gym.server.app import ServerConfig, create_app, worker_socket
from ace_gym.server.http_protocol import BoundedHttpProtocol

logger = logging.getLogger("uvicorn.error")  # configured by uvicorn, like its own "running on" line


def uvicorn_options(config: ServerConfig, log_level: str) -> dict[str, Any]:
    """uvicorn settings for a worker: HTTP with bounded request heads and a request timeout
    (:class:`~ace_gym.server.http_protocol.BoundedHttpProtocol`), frames capped like bodies, no
    access log (one line per step), the sans-I/O websockets protocol (about a fifth less CPU per frame than the legacy one
    in ``benchmarks/bench_server.py``), and no per-message deflate (frames of a few hundred bytes
    on a local network: zlib on every frame costs more CPU than it saves bandwidth)."""
    http = BoundedHttpProtocol.configured(config.max_header_bytes, config.max_headers, config.request_timeout_s)
    return {
        "http": http,
        "ws": "websockets-sansio",
        "ws_max_size": config.max_body_bytes,
        "ws_per_message_deflate": False,
        "log_level": log_level,
        "access_log": False,
        "lifespan": "on",
    }


def _server_app(config: ServerConfig) -> FastAPI:
    """The app of a server process, with everything built so far moved out of the garbage
    collector's reach (``gc.freeze``): the modules, env registry and app are never garbage, and a
    full collection that walked them stalled every session of the worker for about 30 ms of CPU
    (250 open sessions; about 2 ms once frozen)."""
    app = create_app(config)
    gc.collect()
    gc.freeze()
    return app


def listen(host: str, port: int) -> socket.socket:
    """The listening socket on ``host:port`` (port 0: any free port).

    A port outside 0-65535, a host that is not an address or one that is not this machine's, and a
    port this user may not bind raise ConfigError (exit code 2); a port another process holds
    raises :class:`~ace_gym.errors.InUseError` (exit code 3). Either way one line names the
    address and the reason, and no worker has started.
    """
    port = integer("port", port, minimum=0, maximum=65535)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)  # SO_REUSEADDR on POSIX
    except OSError as error:
        reason = (error.strerror or str(error)).partition(" (while attempting")[0]  # create_server's suffix
        if error.errno == errno.EADDRINUSE:
            raise InUseError(f"cannot listen on {host}:{port}: {reason} (another process holds the port)") from None
        raise ConfigError("host/port", f"{host}:{port}", f"cannot listen there: {reason}") from None


def serve(config: ServerConfig, host: str, port: int, *, log_level: str = "info") -> int:
    """Serve until interrupted; returns the process exit code (1: the server or a worker failed
    to start). The port is bound here, before any worker starts: see :func:`listen`."""
    listening = listen(host, port)
    address = f"http://{host}:{listening.getsockname()[1]}"
    if config.workers == 1:
        server = uvicorn.Server(uvicorn.Config(_server_app(config), **uvicorn_options(config, log_level)))
        logger.info("serving on %s", address)  # after uvicorn.Config, which configures its loggers
        try:
            server.run(sockets=[listening])
        except SystemExit:  # uvicorn's start-up failure: its code (3) would read as "port in use"
            pass
        finally:
            listening.close()
        return 0 if server.started else 1
    uvicorn.Config("ace_gym.server.app:create_app", log_level=log_level)  # configures the parent's log lines
    runtime_dir = tempfile.mkdtemp(prefix="ace-gym-serve-")
    config = dataclasses.replace(config, runtime_dir=runtime_dir)
    context = multiprocessing.get_context("spawn")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}

    def start(worker: int) -> tuple[Any, Any]:
        ready = context.Event()
        process = context.Process(
            target=_run_worker,
            args=(dataclasses.replace(config, worker=worker), listening, log_level, ready),
            name=f"ace-gym-serve-{worker}",
        )
        process.start()
        return process, ready

    workers = [start(worker) for worker in range(config.workers)]
    logger.info("serving on %s with %d worker processes", address, config.workers)
    exit_code = 0
    try:
        while not stop.wait(0.5):
            for worker, (process, ready) in enumerate(workers):
                if process.is_alive():
                    continue
                if not ready.is_set():  # it never served: restarting would fail the same way
                    logger.error("worker %d exited at start (code %s): stopping", worker, process.exitcode)
                    stop.set()
                    exit_code = 1
                    break
                logger.warning("worker %d exited (code %s): restarting it", worker, process.exitcode)
                workers[worker] = start(worker)
    finally:
        for process, _ in workers:
            process.terminate()
        for process, _ in workers:
            process.join(timeout=10)
        listening.close()
        shutil.rmtree(runtime_dir, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return exit_code


class _Server(uvicorn.Server):
    """A uvicorn server that sets ``ready`` once it has started serving."""

    def __init__(self, config: uvicorn.Config, ready: Any) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            self.ready.set()


def _run_worker(config: ServerConfig, listening: socket.socket, log_level: str, ready: Any) -> None:
    """A worker process: the shared listening socket plus this worker's own Unix socket; sets
    ``ready`` once it serves (a worker that dies before that stops the server)."""
    if config.runtime_dir is None:
        raise ConfigError("runtime_dir", None, "a worker needs its socket folder")
    path = worker_socket(config.runtime_dir, config.worker)
    path.unlink(missing_ok=True)  # left by a predecessor that died
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own.bind(str(path))
    own.listen(128)
    server = _Server(uvicorn.Config(_server_app(config), **uvicorn_options(config, log_level)), ready)
    server.run(sockets=[listening, own])

"""Run the env server with uvicorn: one process, or N worker processes sharing one port.

With N > 1 workers the parent binds the listening socket and starts N spawned processes that all
accept on it (as ``uvicorn --workers`` does), but each worker knows its index: session ids carry
it, and each worker also listens on ``<runtime dir>/worker-<i>.sock`` so that an HTTP request
reaching the wrong worker is forwarded to the session's own (see :mod:`ace_gym.server.forwarding`). The
parent restarts a worker that dies after it started serving (its sessions are lost), stops the
server when one dies before, and stops every worker on SIGINT or SIGTERM.
"""

from __future__ import annotations

import dataclasses
import errno
import gc
import logging
import logging.config
import multiprocessing
import shutil
import signal
import socket
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.config import LOGGING_CONFIG

from ace_gym.errors import AceGymError, ConfigError, InUseError, ServerStartError, integer, one_line
from ace_gym.server.app import create_app
from ace_gym.server.config import ServerConfig
from ace_gym.server.forwarding import worker_socket
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
    """Serve until interrupted (SIGINT or SIGTERM); returns the process exit code, 0.

    The port is bound here, before any worker starts: see :func:`listen`. A server, or a worker,
    that fails before it serves raises :class:`~ace_gym.errors.ServerStartError`, one line naming
    the cause (exit code 1); the listening socket, the workers' socket folder and the signal
    handlers are released however serving ends."""
    _configure_logging(log_level)
    listening = listen(host, port)
    address = f"http://{host}:{listening.getsockname()[1]}"
    try:
        if config.workers == 1:
            _serve_in_this_process(config, listening, address, log_level)
        else:
            _serve_with_workers(config, listening, address, log_level)
    finally:
        listening.close()
    return 0


def _configure_logging(log_level: str) -> None:
    """uvicorn's loggers, as ``uvicorn.Config`` sets them up in a server process: this process's
    own lines ("serving on ...", a worker's exit) read like uvicorn's."""
    logging.config.dictConfig(LOGGING_CONFIG)
    logger.setLevel(log_level.upper())


def _serve_in_this_process(config: ServerConfig, listening: socket.socket, address: str, log_level: str) -> None:
    server: _Server | None = None
    try:
        server = _Server(uvicorn.Config(_server_app(config), **uvicorn_options(config, log_level)))
        logger.info("serving on %s", address)
        server.run(sockets=[listening])
    except AceGymError:
        raise
    except (Exception, SystemExit) as error:
        if server is not None and server.started:
            raise
        logger.debug("the server failed while starting", exc_info=True)
        raise ServerStartError(f"the server failed while starting: {_cause(error)}") from error


def _serve_with_workers(config: ServerConfig, listening: socket.socket, address: str, log_level: str) -> None:
    """Start ``config.workers`` processes on ``listening`` and watch them until SIGINT or SIGTERM:
    one that dies after it served is restarted, one that dies before stops them all (raising
    ServerStartError with its cause)."""
    context = multiprocessing.get_context("spawn")
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    runtime_dir: str | None = None
    workers: dict[int, tuple[SpawnProcess, Connection]] = {}
    failure = ""
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
        runtime_dir = tempfile.mkdtemp(prefix="ace-gym-serve-")
        config = dataclasses.replace(config, runtime_dir=runtime_dir)
        for worker in range(config.workers):
            workers[worker] = _start_worker(context, config, worker, listening, log_level)
        logger.info("serving on %s with %d worker processes", address, config.workers)
        while not failure and not stop.wait(0.5):
            for worker, (process, report) in workers.items():
                if process.is_alive():
                    continue
                cause = _start_failure(process, report)
                report.close()
                if cause is not None:  # it never served: restarting would fail the same way
                    failure = f"worker {worker} failed while starting: {cause}"
                    break
                logger.warning("worker %d exited (code %s): restarting it", worker, process.exitcode)
                workers[worker] = _start_worker(context, config, worker, listening, log_level)
    finally:
        for process, _ in workers.values():
            process.terminate()
        for process, report in workers.values():
            process.join(timeout=10)
            report.close()
        if runtime_dir is not None:
            shutil.rmtree(runtime_dir, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failure:
        raise ServerStartError(failure)


def _start_worker(
    context: SpawnContext, config: ServerConfig, worker: int, listening: socket.socket, log_level: str
) -> tuple[SpawnProcess, Connection]:
    """Worker ``worker`` started, with the end of the pipe on which it reports (see
    :func:`_run_worker`); a process that cannot be started raises ServerStartError."""
    report, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_run_worker,
        args=(dataclasses.replace(config, worker=worker), listening, log_level, sender),
        name=f"ace-gym-serve-{worker}",
    )
    try:
        process.start()
    except Exception as error:
        report.close()
        raise ServerStartError(f"worker {worker} could not be started: {_cause(error)}") from error
    finally:
        sender.close()  # the worker holds its own copy
    return process, report


def _start_failure(process: SpawnProcess, report: Connection) -> str | None:
    """Why the dead worker ``process`` failed while starting, or None when it had served."""
    if report.poll(0):
        try:
            message: str | None = report.recv()
            return message
        except EOFError:  # it exited without a word: killed, or failed before it could report
            pass
    return f"it exited with code {process.exitcode} before it served"


def _cause(error: BaseException) -> str:
    """What made a start fail, in one line."""
    if isinstance(error, SystemExit):  # uvicorn's exit when the app's start-up fails, after logging why
        return "the app's start-up (lifespan) failed; uvicorn logged why above"
    return one_line(f"{type(error).__name__}: {error}")


class _Server(uvicorn.Server):
    """A uvicorn server that sends None on ``report`` (when given) once it has started serving."""

    def __init__(self, config: uvicorn.Config, report: Connection | None = None) -> None:
        super().__init__(config)
        self.report = report

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.report is not None and not self.should_exit:
            self.report.send(None)


def _run_worker(config: ServerConfig, listening: socket.socket, log_level: str, report: Connection) -> None:
    """A worker process: the shared listening socket plus this worker's own Unix socket. It sends
    None on ``report`` once it serves, or the cause (one line) when it fails before, and exits 1
    (the parent then stops the server with that cause; ``--log-level debug`` logs the traceback)."""
    _configure_logging(log_level)  # a spawned process starts without: the debug traceback below needs it
    server: _Server | None = None
    try:
        if config.runtime_dir is None:
            raise ConfigError("runtime_dir", None, "a worker needs its socket folder")
        path = worker_socket(config.runtime_dir, config.worker)
        path.unlink(missing_ok=True)  # left by a predecessor that died
        own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            own.bind(str(path))
        except OSError as error:
            raise OSError(f"cannot listen on {path}: {error.strerror or error}") from None
        own.listen(128)
        server = _Server(uvicorn.Config(_server_app(config), **uvicorn_options(config, log_level)), report)
        server.run(sockets=[listening, own])
    except (Exception, SystemExit) as error:
        if server is not None and server.started:
            raise
        logger.debug("worker %d failed while starting", config.worker, exc_info=True)
        report.send(_cause(error))
        sys.exit(1)

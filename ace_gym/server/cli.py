"""``ace-gym serve``: serve ace-gym envs over the OpenEnv HTTP/WebSocket protocol."""

from __future__ import annotations

import argparse
from typing import Any

from ace_gym.errors import ConfigError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve envs over HTTP and WebSocket (OpenEnv protocol)",
        description="Serve every ace-gym env id (or those given with --env) over the OpenEnv protocol: "
        "HTTP reset/step/state/health/schema and a WebSocket session endpoint at /envs/<env id>/..., "
        "one env per session. See docs/server.md. Needs pip install '.[serve]' in an ace-gym checkout.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on, 0-65535 (0: any free port)")
    parser.add_argument("--env", nargs="+", default=None, metavar="ENV_ID", help="served ids (default: all)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes sharing the port")
    parser.add_argument("--max-sessions", type=int, default=1024, help="open sessions per worker process")
    parser.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed")
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20, help="largest request body or frame")
    parser.add_argument("--max-header-bytes", type=int, default=64 << 10, help="largest HTTP request head (431 beyond)")
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        help="seconds within which an HTTP request must arrive whole (408 or closed beyond)",
    )
    parser.add_argument(
        "--data-dir", action="append", default=[], help="folder whose dataset files clients may name (repeatable)"
    )
    parser.add_argument(
        "--ui", action="store_true", help="serve a play page at /ui: a person plays an env through the session routes"
    )
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ace_gym.server.config import ServerConfig
        from ace_gym.server.factory import EnvFactory
        from ace_gym.server.runner import serve
    except ImportError as error:
        raise ConfigError(
            "serve", str(error), "needs the server stack: pip install '.[serve]' in an ace-gym checkout"
        ) from None
    config = ServerConfig(
        env_ids=tuple(args.env or ()),
        data_dirs=tuple(args.data_dir),
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout,
        max_body_bytes=args.max_body_bytes,
        max_header_bytes=args.max_header_bytes,
        request_timeout_s=args.request_timeout,
        workers=args.workers,
        ui=args.ui,
    )
    EnvFactory(config.env_ids, config.data_dirs)  # refuse unknown env ids or data dirs before binding the port
    # serve() validates --host/--port and binds before any worker starts: a bad one is one line,
    # exit 2, a port in use exit 3, for any number of workers
    return serve(config, args.host, args.port, log_level=args.log_level)

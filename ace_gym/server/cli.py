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
        "one env per session. See docs/server.md. Needs pip install 'ace-gym[serve]'.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--env", nargs="+", default=None, metavar="ENV_ID", help="served ids (default: all)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes sharing the port")
    parser.add_argument("--max-sessions", type=int, default=1024, help="open sessions per worker process")
    parser.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed")
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20, help="largest request body or frame")
    parser.add_argument(
        "--data-dir", action="append", default=[], help="folder whose dataset files clients may name (repeatable)"
    )
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ace_gym.server.app import ServerConfig
        from ace_gym.server.factory import EnvFactory
        from ace_gym.server.runner import serve
    except ImportError as error:
        raise ConfigError("serve", str(error), "needs the server stack: pip install 'ace-gym[serve]'") from None
    config = ServerConfig(
        env_ids=tuple(args.env or ()),
        data_dirs=tuple(args.data_dir),
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout,
        max_body_bytes=args.max_body_bytes,
        workers=args.workers,
    )
    EnvFactory(config.env_ids, config.data_dirs)  # refuse unknown env ids or data dirs before binding the port
    return serve(config, args.host, args.port, log_level=args.log_level)

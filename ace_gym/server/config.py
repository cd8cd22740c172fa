"""The settings of one server process (:class:`ServerConfig`), checked when built."""

from __future__ import annotations

from dataclasses import dataclass

from ace_gym.errors import integer, number


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one server process.

    ``env_ids``: the served ids (empty: every ace-gym id); ``data_dirs``: folders whose dataset
    files clients may name; ``max_sessions``: open sessions per worker process;
    ``idle_timeout_s``: a session untouched this long is closed; ``max_body_bytes``: the largest
    HTTP body or WebSocket frame; ``max_header_bytes`` / ``max_headers``: the largest HTTP request
    head and its most headers (431 beyond); ``request_timeout_s``: a request must arrive whole
    within this many seconds (see :mod:`ace_gym.server.http_protocol`); ``worker`` / ``workers`` / ``runtime_dir``: this process's index,
    the number of worker processes and the folder of their Unix sockets, set by
    :func:`ace_gym.server.runner.serve` (without a folder, requests are never forwarded);
    ``ui``: serve the play page at ``GET /ui`` (:data:`ace_gym.server.info_routes.PLAY_PAGE`).
    """

    env_ids: tuple[str, ...] = ()
    data_dirs: tuple[str, ...] = ()
    max_sessions: int = 1024
    idle_timeout_s: float = 600.0
    max_body_bytes: int = 1 << 20
    max_header_bytes: int = 64 << 10
    max_headers: int = 100
    request_timeout_s: float = 30.0
    worker: int = 0
    workers: int = 1
    runtime_dir: str | None = None
    ui: bool = False

    def __post_init__(self) -> None:
        set_field = object.__setattr__
        set_field(self, "max_sessions", integer("max_sessions", self.max_sessions, minimum=1))
        set_field(self, "idle_timeout_s", number("idle_timeout_s", self.idle_timeout_s, above=0, note="(seconds)"))
        set_field(self, "max_body_bytes", integer("max_body_bytes", self.max_body_bytes, minimum=1024))
        set_field(self, "max_header_bytes", integer("max_header_bytes", self.max_header_bytes, minimum=1024))
        set_field(self, "max_headers", integer("max_headers", self.max_headers, minimum=8))
        set_field(
            self, "request_timeout_s", number("request_timeout_s", self.request_timeout_s, above=0, note="(seconds)")
        )
        set_field(self, "workers", integer("workers", self.workers, minimum=1))
        set_field(self, "worker", integer("worker", self.worker, minimum=0, maximum=self.workers - 1))

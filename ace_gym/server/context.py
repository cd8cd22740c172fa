"""What every route of the server shares: the objects of the server process
(:class:`ServerContext`, one per app, ``request.app.state.context``) and the first steps of an
HTTP request (the env id its URL names, its JSON body, forwarding it to its session's worker)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ace_gym.server.config import ServerConfig
from ace_gym.server.factory import EnvFactory
from ace_gym.server.forwarding import Forwarder
from ace_gym.server.mcp import ToolProbes
from ace_gym.server.protocol import ProtocolError, decode, dumps
from ace_gym.server.sessions import SessionStore


def json_response(payload: Any, status: int = 200) -> Response:
    """``payload`` as a JSON response (the protocol's encoder)."""
    return Response(dumps(payload), status_code=status, media_type="application/json")


@dataclass
class ServerContext:
    """The objects of one server process, built once from its ``config`` (:meth:`build`):
    the env ``factory``, the ``store`` of open sessions, the ``probes`` that answer ``list_tools``
    before a reset, the ``forwarder`` to other workers (None with one worker or no socket
    folder), the ``default_env_id`` the root endpoints serve (None on a server of several ids)
    and the ``schemas`` answered so far, by env id."""

    config: ServerConfig
    factory: EnvFactory
    store: SessionStore
    probes: ToolProbes
    forwarder: Forwarder | None
    default_env_id: str | None
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def build(cls, config: ServerConfig) -> ServerContext:
        factory = EnvFactory(config.env_ids, config.data_dirs)
        runtime_dir = config.runtime_dir if config.workers > 1 else None  # one worker never forwards
        return cls(
            config=config,
            factory=factory,
            store=SessionStore(config.max_sessions, config.idle_timeout_s, config.worker),
            probes=ToolProbes(factory),  # one probe per stack, a bounded number at once
            forwarder=Forwarder(runtime_dir, config.worker, config.workers) if runtime_dir else None,
            default_env_id=factory.env_ids[0] if len(factory.env_ids) == 1 else None,
        )

    def env_id_of(self, request: Request) -> str:
        """The served env id the request's URL names (the default one at the root)."""
        env_id = request.path_params.get("env_id", self.default_env_id)
        if env_id is None:
            raise self.env_id_required(request.url.path)
        self.factory.check_env_id(env_id)
        return str(env_id)

    def env_id_required(self, path: str) -> ProtocolError:
        """The answer of a root endpoint on a server of several ids: name the id in the URL."""
        ids = self.factory.env_ids
        shown = ", ".join(ids[:5]) + (f", ... ({len(ids)} in all; GET /envs lists them)" if len(ids) > 5 else "")
        return ProtocolError(
            "ENV_ID_REQUIRED",
            f"this server serves several env ids; name one in the URL: /envs/<env id>{path} ({shown})",
            env_ids=list(ids),
        )

    async def read_json(self, request: Request, *, empty: Any = None) -> tuple[bytes, Any]:
        """The body (at most ``max_body_bytes``) and its JSON value, an object; ``empty`` for an
        empty body (when given)."""
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ProtocolError("PAYLOAD_TOO_LARGE", f"the body exceeds {limit} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ProtocolError("PAYLOAD_TOO_LARGE", f"the body exceeds {limit} bytes")
        if not body and empty is not None:
            return b"", empty
        value = decode(bytes(body))
        if not isinstance(value, dict):
            raise ProtocolError("VALIDATION_ERROR", f"the body must be a JSON object, got {type(value).__name__}")
        return bytes(body), value

    async def forwarded(self, request: Request, session_id: Any, body: bytes) -> Response | None:
        """The answer of the worker holding session ``session_id`` when that is another worker
        process, else None (this worker serves the request)."""
        if self.forwarder is None:
            return None
        worker = self.forwarder.worker_holding(request, session_id)
        return None if worker is None else await self.forwarder.forward(worker, request, body)


def context_of(request: Request) -> ServerContext:
    """The :class:`ServerContext` of the app serving ``request``."""
    context: ServerContext = request.app.state.context
    return context

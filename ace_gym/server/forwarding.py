"""Forwarding between worker processes: with several workers, an HTTP request that reaches a
worker other than its session's is sent on to the session's worker over that worker's Unix
socket (:mod:`ace_gym.server.runner` starts the workers and their sockets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ace_gym.server.protocol import ProtocolError
from ace_gym.server.sessions import worker_of

FORWARDED_HEADER = "x-ace-gym-forwarded"
"""Set on a request one worker forwards to another: the receiver serves it, never forwards it."""


def worker_socket(runtime_dir: str | Path, worker: int) -> Path:
    """The Unix socket on which worker ``worker`` takes forwarded requests."""
    return Path(runtime_dir) / f"worker-{worker}.sock"


class Forwarder:
    """Sends an HTTP request to the worker that holds its session, over that worker's Unix socket:
    worker ``worker`` of ``workers``, whose sockets are in ``runtime_dir``."""

    def __init__(self, runtime_dir: str, worker: int, workers: int) -> None:
        self.runtime_dir, self.worker, self.workers = runtime_dir, worker, workers
        self._clients: dict[int, Any] = {}

    def worker_holding(self, request: Request, session_id: Any) -> int | None:
        """The worker to forward ``request`` to when ``session_id`` lives in another worker
        process, else None (this worker's session, no session id, or a request forwarded already)."""
        if not isinstance(session_id, str) or FORWARDED_HEADER in request.headers:
            return None
        worker = worker_of(session_id)
        return worker if worker is not None and worker != self.worker and worker < self.workers else None

    async def forward(self, worker: int, request: Request, body: bytes) -> Response:
        """``request`` (with its ``body``) as worker ``worker`` answers it; ProtocolError
        UNKNOWN_SESSION when that worker is gone."""
        import httpx  # only multi-worker servers forward

        client = self._clients.get(worker)
        if client is None:
            transport = httpx.AsyncHTTPTransport(uds=str(worker_socket(self.runtime_dir, worker)))
            client = self._clients[worker] = httpx.AsyncClient(transport=transport, base_url="http://worker")
        try:
            reply = await client.request(
                request.method,
                request.url.path,
                params=request.query_params,
                content=body,
                headers={"content-type": "application/json", FORWARDED_HEADER: "1"},
            )
        except httpx.TransportError:
            raise ProtocolError("UNKNOWN_SESSION", f"the worker holding this session ({worker}) is gone") from None
        return Response(reply.content, status_code=reply.status_code, media_type="application/json")

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()

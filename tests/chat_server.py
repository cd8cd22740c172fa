"""An in-test OpenAI-compatible chat-completions server (127.0.0.1, ephemeral port) and its replies.

It speaks the subset of the protocol the OpenAI engine uses (POST /v1/chat/completions with
messages and tools; a response with ``choices[0].message`` content, tool_calls, reasoning_content,
``finish_reason`` and ``usage``) and answers from a per-test function, so retries, concurrency,
tool calls and unavailable endpoints are checked deterministically with the real ``openai`` client.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class RawBody:
    """A reply body sent byte for byte (a malformed one: HTML, truncated JSON, invalid UTF-8)."""

    data: bytes
    content_type: str = "application/json"


Reply = tuple[int, dict[str, Any] | RawBody]


class ChatServer:
    """A threaded HTTP server; ``answer(request_body) -> (status, json_body)`` decides every reply."""

    def __init__(
        self, answer: Callable[[dict[str, Any]], Reply], delay_s: float = 0.0, *, listening: bool = True
    ) -> None:
        self.answer = answer
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append({"path": self.path, **body})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                time.sleep(server.delay_s)
                status, payload = server.answer(body)
                with server._lock:
                    server.in_flight -= 1
                raw = payload if isinstance(payload, RawBody) else RawBody(json.dumps(payload).encode())
                data = raw.data
                self.send_response(status)
                self.send_header("Content-Type", raw.content_type)
                self.send_header("Content-Length", str(len(data)))
                if status >= 400:  # the openai client's retries honour it: no half-second waits in tests
                    self.send_header("retry-after-ms", "5")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.httpd.server_bind()  # the port is ours from here on: a refused connection until listen()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        if listening:
            self.listen()

    def listen(self) -> None:
        """Start accepting connections (a server made with ``listening=False`` refuses them until then)."""
        self.httpd.server_activate()
        self._thread.start()

    def close(self) -> None:
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()


def chat_response(
    content: str | None = "", tool_calls: list[dict[str, Any]] | None = None, reasoning: str | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "tiny",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107},
    }


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_x") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def error(status: int) -> Reply:
    return status, {"error": {"message": f"status {status}", "type": "test", "code": status}}

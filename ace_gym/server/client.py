"""``RemoteEnv``: an env served by ``ace-gym serve``, driven through the Gymnasium API."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import gymnasium as gym
from gymnasium.error import ResetNeeded

from ace_gym.errors import AceGymError, ConfigError, flag
from ace_gym.runs.answer_keys import GRADER
from ace_gym.server.protocol import dumps, frame
from ace_gym.server.spaces import space_from_description
from ace_gym.spaces import ToolCall
from ace_gym.stacks import StackSpec

WrapperArgument = tuple[str, Mapping[str, Any]] | Mapping[str, Any]
"""A wrapper of the served stack: ``("ChatAdapter", {})`` or ``{"name": "ChatAdapter", "kwargs": {}}``."""


class RemoteEnvError(AceGymError):
    """The server refused a request: ``code`` is the protocol's error code (see ``docs/server.md``)."""

    def __init__(self, code: str, message: str) -> None:
        self.code, self.message = code, message
        super().__init__(f"{code}: {message}")


class RemoteEnv(gym.Env[Any, Any]):
    """The env ``gym.make(env_id, **kwargs)`` wrapped in ``wrappers``, running in an ace-gym server.

    One WebSocket connection is one server session, opened here and closed by :meth:`close`.
    ``reset``, ``step`` and the spaces behave as the local env's (observations and infos arrive as
    JSON: tuples become lists). A malformed action comes back as the env's error observation,
    also one JSON cannot hold (a container inside itself, an integer too long to print: sent as a
    string naming it, see :func:`ace_gym.server.protocol.dumps`), and the session goes on;
    refused requests raise :class:`RemoteEnvError` (``RESET_NEEDED`` raises Gymnasium's
    ``ResetNeeded``), and a connection failure raises :class:`RemoteEnvError` with code
    ``CONNECTION``. ``wrappers`` name entries of the wrapper registry (:mod:`ace_gym.stacks`, by
    name or class name), innermost first; ``kwargs`` and wrapper arguments must be plain JSON
    values. :meth:`from_stack` plays a :class:`~ace_gym.stacks.StackSpec` (sent as its JSON). ``timeout_s`` bounds the
    wait for each answer (a procedural reset may generate for a while). Infos come without answer
    keys (:mod:`ace_gym.runs.answer_keys`) unless ``grader`` asks for the grader channel.
    """

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        wrappers: Sequence[WrapperArgument] = (),
        timeout_s: float = 300.0,
        max_message_bytes: int = 1 << 26,
        stack: StackSpec | None = None,
        grader: bool = False,
        **kwargs: Any,
    ) -> None:
        try:
            from websockets.sync.client import connect
        except ImportError as error:
            raise ConfigError(
                "url", url, f"RemoteEnv needs websockets ({error}): pip install '.[serve]' in an ace-gym checkout"
            ) from None
        self.url, self.env_id, self.timeout_s = url.rstrip("/"), env_id, timeout_s
        endpoint = f"{_websocket_base(self.url)}/envs/{quote(env_id, safe='')}/ws"
        self._exit_stack = contextlib.ExitStack()  # websockets wants its connection used as a context
        try:
            self._connection = self._exit_stack.enter_context(
                connect(endpoint, open_timeout=timeout_s, max_size=max_message_bytes, compression=None)
            )
        except Exception as error:  # refused, unreachable, not a WebSocket server, bad URL
            raise RemoteEnvError("CONNECTION", f"cannot open a session at {endpoint}: {error}") from None
        self._open = True
        try:
            request = (
                stack.to_dict()
                if stack is not None
                else {"kwargs": kwargs, "wrappers": [_wrapper(w) for w in wrappers]}
            )
            if flag("grader", grader):
                request["channels"] = [GRADER]
            state = self._call("make", request)
        except BaseException:
            self.close()
            raise
        self.session_id: str = state["session_id"]
        self.observation_space = space_from_description(state["observation_space"])
        self.action_space = space_from_description(state["action_space"])

    @classmethod
    def from_stack(cls, url: str, stack: StackSpec, **options: Any) -> RemoteEnv:
        """The env ``stack`` builds, running in the server at ``url`` (``options``: ``timeout_s``,
        ``max_message_bytes``, ``grader``)."""
        return cls(url, stack.env_id, stack=stack, **options)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        data: dict[str, Any] = {}
        if seed is not None:
            data["seed"] = seed
        if options is not None:
            data["options"] = options
        result = self._call("reset", data)["observation"]
        return result["value"], result["info"]

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if isinstance(action, ToolCall):
            action = {"name": action.name, "arguments": action.arguments}
        result = self._call("step", action)
        observation = result["observation"]
        return (
            observation["value"],
            result["reward"],
            observation["terminated"],
            observation["truncated"],
            observation["info"],
        )

    def state(self) -> dict[str, Any]:
        """The server's view of the session: ``episode_id``, ``step_count``, ``make``, spaces."""
        return self._call("state", {})

    def close(self) -> None:
        """Close the session on the server and the connection (idempotent)."""
        if getattr(self, "_open", False):
            self._open = False
            with contextlib.suppress(Exception):  # already gone: closing is best effort
                self._connection.send(dumps({"type": "close"}))
            with contextlib.suppress(Exception):
                self._exit_stack.close()

    def _call(self, kind: str, data: Any) -> Any:
        if not self._open:
            raise RemoteEnvError("CONNECTION", "the session is closed")
        text = dumps(frame(kind, data))  # never raises: what JSON cannot hold is sent as a string naming it
        try:
            self._connection.send(text)
        except Exception as error:  # closed by the server: its last frame (why it closed) may still be unread
            try:
                reply = json.loads(self._connection.recv(timeout=0))
            except Exception:
                raise RemoteEnvError("CONNECTION", f"{kind} failed: {type(error).__name__}: {error}") from None
        else:
            try:
                reply = json.loads(self._connection.recv(timeout=self.timeout_s))
            except Exception as error:  # timeouts, websockets' ConnectionClosed, a reply that is not JSON
                raise RemoteEnvError("CONNECTION", f"{kind} failed: {type(error).__name__}: {error}") from None
        if reply.get("type") == "error":
            error_data = reply.get("data", {})
            code, message = str(error_data.get("code")), str(error_data.get("message"))
            if code == "RESET_NEEDED":
                raise ResetNeeded(message)
            raise RemoteEnvError(code, message)
        return reply["data"]


def _websocket_base(url: str) -> str:
    """``http(s)://`` -> ``ws(s)://``; a URL without a scheme is taken as ``ws://``."""
    for http_scheme, ws_scheme in (("http://", "ws://"), ("https://", "wss://")):
        if url.startswith(http_scheme):
            return ws_scheme + url[len(http_scheme) :]
    return url if url.startswith(("ws://", "wss://")) else f"ws://{url}"


def _wrapper(wrapper: WrapperArgument) -> dict[str, Any]:
    if isinstance(wrapper, Mapping):
        return {"name": wrapper.get("name"), "kwargs": dict(wrapper.get("kwargs", {}))}
    name, kwargs = wrapper
    return {"name": name, "kwargs": dict(kwargs)}


def wait_until_ready(url: str, timeout_s: float = 60.0) -> None:
    """Return once the server at ``url`` answers ``GET /health``; RemoteEnvError CONNECTION after
    ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=5) as reply:
                if reply.status == 200:
                    return
        except (OSError, urllib.error.URLError):  # not listening yet
            pass
        if time.monotonic() > deadline:
            raise RemoteEnvError("CONNECTION", f"no server answered at {url} within {timeout_s} s")
        time.sleep(0.1)

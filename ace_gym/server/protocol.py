"""The env server's wire format: OpenEnv's messages around Gymnasium's step results.

Everything on the wire is JSON. A step or reset result is OpenEnv's ``{"observation", "reward",
"done"}``, where ``observation`` is ace-gym's observation object ``{"value": <the Gymnasium
observation>, "info": {...}, "terminated": bool, "truncated": bool}`` and ``done`` is
``terminated or truncated`` (``reward`` is null after a reset). WebSocket frames are OpenEnv's
``{"type": ..., "data": ...}``: the client sends ``reset`` / ``step`` / ``state`` / ``close`` (and
ace-gym's ``make``), the server answers ``observation`` / ``state`` / ``error``. An error, on either
transport, carries a code from :data:`ERROR_STATUS` and a message. Requests are decoded with
JSON parsers only (the standard library's, and orjson's where it reads the same value):
nothing a client sends is unpickled or evaluated.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from ace_gym.text import MAX_JSON_DEPTH
from ace_gym.tools.replies import REPLY_INFO, safe_repr

orjson: ModuleType | None  # None: a client without the serve extra encodes with the standard library alone
try:
    import orjson
except ImportError:
    orjson = None

ERROR_STATUS: dict[str, int] = {
    "INVALID_JSON": 400,  # the body or frame is not JSON
    "UNKNOWN_TYPE": 400,  # a frame whose "type" is not a message type
    "VALIDATION_ERROR": 422,  # JSON of the wrong shape, or values the env refuses (reset options)
    "FACTORY_ERROR": 422,  # the env or a wrapper refused its make arguments
    "UNKNOWN_ENV": 404,  # an env id this server does not serve
    "ENV_ID_REQUIRED": 404,  # a root endpoint of a server of several ids: the URL must name one
    "UNKNOWN_SESSION": 404,  # no such session (never opened, closed, or evicted)
    "RESET_NEEDED": 409,  # step before the session's first reset
    "PAYLOAD_TOO_LARGE": 413,
    "CAPACITY_REACHED": 503,  # the worker holds its maximum number of sessions
    "SESSION_EXPIRED": 408,  # sent on a WebSocket before closing an idle session
    "EXECUTION_ERROR": 500,  # a bug: the env raised for something other than its arguments
}
"""Error codes (OpenEnv's ``WSErrorCode`` values plus ace-gym's) and their HTTP statuses."""

MESSAGE_TYPES = ("make", "reset", "step", "state", "close")
"""WebSocket message types a client may send."""


class ProtocolError(Exception):
    """A request the server answers with an error: ``code`` (a key of :data:`ERROR_STATUS`)."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        self.code, self.message, self.details = code, message, details
        super().__init__(f"{code}: {message}")

    @property
    def status(self) -> int:
        return ERROR_STATUS[self.code]

    def http_body(self) -> dict[str, Any]:
        """The HTTP error body: ``{"detail": message, "code": code, ...details}`` (FastAPI's key)."""
        return {"detail": self.message, "code": self.code, **self.details}

    def frame(self) -> dict[str, Any]:
        """The WebSocket error frame: ``{"type": "error", "data": {"message", "code", ...details}}``."""
        return frame("error", {"message": self.message, "code": self.code, **self.details})


# -- request shapes (validated on the cold paths: make and reset) -------------------------------

JsonObject = dict[str, Any]


class WrapperRequest(BaseModel):
    """One wrapper of the session's stack: a name of the wrapper registry (:mod:`ace_gym.stacks`)
    or its class name."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=100)
    kwargs: JsonObject = Field(default_factory=dict)


class MakeRequest(BaseModel):
    """How to build a session's env: ``gym.make(env_id, **kwargs)``, then ``wrappers`` innermost first.

    A :class:`~ace_gym.stacks.StackSpec` as JSON (``{"env_id", "env_kwargs", "wrappers"}``) is
    one too: ``env_kwargs`` stands for ``kwargs``, and ``env_id`` must be the session's env id.
    ``channels``: ``["grader"]`` asks for the answer keys in every info
    (:mod:`ace_gym.runs.answer_keys`); without it the session's infos carry none."""

    model_config = ConfigDict(extra="forbid")
    kwargs: JsonObject = Field(default_factory=dict)
    wrappers: list[WrapperRequest] = Field(default_factory=list, max_length=16)
    env_id: str | None = Field(default=None, max_length=200)
    env_kwargs: JsonObject | None = None
    channels: list[Literal["grader"]] | None = Field(default=None, max_length=1)


class ResetRequest(BaseModel):
    """Arguments of ``env.reset``; ``episode_id`` is echoed by ``state`` (OpenEnv's field)."""

    model_config = ConfigDict(extra="forbid")
    seed: StrictInt | None = Field(default=None, ge=0)
    options: JsonObject | None = None
    episode_id: str | None = Field(default=None, max_length=255)


def parse_model(model: type[BaseModel], data: Any, what: str) -> Any:
    """``model`` validated from ``data``; ProtocolError VALIDATION_ERROR naming ``what`` otherwise."""
    if not isinstance(data, Mapping):
        raise ProtocolError("VALIDATION_ERROR", f"{what} must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or what}: {e['msg']}" for e in error.errors())
        raise ProtocolError("VALIDATION_ERROR", f"invalid {what}: {problems}") from None


# -- results --------------------------------------------------------------------------------------


def reset_result(observation: Any, info: Mapping[str, Any]) -> dict[str, Any]:
    """OpenEnv's reset response for a Gymnasium ``reset``."""
    return {
        "observation": {"value": observation, "info": info, "terminated": False, "truncated": False},
        "reward": None,
        "done": False,
    }


def step_result(
    observation: Any, reward: Any, terminated: Any, truncated: Any, info: Mapping[str, Any]
) -> dict[str, Any]:
    """OpenEnv's step response for a Gymnasium ``step`` (without the step's typed reply,
    ``info["reply"]``: its text is the observation)."""
    terminated, truncated = bool(terminated), bool(truncated)
    if REPLY_INFO in info:
        info = {key: value for key, value in info.items() if key != REPLY_INFO}
    return {
        "observation": {"value": observation, "info": info, "terminated": terminated, "truncated": truncated},
        "reward": float(reward),
        "done": terminated or truncated,
    }


def frame(kind: str, data: Any) -> dict[str, Any]:
    """A WebSocket frame ``{"type": kind, "data": data}``."""
    return {"type": kind, "data": data}


# -- JSON both ways ------------------------------------------------------------------------------


_LONG_DIGIT_RUN: dict[type, re.Pattern[Any]] = {str: re.compile("[0-9]{19}"), bytes: re.compile(b"[0-9]{19}")}
"""19 digits in a row: possibly an integer past 64 bits, which orjson reads as a float where the
standard library reads an int (shorter numbers read the same: tests/server/test_protocol.py)."""


def decode(raw: str | bytes) -> Any:
    """The JSON value of a body or frame; ProtocolError INVALID_JSON for anything else (bad UTF-8,
    syntax, nesting deeper than the interpreter's recursion limit, integers too long to read).

    The value is always the standard library's ``json.loads(raw)``. orjson (the ``serve`` extra,
    about 3x faster on a step frame) reads a frame first unless it holds a run of 19 digits;
    whatever orjson refuses (NaN, numbers out of float range, lone surrogates, errors) is read by
    the standard library, so its permissive cases and its error messages stay as they were.
    """
    if orjson is not None and type(raw) in _LONG_DIGIT_RUN and not _LONG_DIGIT_RUN[type(raw)].search(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        problem = "nested too deeply" if isinstance(error, RecursionError) else str(error)[:200]
        raise ProtocolError("INVALID_JSON", f"not JSON: {problem}") from None


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
# built once: json.dumps with options builds a new encoder per call


def dumps(payload: Any) -> str:
    """``payload`` as JSON text that always encodes as UTF-8; never raises.

    numpy scalars and arrays become plain numbers and lists, other sequences (tuples, the
    adapter's conversation view) lists, mapping keys strings,
    non-finite floats null, and other objects their ``repr``; lone surrogates become U+FFFD. What
    JSON cannot hold becomes a string naming it: a container inside itself ``"{...}"`` or
    ``"[...]"`` (as ``repr`` shows it), one nested deeper than :data:`MAX_DEPTH` levels
    ``"<list nested too deeply>"``, an integer too long for Python to print
    ``"<16610-bit integer>"``.
    Plain payloads take orjson (the ``serve`` extra; the same text as the standard library's
    encoder, about 7x faster), else the standard library's C encoder.
    """
    if orjson is not None:
        try:
            return orjson.dumps(payload).decode()
        except TypeError:  # numpy values, non-string keys, lone surrogates, integers past 64 bits, cycles
            pass
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError, RecursionError):  # numpy values, non-string keys, NaN/inf, cycles, depth
        text = _ENCODER.encode(_plain(payload, set()))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: pair what pairs, replace the rest
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


MAX_DEPTH = MAX_JSON_DEPTH
"""Containers deeper than this are sent as a string (:data:`ace_gym.text.MAX_JSON_DEPTH`, below the
JSON readers' depth limits, the bound an episode file's records are read with)."""

_INT_DIGITS_BITS = 14_000  # past about 4,200 digits, str(int) may refuse (sys.get_int_max_str_digits)


def _plain(value: Any, path: set[int]) -> Any:
    """``value`` as plain JSON values; ``path``: the ids of the containers it sits in."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value.bit_length() > _INT_DIGITS_BITS:
            return safe_repr(value) if _unprintable(value) else value
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return _plain(value.item(), path)
    is_mapping = isinstance(value, Mapping)
    if not (is_mapping or isinstance(value, np.ndarray) or _is_sequence(value)):
        try:
            return repr(value)
        except Exception:  # a repr that fails or recurses
            return f"<{type(value).__name__}>"
    if id(value) in path:
        return "{...}" if is_mapping else "[...]"
    if len(path) >= MAX_DEPTH:
        return f"<{type(value).__name__} nested too deeply>"
    path.add(id(value))
    try:
        if is_mapping:
            return {_key(k, path): _plain(v, path) for k, v in value.items()}
        if isinstance(value, np.ndarray):
            return _plain(value.tolist(), path)
        return [_plain(v, path) for v in value]  # lists, tuples, views
    finally:
        path.discard(id(value))


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray))


def _unprintable(value: int) -> bool:
    try:
        str(value)
    except ValueError:
        return True
    return False


def _key(key: Any, path: set[int]) -> str:
    plain = _plain(key, path)
    return plain if isinstance(plain, str) else json.dumps(plain)

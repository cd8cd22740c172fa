"""What a tool call returns: the typed :class:`ToolReply` around the envelope text, the envelope
builders (replies built as values, written by one encoder: :func:`dumps`), and what the tools
keep per instance.

The envelope text is exactly what the published benchmark sends the model:
``json.dumps({"status", "messages", "data"}, ensure_ascii=False)``. The reply carries beside it
the facts the tool layer knows and the env must not re-derive from the text: whether the call
succeeded, whether it ends the episode, and which budget it charged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ace_gym.text import valid_text

if TYPE_CHECKING:
    from ace_gym.instance import CompiledInstance

ECHO_LIMIT = 200
INVALID = "Invalid tool arguments"
SUCCESS_MESSAGE = "Successfully executed tool"


def dumps(value: Any) -> str:
    """The tool layer's one JSON encoder: ``json.dumps(value, ensure_ascii=False)``, the text the
    published benchmark sends the model, for values with no reference cycle (replies are built
    from validated data and the model's arguments)."""
    return _ENCODE(value)


def _encoder() -> Callable[[Any], str]:
    """json's encoder with json.dumps's settings for ``ensure_ascii=False``, made once: its C
    encoder where Python has it, else :meth:`json.JSONEncoder.encode`."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
    encode = make(
        None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True
    )
    return lambda value: "".join(encode(value, 0))


_ENCODE = _encoder()


def envelope(status: Literal["success", "failed"], messages: str, data: Any) -> str:
    """The envelope text ``{"status", "messages", "data"}`` of a reply."""
    return dumps({"status": status, "messages": messages, "data": data})


STOP = envelope("success", "###STOP###", {})
TOOL_CALL_FAILED = envelope("failed", "Tool call failed", {})


class Charge(NamedTuple):
    """A budget one call used: ``"query"`` (the attribute-query budget of the hidden slot at
    ``cell`` = (row, col)) or ``"global_check"`` (the episode's global-check budget, ``cell`` None)."""

    budget: Literal["query", "global_check"]
    cell: tuple[int, int] | None = None


GLOBAL_CHECK_CHARGE = Charge("global_check")


class ToolReply(NamedTuple):
    """One tool call's result: the envelope ``text`` the model sees; ``ok``, its status is
    success; ``ends_episode``, the call was a successful ``done``; ``charged``, the budget it
    used (None for calls that use none, and for every failed call); ``envelope``, the values
    ``text`` encodes (``{"status", "messages", "data"}``; None when ``text`` was written some
    other way, e.g. an envelope cut short on purpose)."""

    text: str
    ok: bool
    ends_episode: bool = False
    charged: Charge | None = None
    envelope: Mapping[str, Any] | None = None

    @property
    def data(self) -> dict[str, Any]:
        """The envelope's ``data`` when it is an object, else {}."""
        data = None if self.envelope is None else self.envelope.get("data")
        return data if type(data) is dict else {}


REPLY_INFO = "reply"
"""The ``info`` key of a step's :class:`ToolReply`: the env puts the reply of each call there,
and a wrapper that answers or rewrites a call puts its own, so wrappers above read the reply's
status and data as values, never the observation text. Not part of any record or wire message
(the observation holds its text)."""


def reply(
    status: Literal["success", "failed"],
    messages: str,
    data: Any,
    ends_episode: bool = False,
    charged: Charge | None = None,
) -> ToolReply:
    """The reply whose envelope holds these values (``ok`` when ``status`` is success)."""
    values = {"status": status, "messages": messages, "data": data}
    return ToolReply(dumps(values), status == "success", ends_episode, charged, values)


def ok_reply(data: Any, charged: Charge | None = None) -> ToolReply:
    """A success reply around ``data`` (a JSON-serialisable value)."""
    return reply("success", SUCCESS_MESSAGE, data, charged=charged)


def failed_reply(message: str) -> ToolReply:
    """A failed reply with the full message (``"<ErrorType>, <detail>"``): :func:`failure`'s text."""
    return reply("failed", message, {})


def invalid(detail: str) -> ToolReply:
    """The reply to a call with a bad argument: ``Invalid tool arguments, <detail>``."""
    return failed_reply(f"{INVALID}, {detail}")


def unknown_tool(name: object, domain: str) -> ToolReply:
    """The reply to a call of a tool that ``domain`` does not have."""
    return failed_reply(f"Unknown tool, '{echo(name)}' for domain '{domain}'")


def failure(message: str) -> str:
    """The failed envelope text with the full message (``"<ErrorType>, <detail>"``)."""
    return envelope("failed", message, {})


STOP_REPLY = reply("success", "###STOP###", {}, ends_episode=True)


def reply_in(info: Mapping[str, Any]) -> ToolReply | None:
    """The :class:`ToolReply` a step's ``info`` carries under :data:`REPLY_INFO` (None when the
    step ran no tool call, e.g. a step budget's refused turn)."""
    reply = info.get(REPLY_INFO)
    return reply if isinstance(reply, ToolReply) else None


def echo(text: object) -> str:
    """A model-supplied value for an error message, clipped to :data:`ECHO_LIMIT` characters."""
    text = text if isinstance(text, str) else safe_repr(text)
    return valid_text(text if len(text) <= ECHO_LIMIT else f"{text[:ECHO_LIMIT]}...[{len(text)} chars]")


def safe_repr(value: object) -> str:
    """``str(value)``, or a short description when that is huge (an integer beyond 64 bits) or fails."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<{value.bit_length()}-bit integer>"
    try:
        return str(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__}>"


class InstanceTexts:
    """What one compiled instance's tools build from the instance alone, kept for every episode on
    it (see :func:`texts_of`): ``query_matches[(s, field)]``, the values of ``field`` of hidden
    slot ``s``'s candidates and their match objects; ``query_budgets[extra_query_num]``, the hidden
    slots' query budgets under that setting (see
    :meth:`ace_gym.tools.state.ToolConfig.query_budgets`)."""

    __slots__ = ("compiled", "query_budgets", "query_matches")

    def __init__(self, compiled: CompiledInstance) -> None:
        self.compiled = compiled
        self.query_matches: dict[tuple[int, str], tuple[tuple[Any, ...], tuple[dict[str, Any], ...]]] = {}
        self.query_budgets: dict[int, tuple[int | None, ...]] = {}

    def id_grid(self, grid: Sequence[int]) -> list[list[str | None]]:
        """The id grid a flat item grid of the instance shows, row by row (-1: None)."""
        compiled = self.compiled
        ids, cols = compiled.item_ids, compiled.cols
        cells = [None if item < 0 else ids[item] for item in grid]
        return [cells[start : start + cols] for start in range(0, len(cells), cols)]

    def grid_json(self, grid: Sequence[int]) -> str:
        """:func:`dumps` of :meth:`id_grid`: the first user message's grid."""
        return dumps(self.id_grid(grid))


def texts_of(compiled: CompiledInstance) -> InstanceTexts:
    """The shared :class:`InstanceTexts` of ``compiled`` (built on first use, kept in its
    :meth:`~ace_gym.instance.CompiledInstance.derived` store)."""
    return compiled.derived(InstanceTexts)


def forget_texts(instances: Iterable[CompiledInstance] | None = None) -> None:
    """Empty the per-instance store (:func:`ace_gym.instance.forget_derived`) of ``instances`` (of
    every instance when None), which holds their :class:`InstanceTexts`: the next episode on one
    builds them again, as its first did. Episodes under way keep the ones they hold."""
    from ace_gym.instance.compiled import forget_derived

    forget_derived(instances)

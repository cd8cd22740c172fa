"""What a tool call returns: the typed :class:`ToolReply` around the envelope text, the envelope
builders, and the per-instance cache of serialised pieces replies are assembled from.

The envelope text is exactly what the published benchmark sends the model:
``json.dumps({"status", "messages", "data"}, ensure_ascii=False)``. The reply carries beside it
the facts the tool layer knows and the env must not re-derive from the text: whether the call
succeeded, whether it ends the episode, and which budget it charged.
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ace_gym.text import valid_text

if TYPE_CHECKING:
    from ace_gym.instance import CompiledInstance, CompiledSlot

ECHO_LIMIT = 200
SUCCESS_HEAD = '{"status": "success", "messages": "Successfully executed tool", "data": '
"""A success envelope up to its ``data``."""
STOP = '{"status": "success", "messages": "###STOP###", "data": {}}'
TOOL_CALL_FAILED = '{"status": "failed", "messages": "Tool call failed", "data": {}}'
INVALID = "Invalid tool arguments"


class Charge(NamedTuple):
    """A budget one call used: ``"query"`` (the attribute-query budget of the hidden slot at
    ``cell`` = (row, col)) or ``"global_check"`` (the episode's global-check budget, ``cell`` None)."""

    budget: Literal["query", "global_check"]
    cell: tuple[int, int] | None = None


GLOBAL_CHECK_CHARGE = Charge("global_check")


class ToolReply(NamedTuple):
    """One tool call's result: the envelope ``text`` the model sees; ``ok``, its status is
    success; ``ends_episode``, the call was a successful ``done``; ``charged``, the budget it
    used (None for calls that use none, and for every failed call)."""

    text: str
    ok: bool
    ends_episode: bool = False
    charged: Charge | None = None

    @property
    def data(self) -> dict[str, Any]:
        """The envelope's ``data`` as a value, read back by the layer that wrote it ({} when the
        text holds no envelope with an object ``data``, e.g. a reply cut short)."""
        try:
            envelope = json.loads(self.text)
        except (ValueError, RecursionError):
            return {}
        data = envelope.get("data") if type(envelope) is dict else None
        return data if type(data) is dict else {}


REPLY_INFO = "reply"
"""The ``info`` key of a step's :class:`ToolReply`: the env puts the reply of each call there,
and a wrapper that answers or rewrites a call puts its own, so wrappers above read the reply's
status and data as values, never the observation text. Not part of any record or wire message
(the observation holds its text)."""

_new_reply = tuple.__new__  # ToolReply(...) without the keyword-handling __new__: replies are built per call


REFUSALS_KEPT = 1024
"""Replies :func:`invalid` and :func:`failed_reply` each keep, most recently used first: a model
repeats its mistakes, and a message echoes at most :data:`ECHO_LIMIT` characters of its
arguments, so each cache holds < 1 MB."""


def ok_reply(data_json: str, charged: Charge | None = None) -> ToolReply:
    """A success reply around already-serialised ``data``."""
    return _new_reply(ToolReply, (SUCCESS_HEAD + data_json + "}", True, False, charged))


def envelope_reply(text: str, charged: Charge | None = None) -> ToolReply:
    """A success reply whose whole envelope ``text`` (:data:`SUCCESS_HEAD`, data, ``}``) is built:
    a long reply assembled in one step instead of copied again around its data."""
    return _new_reply(ToolReply, (text, True, False, charged))


@functools.lru_cache(maxsize=REFUSALS_KEPT)
def failed_reply(message: str) -> ToolReply:
    """A failed reply with the full message (``"<ErrorType>, <detail>"``): :func:`failure`'s text."""
    return _new_reply(ToolReply, (failure(message), False, False, None))


_INVALID_HEAD = '{"status": "failed", "messages": "' + INVALID + ", "


@functools.lru_cache(maxsize=REFUSALS_KEPT)
def invalid(detail: str) -> ToolReply:
    """The reply to a call with a bad argument: ``Invalid tool arguments, <detail>`` (half the
    calls of a recorded episode: kept by its detail, a fifth of the cost of escaping it again)."""
    return _new_reply(ToolReply, (_INVALID_HEAD + string_json(detail)[1:] + ', "data": {}}', False, False, None))


def unknown_tool(name: object, domain: str) -> ToolReply:
    """The reply to a call of a tool that ``domain`` does not have."""
    return failed_reply(f"Unknown tool, '{echo(name)}' for domain '{domain}'")


def failure(message: str) -> str:
    """The failed envelope text with the full message (``"<ErrorType>, <detail>"``)."""
    return '{"status": "failed", "messages": ' + string_json(message) + ', "data": {}}'


STOP_REPLY = ToolReply(STOP, ok=True, ends_episode=True)


def reply_in(info: Mapping[str, Any]) -> ToolReply | None:
    """The :class:`ToolReply` a step's ``info`` carries under :data:`REPLY_INFO` (None when the
    step ran no tool call, e.g. a step budget's refused turn)."""
    reply = info.get(REPLY_INFO)
    return reply if isinstance(reply, ToolReply) else None


# what ``json.dumps`` writes for a str with ``ensure_ascii=False``, without the encoder's type dispatch
string_json: Callable[[str], str] = json.encoder.encode_basestring
# ``json.dumps(value, ensure_ascii=False)`` builds a new encoder on every call (it only caches the
# default one). CPython's C encoder, made once, writes the same text at ~2/3 of even a kept
# encoder's ``encode`` (which makes a C encoder per call); without the circular-reference check,
# as what it writes (item dicts and attribute values) comes from validated JSON, which has no cycles.
_make_c_encoder = getattr(json.encoder, "c_make_encoder", None)
if _make_c_encoder is None:  # a Python without the C accelerator
    dumps: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False).encode
else:
    _c_encode = _make_c_encoder(None, json.JSONEncoder().default, string_json, None, ": ", ", ", False, False, True)

    def dumps(value: Any) -> str:
        """``json.dumps(value, ensure_ascii=False)`` of a value with no reference cycle."""
        return "".join(_c_encode(value, 0))


def value_json(value: object) -> str:
    """``dumps(value)`` of an attribute value; a plain int or str is written directly (json writes
    an int's ``int.__repr__`` and a str's :data:`string_json`; the encoder's path for an int costs
    ~10x more, and for a str adds a method call)."""
    if type(value) is int:
        return repr(value)
    if type(value) is str:
        return string_json(value)
    return dumps(value)


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


class _Filled(dict[Any, Any]):
    """A dict that builds a missing entry with ``make(source, key)`` on first lookup and keeps it."""

    __slots__ = ("make", "source")

    def __init__(self, make: Callable[[Any, Any], Any], source: Any) -> None:
        super().__init__()
        self.make, self.source = make, source

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.make(self.source, key)
        return value


def _id_json(item_ids: tuple[str, ...], item: int) -> str:
    return string_json(item_ids[item])


def _query_charge(slots: Sequence[CompiledSlot], s: int) -> Charge:
    return Charge("query", (slots[s].row, slots[s].col))


class InstanceTexts:
    """Serialised pieces of one compiled instance, built on first use and shared read-only by
    every episode on it (see :func:`texts_of`).

    ``cell_json[i]`` is item ``i``'s id as JSON, and ``cell_json[-1]`` is ``null`` so that a grid
    cell (-1 = empty) indexes it directly; :meth:`grid_json` writes a grid of the instance from
    them (the first user message's and the grid-state replies'); ``item_replies`` holds the
    item-info replies by item, ``query_columns`` the per-(slot, field) candidate values and match
    objects of the query tool, and ``query_charges[s]`` the :class:`Charge` of a query on hidden
    slot ``s``. Every piece is built when first looked up (an instance has hundreds of items; an
    episode shows a few dozen), so that the first call on a fresh instance costs no more than the
    pieces it shows.

    ``query_replies`` holds the envelope heads of successful queries (up to their remaining
    budget) and the replies of refused ones, and ``attribute_replies`` the replies of attribute
    lookups (keyed with the id and field limits they were checked against), by their arguments
    (see :func:`remember`): what those tools answer depends on the instance and the arguments
    alone, apart from the query budgets, which the query tool checks and charges per episode
    before it looks a reply up. Refusals are kept too: a model repeats its mistakes, within an
    episode and across the episodes of a group on one instance. ``set_replies[(s, i)]`` is the
    reply to putting candidate ``i`` into hidden slot ``s`` (-1: clearing it), ``grid_replies`` holds the grid-state replies by the grid they show (every episode's first
    one shows the initial grid), and ``state_replies`` the replies of the tools whose text is a
    function of a few numbers of the episode's state (a cell's item, a budget and its count, a
    check's verdict), keyed by the tool function and those numbers: looking one up costs a
    fraction of formatting it again. ``query_budgets[extra_query_num]`` holds the hidden slots'
    query budgets under that setting (see :meth:`ace_gym.tools.state.ToolConfig.query_budgets`).
    """

    __slots__ = (
        "attribute_replies",
        "cell_json",
        "grid_replies",
        "grid_template",
        "item_replies",
        "query_budgets",
        "query_charges",
        "query_columns",
        "query_replies",
        "set_replies",
        "state_replies",
    )

    def __init__(self, compiled: CompiledInstance) -> None:
        item_ids = compiled.item_ids
        self.cell_json: dict[int, str] = _Filled(_id_json, item_ids)
        self.cell_json[-1] = "null"
        for item in compiled.initial_grid:  # the grid every episode shows first
            if item >= 0:
                self.cell_json[item] = string_json(item_ids[item])
        self.grid_template = _grid_template(compiled.rows, compiled.cols)
        self.item_replies: dict[int, ToolReply] = {}
        self.query_columns: dict[tuple[int, str], tuple[tuple[Any, ...], tuple[str, ...]]] = {}
        self.query_charges: dict[int, Charge] = _Filled(_query_charge, compiled.slots)
        self.query_budgets: dict[int, tuple[int | None, ...]] = {}
        self.query_replies: dict[tuple[Any, ...], str | ToolReply] = {}
        self.attribute_replies: dict[tuple[Any, Any, int, int], ToolReply] = {}
        self.set_replies: dict[tuple[int, int], ToolReply] = {}
        self.grid_replies: dict[tuple[int, ...], ToolReply] = {}
        self.state_replies: dict[tuple[Any, ...], ToolReply] = {}

    def grid_json(self, grid: Sequence[int]) -> str:
        """``dumps`` of the id grid a flat item grid of the instance shows (-1: ``null``): the
        first user message's grid and the grid-state replies'."""
        return self.grid_template % tuple(map(self.cell_json.__getitem__, grid))


@functools.cache
def _grid_template(rows: int, cols: int) -> str:
    """``dumps`` of a rows x cols grid with a ``%s`` per cell (one format call fills it: ~2x
    faster than joins)."""
    row = "[" + ", ".join(["%s"] * cols) + "]"
    return "[" + ", ".join([row] * rows) + "]"


REPLY_CACHE_LIMIT = 512
"""Payloads kept per instance and tool: the arguments come from the model, so the caches stop
growing there (later calls are answered as on a miss) and one instance holds at most ~1 MB."""


def remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value`` under ``key`` in one of :class:`InstanceTexts`' reply caches, unless it is full."""
    if len(cache) < REPLY_CACHE_LIMIT:
        cache[key] = value


_TEXTS: weakref.WeakKeyDictionary[CompiledInstance, InstanceTexts] = weakref.WeakKeyDictionary()


def texts_of(compiled: CompiledInstance) -> InstanceTexts:
    """The shared :class:`InstanceTexts` of ``compiled`` (built on first use, dropped with it)."""
    found = _TEXTS.get(compiled)
    if found is None:
        found = _TEXTS.setdefault(compiled, InstanceTexts(compiled))
    return found


def forget_texts(instances: Iterable[CompiledInstance] | None = None) -> None:
    """Drop the :class:`InstanceTexts` of ``instances`` (of every instance when None): the next
    episode on one builds them again, as its first did. Episodes under way keep the ones they hold."""
    if instances is None:
        _TEXTS.clear()
        return
    for compiled in instances:
        _TEXTS.pop(compiled, None)

"""Compact tool replies for training: the same information as the published envelope, in fewer
characters (docs/training.md, "Compact observations", lists every field).

:func:`compact_reply` writes one reply's envelope (its values, never its text read back) given the
call's arguments; :func:`expand_reply`
turns a compact reply (or a published envelope, unchanged) back into the published envelope, so
that a scripted agent reads either. The rules, in order:

* every reply is minified JSON (no space after ``,`` or ``:``);
* a success whose message is the standard :data:`~ace_gym.tools.replies.SUCCESS_MESSAGE` is its
  ``data`` alone, without ``status`` and ``messages``; any other reply (a failure, ``done``'s
  stop) keeps its whole envelope, minified. No success ``data`` has a ``status`` key, so a reply
  is compact-success exactly when it has none;
* a ``data`` key that repeats an argument of the call with the same value is dropped (the echo:
  ``row``, ``col``, ``field``, ``operator``, ``value``, ``id``);
* query ``matches`` (``[{"id": ..., FIELD: v}, ...]``) become one object ``{id: v, ...}``
  when every match has exactly those two keys and the ids are distinct;
* a ``remaining_budget`` of null (unlimited, as the system prompt says) and an empty
  ``missing_ids`` are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ace_gym.tools.replies import SUCCESS_MESSAGE, ToolReply

OBSERVATIONS: tuple[str, ...] = ("full", "compact")
"""The observation modes of :class:`~ace_gym.envs.AceEnv`: the published envelopes, or compact replies."""

COMPACT_NOTE = (
    "Tool replies are compact JSON. A successful call returns its data alone, without the "
    "arguments you sent: a query returns {id: value} for its matches, and its remaining budget "
    "only when limited. A failed call returns "
    '{"status":"failed","messages":...,"data":...}. '
    "You may make several tool calls in one turn when they do not depend on each other's results; "
    "they run in the order written."
)
"""What the system prompt adds in compact mode (after the published text, which it leaves as is)."""

_DROPPED_WHEN: dict[str, Any] = {"remaining_budget": None, "missing_ids": []}


def _minified(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def compact_reply(reply: ToolReply, arguments: Mapping[str, Any] | None) -> str:
    """The compact form of ``reply`` to a call with ``arguments`` (see the module docstring),
    written from its :attr:`~ace_gym.tools.replies.ToolReply.envelope`; its text unchanged when
    it has no envelope values."""
    envelope = reply.envelope
    if envelope is None:
        return reply.text
    data = envelope["data"]
    if envelope["status"] != "success" or envelope["messages"] != SUCCESS_MESSAGE or type(data) is not dict:
        return _minified(envelope)
    given = arguments if isinstance(arguments, Mapping) else {}
    compact: dict[str, Any] = {}
    for key, value in data.items():
        if key in given and _same(given[key], value):
            continue
        if key in _DROPPED_WHEN and value == _DROPPED_WHEN[key]:
            continue
        compact[key] = value
    field = given.get("field")
    matches = compact.get("matches")
    if isinstance(field, str) and field != "id" and type(matches) is list and _pairs(matches, field):
        compact["matches"] = {match["id"]: match[field] for match in matches}
    return _minified(compact)


def _same(argument: Any, value: Any) -> bool:
    """Whether ``value`` repeats ``argument`` exactly (type included: 1 is not 1.0 nor True)."""
    return type(argument) is type(value) and argument == value


def _pairs(matches: list[Any], field: str) -> bool:
    """Whether every match is ``{"id": <str>, field: v}`` and the ids are distinct."""
    ids = set()
    for match in matches:
        if type(match) is not dict or len(match) != 2 or field not in match or type(match.get("id")) is not str:
            return False
        ids.add(match["id"])
    return len(ids) == len(matches)


def expand_reply(value: Any, arguments: Mapping[str, Any]) -> Any:
    """The published envelope of a decoded reply ``value`` to a call with ``arguments``: a
    compact success (an object without ``status``) gets its envelope, its echoed arguments and
    dropped defaults back (key order aside); anything else is returned as it is."""
    if type(value) is not dict or "status" in value:
        return value
    data = dict(value)
    field = arguments.get("field")
    matches = data.get("matches")
    if type(matches) is dict and isinstance(field, str):
        data["matches"] = [{"id": item, field: found} for item, found in matches.items()]
    if "matches" in data:
        data.setdefault("remaining_budget", None)
    if "items" in data:
        data.setdefault("missing_ids", [])
    for key, argument in arguments.items():
        data.setdefault(key, argument)
    return {"status": "success", "messages": SUCCESS_MESSAGE, "data": data}

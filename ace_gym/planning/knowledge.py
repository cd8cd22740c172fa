"""What the planning detectors judge an action against: the task's facts and the agent's knowledge.

:class:`TaskFacts` is fixed for an episode: the grid's shape and pre-filled cells, which ids and
attributes exist, each hidden slot's slot-valid ids, the budgets, whether the task can be done,
and the *tool surface* the agent was shown (the env's tools plus what planning wrappers added: a
distractor, a replacement for a broken tool, a refusal tool...). :func:`facts_from_reset` reads
all of it from a compiled instance and the reset ``info`` of a wrapped env (public data only).

:class:`Knowledge` is what the agent has observed so far, updated from each executed call and the
typed reply it got (:meth:`Knowledge.observe`, the step's ``info["reply"]``): the grid as its own successful ``set_slot`` calls left
it, the candidate ids each query returned for each slot, which questions were answered, what the
last checks said, which tools failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ace_gym.instance import CompiledInstance
from ace_gym.planning.settings import APB_INFO
from ace_gym.planning.unsolvable import needs_approval
from ace_gym.spaces import ToolCall, arguments_json
from ace_gym.tools import ToolReply, tool_names

Cell = tuple[int, int]

SURFACE_KINDS = ("distractor", "refusal", "approval", "attachment", "multi_query", "set_and_check")
"""Kinds of the tools planning wrappers add (a replacement takes the kind of the tool it replaces)."""


def real_tool_kinds(domain: str) -> dict[str, str]:
    """``{tool name: kind}`` of the env's own tools in ``domain`` (a kind is the tool's key in the
    tool table, :mod:`ace_gym.domains.tool_names`)."""
    return {name: key for key, name in tool_names(domain).items()}


@dataclass(frozen=True)
class ToolEntry:
    """A tool as the agent was shown it: its ``kind``, parameters, and for a replacement the
    ``renamed`` map (its parameter -> the replaced tool's parameter)."""

    name: str
    kind: str
    parameters: tuple[str, ...] = ()
    required: frozenset[str] = frozenset()
    renamed: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskFacts:
    """Everything fixed about one episode that the detectors need (see the module docstring)."""

    rows: int
    cols: int
    hidden: Mapping[Cell, int]  # hidden cell -> slot index
    visible_ids: frozenset[str]
    item_ids: frozenset[str]
    fields: frozenset[str]
    numeric_fields: frozenset[str]
    slot_valid: Mapping[Cell, frozenset[str]]
    tools: Mapping[str, ToolEntry]
    broken: frozenset[str] = frozenset()
    unapprovable: frozenset[str] = frozenset()  # items a set needs an approval for that cannot be had
    solvable: bool | None = True  # None: not the judge's to know (no solvability flag is raised)
    unsolvable_kind: str | None = None
    query_budgets: Mapping[Cell, int | None] = field(default_factory=dict)
    global_budget: int | None = None
    max_query_ids: int = 5
    max_query_fields: int = 5

    def tool_named(self, kind: str) -> str | None:
        """The name of the first offered tool of ``kind`` (None when none is offered)."""
        return next((entry.name for entry in self.tools.values() if entry.kind == kind), None)


def facts_from_reset(
    compiled: CompiledInstance, info: Mapping[str, Any], answer_key: Mapping[str, Any] | None = None
) -> TaskFacts:
    """The facts of an episode from its compiled instance and the reset ``info`` of the env stack.

    Tools come from ``info["tools"]`` (their schemas give parameters and required ones); kinds
    from the env's tool table and the planning wrappers' records under ``info["apb"]``; budgets
    from ``info["budgets"]``; solvability from ``answer_key``, the unsolvable setting's grader
    channel (:func:`ace_gym.planning.unsolvable_mix.answer_key_of`). Without it a task is solvable
    when no refusal tool is offered, and of unknown solvability (``solvable=None``) when one is:
    a critic the agent reads must not tell it (issue 38).
    """
    real = real_tool_kinds(compiled.domain.name)
    apb: Mapping[str, Any] = info.get(APB_INFO, {})
    added: dict[str, str] = {name: "distractor" for name in apb.get("extraneous_tools", {}).get("names", ())}
    renamed: dict[str, dict[str, str]] = {}
    broken: set[str] = set()
    if "broken_tool" in apb:
        record = apb["broken_tool"]
        added[record["replacement"]] = real[record["tool"]]
        renamed[record["replacement"]] = dict(record["parameter_map"])
        broken.add(record["tool"])
    key = answer_key or {}
    approval_impossible = key.get("approval") in ("outage", "missing")
    refusal_offered = "refusal" in apb.get("unsolvable", {}).get("tools", {}).values()
    solvable = not key["unsolvable"] if answer_key is not None else (None if refusal_offered else True)
    added.update(apb.get("unsolvable", {}).get("tools", {}))
    added.update(apb.get("cost", {}).get("composites", {}))
    if approval_impossible:
        broken.update(name for name, kind in added.items() if kind == "approval")
    tools = {}
    for schema in info.get("tools", ()):
        function = schema["function"]
        name = function["name"]
        parameters = function.get("parameters", {})
        tools[name] = ToolEntry(
            name,
            added.get(name) or real.get(name, "distractor"),
            tuple(parameters.get("properties", {})),
            frozenset(parameters.get("required", ())),
            renamed.get(name, {}),
        )
    budgets = info.get("budgets", {})
    query_budgets = {_cell_key(key): value for key, value in budgets.get("hidden_slot_query_budget", {}).items()}
    return TaskFacts(
        rows=compiled.rows,
        cols=compiled.cols,
        hidden={(slot.row, slot.col): s for s, slot in enumerate(compiled.slots)},
        visible_ids=compiled.visible_ids,
        item_ids=frozenset(compiled.item_ids),
        fields=frozenset(compiled.domain.allowed_fields),
        numeric_fields=frozenset(compiled.numeric),
        slot_valid={
            (slot.row, slot.col): frozenset(compiled.item_ids[i] for i in slot.valid_items) for slot in compiled.slots
        },
        tools=tools,
        broken=frozenset(broken),
        unapprovable=_unapprovable(compiled, key) if approval_impossible else frozenset(),
        solvable=solvable,
        unsolvable_kind=key.get("kind") or None,
        query_budgets=query_budgets,
        global_budget=budgets.get("global_check_budget"),
        max_query_ids=int(budgets.get("max_query_ids", 5)),
        max_query_fields=int(budgets.get("max_query_fields", 5)),
    )


def _unapprovable(compiled: CompiledInstance, key: Mapping[str, Any]) -> frozenset[str]:
    """The items the answer key's approval policy covers (its tool cannot approve them); every
    item for a key recorded before the policy named an attribute (it then covered every set)."""
    if not key.get("approval_attribute"):
        return frozenset(compiled.item_ids)
    return needs_approval(compiled, (key["approval_attribute"], key["approval_threshold"]))


def _cell_key(key: str) -> Cell:
    row, col = key.split(",")
    return int(row), int(col)


# -- the agent's knowledge --------------------------------------------------------------------------


def split_action(action: Any) -> tuple[Any, Any]:
    """``(name, arguments)`` of a tool-call action; ``(None, None)`` when it is not shaped like one."""
    if isinstance(action, ToolCall):
        return action.name, action.arguments
    if isinstance(action, Mapping) and "name" in action:
        return action["name"], action.get("arguments", {})
    return None, None


def decode_arguments(arguments: Any) -> dict[Any, Any] | None:
    """Arguments as a dict the way the env reads them (a JSON object string is decoded, None and
    an empty string are no arguments), or None when they are not an object."""
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    if arguments is None:
        return {}
    return dict(arguments) if isinstance(arguments, Mapping) else None


def json_argument(value: Any) -> Any:
    """An argument a model may write as JSON text (a list of ids, of conditions): a string is
    decoded (None when it is not JSON), anything else is returned as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def call_key(name: str, arguments: Mapping[Any, Any]) -> str:
    """The identity of a call for "asked before" comparisons: canonical JSON of name and arguments."""
    return arguments_json([name, dict(arguments)], sort_keys=True)


@dataclass
class Knowledge:
    """What the agent has observed so far in one episode (see the module docstring).

    ``version`` counts state changes (a placed id, a charged query or check); ``grid_version``
    counts grid changes only. ``answered`` maps the key of each answered information call to the
    ``version`` it was answered at.
    """

    grid: dict[Cell, str | None]
    observed: dict[Cell, set[str]] = field(default_factory=dict)
    answered: dict[str, int] = field(default_factory=dict)
    version: int = 0
    grid_version: int = 0
    query_calls: dict[Cell, int] = field(default_factory=dict)
    global_calls: int = 0
    global_verdict: tuple[int, bool] | None = None
    failed_tools: set[str] = field(default_factory=set)

    @classmethod
    def start(cls, facts: TaskFacts) -> Knowledge:
        """Knowledge at reset: every hidden cell empty, nothing asked."""
        return cls(grid=dict.fromkeys(facts.hidden))

    def copy(self) -> Knowledge:
        return Knowledge(
            grid=dict(self.grid),
            observed={cell: set(ids) for cell, ids in self.observed.items()},
            answered=dict(self.answered),
            version=self.version,
            grid_version=self.grid_version,
            query_calls=dict(self.query_calls),
            global_calls=self.global_calls,
            global_verdict=self.global_verdict,
            failed_tools=set(self.failed_tools),
        )

    @property
    def empty_cells(self) -> list[Cell]:
        return [cell for cell, item in self.grid.items() if item is None]

    def verified(self) -> bool | None:
        """What the last global check said about the current grid (None: not checked since it changed)."""
        if self.global_verdict is None or self.global_verdict[0] != self.grid_version:
            return None
        return self.global_verdict[1]

    def observe(self, facts: TaskFacts, action: Any, reply: ToolReply | None) -> None:
        """Update from one executed call and the reply it got: the step's ``info["reply"]``
        (:func:`ace_gym.tools.reply_in`; None, a call that got no reply, counts as a failure)."""
        if reply is not None and not isinstance(reply, ToolReply):
            raise TypeError(f"reply must be the step's ToolReply (info['reply']), not {type(reply).__name__}")
        name, raw = split_action(action)
        entry = facts.tools.get(name) if isinstance(name, str) else None
        arguments = decode_arguments(raw)
        if entry is None or arguments is None:
            return
        arguments = {entry.renamed.get(key, key): value for key, value in arguments.items()}
        if reply is None or not reply.ok:
            self.failed_tools.add(entry.name)
            return
        data = reply.data
        kind = entry.kind
        if kind in ("set_slot", "set_and_check"):
            self._placed(data)
        if kind in ("query", "multi_query"):
            cell: Any = (data.get("row"), data.get("col"))  # as the reply gives it (a Cell when it is a query's)
            ids = {m["id"] for m in data.get("matches", ()) if type(m) is dict and "id" in m}
            self.observed.setdefault(cell, set()).update(ids)
            self.query_calls[cell] = self.query_calls.get(cell, 0) + (
                len(arguments.get("conditions", ())) if kind == "multi_query" else 1
            )
            self.version += 1
        if kind == "global_check":
            self.global_calls += 1
            self.version += 1
            if isinstance(data.get("is_valid"), bool):
                self.global_verdict = (self.grid_version, data["is_valid"])
        self.answered[call_key(entry.name, arguments)] = self.version

    def _placed(self, data: Mapping[str, Any]) -> None:
        cell = (data.get("row"), data.get("col"))
        if cell in self.grid:
            self.grid[cell] = data.get("id")  # type: ignore[index]
            self.grid_version += 1
            self.version += 1


def trace_knowledge(facts: TaskFacts, steps: Iterable[tuple[Any, ToolReply | None]]) -> Knowledge:
    """The knowledge after a sequence of executed ``(action, reply)`` steps (typed replies, as
    :meth:`Knowledge.observe` takes them)."""
    knowledge = Knowledge.start(facts)
    for action, reply in steps:
        knowledge.observe(facts, action, reply)
    return knowledge

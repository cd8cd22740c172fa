"""What a scripted agent knows: the texts it is shown and the envelopes tools send back.

:func:`read_task` turns the reset observation (the partial grid) and the system prompt (which
embeds the task instruction with every global threshold and slot rule, docs/compatibility.md §1.7) into a
:class:`TaskView`. Nothing here touches an instance, its truth or its candidate lists; the domain
declaration only supplies the rule wording an agent reads in the prompt. :func:`call` is the one
way scripts issue a tool call: it retries injected failures and decodes the envelope.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ace_gym.constraints import SLOT_KINDS, global_rule_text, words
from ace_gym.domains import Domain, GlobalRule, get_domain
from ace_gym.domains.tool_names import ToolKey, tool_name
from ace_gym.tools.compact import expand_reply

TOOL_FAILED_MESSAGE = "Tool call failed"
REVIEW = "Not executed"
"""Error type of a call held back for review (a wrapper may hold a proposed call back, as APB's
``Refine`` does): :func:`call` sends it again unchanged to run it."""
MAX_RETRIES = 8
_BOUND_SENTINEL = 987654321
_SLOT_HEADER = re.compile(r"^For slot \((\d+), (\d+)\):$", re.MULTILINE)
_STAGE = re.compile(r"Stage \d+ of \d+: fill the hidden slots ((?:\(\d+, \d+\)(?:, )?)+)")
"""A staged scenario's note on the stage to fill now (:mod:`ace_gym.feedback.scenario`)."""
_CELL = re.compile(r"\((\d+), (\d+)\)")

ToolCallDict = dict[str, Any]
"""One tool call as the core env takes it: ``{"name": str, "arguments": dict}``."""

Script = Generator[ToolCallDict | list[ToolCallDict], Any, None]
"""A scripted episode: yields tool calls (:func:`call`) and is sent each call's response envelope
(a JSON string); or yields a list of calls to make in one assistant turn (:func:`calls`) and is
sent the list of their replies, in order."""

OneCallScript = Generator[ToolCallDict, str, None]
"""A script that makes one call per turn (:class:`~ace_gym.agents.ExactSolver`'s)."""

DONE: ToolCallDict = {"name": "done", "arguments": {}}
"""The call that ends an episode."""


class TaskTextError(ValueError):
    """The prompt does not have the published shape (a scripted agent cannot read it)."""


@dataclass(frozen=True)
class SlotView:
    """A hidden cell and its rules ``(attribute, kind "max"|"min", bound)`` as the prompt states them."""

    row: int
    col: int
    rules: tuple[tuple[str, str, int], ...]

    @property
    def cell(self) -> tuple[int, int]:
        return (self.row, self.col)


@dataclass(frozen=True)
class TaskView:
    """Everything a scripted agent reads at reset.

    ``global_bounds`` maps each of the domain's global rules (in rule order) to its threshold;
    ``slots`` are the hidden slots to fill now (every one in an ACE task, the current stage's in a
    staged scenario) and ``later`` the ones a scenario's later stages fill;
    ``global_check_budget`` is None when unlimited; ``max_query_ids``/``max_query_fields`` are the
    batch limits of the item-attributes tool. ``known`` holds attribute values the agent learnt
    earlier in the episode (item id -> values): a scenario's later stage shows the items set in
    earlier stages in its grid, and the item tools answer only for the items visible at reset.
    """

    domain: Domain
    grid: list[list[str | None]]
    global_bounds: dict[str, int]
    slots: tuple[SlotView, ...]
    global_check_budget: int | None
    max_query_ids: int
    max_query_fields: int
    known: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)
    later: tuple[SlotView, ...] = ()

    @property
    def rows(self) -> int:
        return len(self.grid)

    @property
    def cols(self) -> int:
        return len(self.grid[0])

    @property
    def visible_ids(self) -> list[str]:
        return [item for row in self.grid for item in row if item is not None]

    def tool(self, key: ToolKey) -> str:
        """The name of tool ``key`` (see :data:`ace_gym.domains.tool_names.TOOL_NAMES`) in this domain."""
        return tool_name(key, self.domain)

    def global_rules(self) -> list[tuple[GlobalRule, int]]:
        return [(rule, self.global_bounds[rule.name]) for rule in self.domain.global_rules]


def read_task(observation: str, info: Mapping[str, Any], known: dict[str, dict[str, Any]] | None = None) -> TaskView:
    """Read the task from a core env's reset ``observation`` and ``info`` (domain, system prompt).

    The hidden slots are the empty cells the task policy names (``For slot (r, c):``); in a
    staged scenario those of the stage ``observation`` opens are to be filled now and the others
    later (:attr:`TaskView.later`). ``known``: values learnt earlier in the episode (see :class:`TaskView`)."""
    domain = get_domain(info["domain"])
    prompt: str = info["system_prompt"]
    grid_line = next((line for line in observation.splitlines() if line.startswith("[")), None)
    if grid_line is None:
        raise TaskTextError("the observation holds no grid")
    grid = json.loads(grid_line)
    bounds = {}
    for rule in domain.global_rules:
        pattern = re.escape(global_rule_text(rule, _BOUND_SENTINEL, domain)).replace(str(_BOUND_SENTINEL), r"(-?\d+)")
        found = re.search(r"\(\d+\) " + pattern + r"\.", prompt)
        if found is None:
            raise TaskTextError(f"global rule {rule.name} is not stated in the task instruction")
        bounds[rule.name] = int(found.group(1))
    attribute_of = {words(rule.attribute): rule.attribute for rule in domain.slot_rules}
    relations = "|".join(re.escape(kind.relation) for kind in SLOT_KINDS.values())
    slot_rule = re.compile(
        rf"the {re.escape(domain.item_label)} in slot \((\d+), (\d+)\) must have (.+?) ({relations}) (-?\d+)\."
    )
    rules: dict[tuple[int, int], dict[tuple[str, str, int], None]] = {}  # a dict keeps each rule once, in order
    for row, col, attribute, relation, bound in slot_rule.findall(prompt):
        if attribute not in attribute_of:
            raise TaskTextError(f"unknown slot-rule attribute {attribute!r}")
        kind = next(k.name for k in SLOT_KINDS.values() if k.relation == relation)
        rules.setdefault((int(row), int(col)), {})[(attribute_of[attribute], kind, int(bound))] = None
    named = {(int(row), int(col)) for row, col in _SLOT_HEADER.findall(prompt)}
    hidden = [
        SlotView(r, c, tuple(rules.get((r, c), ())))
        for r, row_items in enumerate(grid)
        for c, item in enumerate(row_items)
        if item is None and (r, c) in named
    ]
    stage = _STAGE.findall(observation)
    now = {(int(r), int(c)) for r, c in _CELL.findall(stage[-1])} if stage else {slot.cell for slot in hidden}
    slots = tuple(slot for slot in hidden if slot.cell in now)
    later = tuple(slot for slot in hidden if slot.cell not in now)
    limits = re.search(r"for up to (\d+) selected attributes for up to (\d+) such ids", prompt)
    max_fields, max_ids = (int(limits.group(1)), int(limits.group(2))) if limits else (5, 5)
    budget = _global_check_budget(prompt, domain)
    return TaskView(domain, grid, bounds, slots, budget, max_ids, max_fields, {} if known is None else known, later)


def _global_check_budget(prompt: str, domain: Domain) -> int | None:
    tool = f"`{tool_name('global_check', domain)}`"
    if f"{tool} is disabled" in prompt:
        return 0
    found = re.search(re.escape(tool) + r" may be called at most (\d+) time", prompt)
    return int(found.group(1)) if found else None


def call(name: str, **arguments: Any) -> Generator[ToolCallDict, str, dict[str, Any]]:
    """Issue one tool call (``envelope = yield from call(...)``); re-issues it while the failure
    injector fails it, up to :data:`MAX_RETRIES` times, or while ``Refine`` holds it back for
    review (resubmitted unchanged), and returns the decoded envelope."""
    envelope: dict[str, Any] = {}
    for _ in range(MAX_RETRIES + 1):
        envelope = decoded_reply((yield {"name": name, "arguments": arguments}), arguments)
        while is_review(envelope.get("messages")):  # held back by Refine: submit it again
            envelope = decoded_reply((yield {"name": name, "arguments": arguments}), arguments)
        if envelope.get("messages") != TOOL_FAILED_MESSAGE:
            break
    return envelope


def calls(requests: list[ToolCallDict]) -> Generator[list[ToolCallDict], list[str], list[dict[str, Any]]]:
    """Issue ``requests`` (``{"name", "arguments"}`` each) together, in one assistant turn
    (``envelopes = yield from calls(...)``), and return their decoded envelopes in order. As
    :func:`call` does for one call, a call the failure injector failed is issued again, up to
    :data:`MAX_RETRIES` times, and a call held back for review is resubmitted, together with the
    others still pending, in a later turn. A reply missing from the list sent back counts as failed."""
    envelopes: list[dict[str, Any]] = [{} for _ in requests]
    retries = [0] * len(requests)
    pending = list(range(len(requests)))
    while pending:
        replies = yield [{"name": requests[k]["name"], "arguments": requests[k]["arguments"]} for k in pending]
        still_pending = []
        for position, k in enumerate(pending):
            reply = replies[position] if position < len(replies) else None
            envelope = decoded_reply(reply, requests[k]["arguments"])
            envelopes[k] = envelope
            if is_review(envelope.get("messages")):
                still_pending.append(k)
            elif envelope.get("messages") == TOOL_FAILED_MESSAGE and retries[k] < MAX_RETRIES:
                retries[k] += 1
                still_pending.append(k)
        pending = still_pending
    return envelopes


def is_review(messages: object) -> bool:
    """Whether an envelope's ``messages`` says the call was held back for review (:data:`REVIEW`)."""
    return isinstance(messages, str) and messages.startswith(f"{REVIEW}, ")


def decoded_reply(response: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A reply to a call with ``arguments`` as the published envelope dict (a compact reply,
    :mod:`ace_gym.tools.compact`, expanded); a reply that is none becomes a failure carrying its text."""
    try:
        envelope = expand_reply(json.loads(response), arguments)
    except (TypeError, ValueError):
        envelope = None
    return envelope if isinstance(envelope, dict) else {"status": "failed", "messages": str(response), "data": {}}


def succeeded(envelope: Mapping[str, Any]) -> bool:
    return envelope.get("status") == "success"

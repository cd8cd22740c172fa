"""Scripted probes of the planning-robustness settings: fixed, known behaviours whose metrics a
test can predict.

* :class:`RecoveryProbe` subclasses play the exact solver and react to a tool that fails
  persistently (``BrokenTool``, an outage) in one fixed way: call it again (``probe-retry``), call
  its replacement and keep using it (``probe-replace``), call another working tool first and then
  the replacement (``probe-alternative``), or give up (``probe-refuse``). They land in APB's
  categories 3, 1, 2 and 4. The replacement is found as an agent would find it: the offered tool
  with the same description, its parameters matched by their descriptions.
* :class:`AlwaysRefuse` reports every task infeasible at once (``refuse``); the exact solver is
  the never-refusing counterpart.
* :class:`CarefulSolver` (``probe-careful``) is the honest reference of the unsolvable setting: it
  reads the task as a careful agent does (the approval policy, the phone notes, the attached
  sheet), asks for approvals before setting, and refuses only on evidence from the instance: the
  approval tool is not offered or is in outage *and* no completion avoids the items the policy
  covers (it solves again with them left out), no completion meets the rules, or a limit or a
  sheet is missing *and* the rules it has leave several completions (it counts them). :class:`CarefulNeverRefuse`
  (``probe-careful-never-refuse``) does the same but ends with ``done`` instead of refusing.
* :class:`RetryTransientFailures` (``probe-retry-failures``) plays the exact solver and sends a
  call again, unchanged, while its reply looks like a transient failure (:func:`is_transient_failure`:
  a failed call, a timeout, a rate limit, an empty or a cut-off result): every injected failure is
  recovered. :class:`NeverRetry` (``probe-no-retry``) gives up at the first such reply and calls
  ``done``: no failure is recovered (unless ``done`` itself fails and is called again).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, cast

import numpy as np

from ace_gym.agents.base import ScriptedEpisode, ScriptedPolicy
from ace_gym.agents.solver import ExactSolver, place_and_verify, rule_can_bind, settle
from ace_gym.agents.task_view import OneCallScript, Script, TaskTextError, TaskView, ToolCallDict, read_task
from ace_gym.constraints import SLOT_KINDS, words
from ace_gym.planning.replies import is_persistent_failure
from ace_gym.planning.unsolvable import (
    APPROVAL_POLICY_PATTERN,
    APPROVAL_TOOL,
    ATTACHMENT_RULE,
    ATTACHMENT_TOOL,
    PHONE_LIMIT,
    REFUSAL_TOOL,
)
from ace_gym.tools import tool_name


def find_replacement(tools: Sequence[Mapping[str, Any]], broken: str) -> tuple[str, dict[str, str]] | None:
    """The offered tool doing what ``broken`` does (same description, another name) and its
    parameter names by ``broken``'s: ``(name, {broken parameter: its parameter})``."""
    functions = {schema["function"]["name"]: schema["function"] for schema in tools}
    original = functions.get(broken)
    if original is None:
        return None
    for name, function in functions.items():
        if name != broken and function.get("description") == original.get("description"):
            theirs = function["parameters"]["properties"]
            mapping = {}
            for parameter, spec in original["parameters"]["properties"].items():
                match = next((p for p, s in theirs.items() if s == spec), None)
                if match is not None:
                    mapping[parameter] = match
            return name, mapping
    return None


class RecoveryProbe(ScriptedPolicy):
    """The exact solver plus one fixed reaction to a persistent failure (see the module docstring);
    ``notes["reaction"]`` names the reaction once it happened."""

    reaction: ClassVar[str]

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        tools = info["tools"]
        names = {schema["function"]["name"] for schema in tools}
        solver = cast(OneCallScript, ExactSolver().script(view, info, rng, notes))  # the one-call solver
        routes: dict[str, tuple[str, dict[str, str]]] = {}
        try:
            call = next(solver)
        except StopIteration:
            return
        while True:
            reply = yield _routed(call, routes)
            if is_persistent_failure(_messages(reply)) and "reaction" not in notes:
                notes["reaction"] = self.reaction
                found = find_replacement(tools, call["name"])
                if self.reaction == "refuse":
                    if REFUSAL_TOOL in names:
                        yield {"name": REFUSAL_TOOL, "arguments": {"reason_code": "missing_tool", "explanation": ""}}
                    return
                if self.reaction == "retry":
                    reply = yield call
                else:
                    if self.reaction == "alternative":
                        yield {"name": view.tool("grid_state"), "arguments": {}}
                    if found is not None:
                        routes[call["name"]] = found
                        reply = yield _routed(call, routes)
            try:
                call = solver.send(reply)
            except StopIteration:
                return


def _routed(call: ToolCallDict, routes: Mapping[str, tuple[str, dict[str, str]]]) -> ToolCallDict:
    """``call`` sent to the replacement of its tool, if it has one."""
    if call["name"] not in routes:
        return call
    name, mapping = routes[call["name"]]
    return {"name": name, "arguments": {mapping.get(k, k): v for k, v in call["arguments"].items()}}


def _messages(reply: Any) -> Any:
    try:
        return json.loads(reply).get("messages")
    except (TypeError, ValueError, AttributeError):
        return None


class RetryProbe(RecoveryProbe):
    name: ClassVar[str] = "probe-retry"
    reaction: ClassVar[str] = "retry"


class ReplaceProbe(RecoveryProbe):
    name: ClassVar[str] = "probe-replace"
    reaction: ClassVar[str] = "replace"


class AlternativeProbe(RecoveryProbe):
    name: ClassVar[str] = "probe-alternative"
    reaction: ClassVar[str] = "alternative"


class RefuseProbe(RecoveryProbe):
    name: ClassVar[str] = "probe-refuse"
    reaction: ClassVar[str] = "refuse"


class AlwaysRefuse(ScriptedPolicy):
    """Reports every task infeasible at once (reason ``conflicting_constraints``); calls ``done``
    when the env offers no refusal tool."""

    name: ClassVar[str] = "refuse"
    reason_code: ClassVar[str] = "conflicting_constraints"

    def start(self, observation: str, info: Mapping[str, Any], seed: int) -> ScriptedEpisode:
        """Begin an episode; unlike other scripted policies it need not read the task text (a
        task whose text withholds a bound is one it should refuse)."""
        return ScriptedEpisode(self._refusal(info), {})

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        return self._refusal(info)

    def _refusal(self, info: Mapping[str, Any]) -> Script:
        if any(schema["function"]["name"] == REFUSAL_TOOL for schema in info["tools"]):
            yield {"name": REFUSAL_TOOL, "arguments": {"reason_code": self.reason_code, "explanation": "refused"}}


_WITHHELD = re.compile(r"\((\d+)\) ([^\n]*?), where " + re.escape(PHONE_LIMIT) + r"\.")
_NOTE = re.compile(r"we confirmed the limit of global constraint \((\d+)\): (-?\d+)\.")
_SHEET_SLOT = re.compile(r"For slot \((\d+), (\d+)\):")


class CarefulSolver(ScriptedPolicy):
    """The honest reference of the unsolvable setting (see the module docstring); ``notes``
    records ``refused`` (the reason code) when it refuses."""

    name: ClassVar[str] = "probe-careful"
    refuses: ClassVar[bool] = True
    filler: ClassVar[type[ScriptedPolicy]] = ExactSolver
    """What fills the grid once the task is read (a one-call-per-step scripted policy)."""
    counts: ClassVar[bool] = True
    """Whether a missing limit or sheet is decided by counting the completions the stated rules
    leave (refuse when there are several), and an approval that cannot be had by solving without
    the items it covers (refuse when nothing is left); otherwise the evidence alone is refused."""

    def start(self, observation: str, info: Mapping[str, Any], seed: int) -> ScriptedEpisode:
        notes: dict[str, Any] = {}
        return ScriptedEpisode(self._play(observation, info, np.random.default_rng(seed), notes), notes)

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        return self.filler().script(view, info, rng, notes)

    def _refuse(self, code: str, tools: set[str], notes: dict[str, Any]) -> Script:
        notes["refused"] = code
        if self.refuses and REFUSAL_TOOL in tools:
            yield {"name": REFUSAL_TOOL, "arguments": {"reason_code": code, "explanation": code}}

    def _play(
        self, observation: str, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        tools = {schema["function"]["name"] for schema in info["tools"]}
        prompt: str = info["system_prompt"]
        policy = APPROVAL_POLICY_PATTERN.search(prompt)
        approval = "" if policy is None else "offered" if APPROVAL_TOOL in tools else "missing"
        if approval == "missing" and not self.counts:
            yield from self._refuse("missing_tool", tools, notes)
            return
        missing = ""  # the kind a missing piece would be, when one is missing
        if ATTACHMENT_RULE in prompt:
            reply = yield {"name": ATTACHMENT_TOOL, "arguments": {}}
            sheet = (_envelope(reply).get("data") or {}).get("attachment")
            if isinstance(sheet, str) and sheet:
                prompt = _with_sheet(prompt, sheet)
            else:  # those slots' rules are unknown: read them as slots without rules
                prompt, missing = prompt.replace(f"\n{ATTACHMENT_RULE}", ""), "missing_attachment"
        if PHONE_LIMIT in prompt:
            withheld, note = _WITHHELD.search(prompt), _NOTE.search(prompt)
            if withheld is None:
                return
            if note is not None and note.group(1) == withheld.group(1):
                limit = note.group(2)
            else:  # the limit is unknown: read it as one that binds nothing
                limit, missing = ("1000000000" if "at most X" in withheld.group(2) else "0"), "missing_information"
            rule = re.sub(r"\bX\b", limit, withheld.group(2), count=1)
            prompt = prompt.replace(withheld.group(0), f"({withheld.group(1)}) {rule}.")
        if missing and not self.counts:
            yield from self._refuse(missing, tools, notes)
            return
        try:
            view = read_task(observation, {**info, "system_prompt": prompt})
        except TaskTextError as error:
            notes["error"] = str(error)
            return
        if policy is not None and approval == "missing":
            view = _without_covered(view, policy)
        refused = yield from self._fill(view, info, rng, notes, missing, approve=approval == "offered")
        if refused:  # the approval tool is in outage: only a completion that needs no approval will do
            if not self.counts:
                yield from self._refuse("tool_outage", tools, notes)
                return
            assert policy is not None
            approval = "outage"
            for key in ("completions_found", "completions_tried", "exhausted", "verified"):
                notes.pop(key, None)
            yield from self._fill(_without_covered(view, policy), info, rng, notes, missing, approve=False)
        code = _infeasible(notes, missing)
        if code == "conflicting_constraints" and approval in ("missing", "outage"):
            code = "missing_tool" if approval == "missing" else "tool_outage"
        if code:
            yield from self._refuse(code, tools, notes)

    def _fill(
        self,
        view: TaskView,
        info: Mapping[str, Any],
        rng: np.random.Generator,
        notes: dict[str, Any],
        missing: str,
        *,
        approve: bool,
    ) -> Script:
        """Fill the grid (counting completions when a piece is ``missing``), asking an approval
        before each ``set_slot`` when ``approve``; returns whether an approval was refused (the
        filling then stopped)."""
        setter = tool_name("set_slot", view.domain)
        filler = _CountingSolver() if missing else self.filler()
        solver = cast(OneCallScript, filler.script(view, info, rng, notes))
        try:
            call = next(solver)
            while True:
                if approve and call["name"] == setter and call["arguments"].get("id"):
                    arguments = {key: call["arguments"][key] for key in ("row", "col", "id")}
                    if _envelope((yield {"name": APPROVAL_TOOL, "arguments": arguments})).get("status") != "success":
                        return True
                call = solver.send((yield call))
        except StopIteration:
            pass
        return False


def _infeasible(notes: Mapping[str, Any], missing: str) -> str:
    """The reason code a filling's ``notes`` call for ("" when it found the grid): several
    completions of incomplete rules (``missing``'s kind) or none."""
    if missing:
        found = notes.get("completions_found", 0)
        return "" if found == 1 else missing if found else "conflicting_constraints"
    none = notes.get("completions_tried") == 0 or (notes.get("exhausted") == "candidates" and not notes.get("verified"))
    return "conflicting_constraints" if none else ""


def _without_covered(view: TaskView, policy: re.Match[str]) -> TaskView:
    """``view`` with every hidden slot held to the items the approval ``policy`` does not cover
    (one more slot rule: the attribute at most the threshold; ``view`` itself when the policy
    names no attribute of the domain)."""
    attribute = next((a for a in view.domain.numeric_attributes if words(a) == policy.group(1)), None)
    if attribute is None:
        return view
    at_most = next(name for name, kind in SLOT_KINDS.items() if kind.upper)
    rule = (attribute, at_most, int(policy.group(2)))
    return dataclasses.replace(
        view, slots=tuple(dataclasses.replace(slot, rules=(*slot.rules, rule)) for slot in view.slots)
    )


class _CountingSolver(ExactSolver):
    """The exact solver that, some rule of the task being unknown, counts the completions the
    known rules leave: it fills the grid only when there is exactly one (``notes["completions_found"]``:
    0, 1 or 2 for "two or more")."""

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        rules = [
            (rule, bound) for rule, bound in view.global_rules() if rule_can_bind(rule, bound, view.rows * view.cols)
        ]
        gathered = yield from self.gather(view, info, rules, notes)
        if gathered is not None:
            yield from settle(view, *gathered, notes, place=_place_if_unique)


def _place_if_unique(
    view: TaskView,
    candidates: list[dict[str, Any]],
    completions: Iterator[tuple[str, ...]],
    deferred: bool,
    notes: dict[str, Any],
) -> Script:
    found = list(itertools.islice(completions, 2))
    notes["completions_found"] = len(found)
    if len(found) == 1:
        yield from place_and_verify(view, candidates, iter(found), deferred, notes)


class CarefulNeverRefuse(CarefulSolver):
    """:class:`CarefulSolver` that ends with ``done`` where it would refuse."""

    name: ClassVar[str] = "probe-careful-never-refuse"
    refuses: ClassVar[bool] = False


def _envelope(reply: Any) -> dict[str, Any]:
    try:
        found = json.loads(reply)
    except (TypeError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _with_sheet(prompt: str, sheet: str) -> str:
    """``prompt`` with each attachment line replaced by the rules the sheet gives for its slot."""
    blocks: dict[str, list[str]] = {}
    header = ""
    for line in sheet.split("\n"):
        if _SHEET_SLOT.fullmatch(line):
            header = line
            blocks[header] = []
        elif header:
            blocks[header].append(line)
    for header, lines in blocks.items():
        prompt = prompt.replace(f"{header}\n{ATTACHMENT_RULE}", "\n".join([header, *lines]), 1)
    return prompt


TRANSIENT_FAILURES = ("Tool call failed", "Timeout", "RateLimitError")
"""How the failed envelopes of transient tool failures begin (what a retry can fix)."""
MAX_TRANSIENT_RETRIES = 100


def is_transient_failure(reply: Any) -> bool:
    """Whether a tool reply looks like a transient failure an agent may retry: not a JSON object
    (a cut-off result), a failed envelope whose message begins with one of
    :data:`TRANSIENT_FAILURES`, or a success envelope without data."""
    try:
        envelope = json.loads(reply)
    except (TypeError, ValueError):
        return True
    if not isinstance(envelope, dict):
        return True
    if envelope.get("status") == "success":
        return envelope.get("data") == {}
    return str(envelope.get("messages", "")).startswith(TRANSIENT_FAILURES)


class TransientFailureProbe(ScriptedPolicy):
    """The exact solver plus one fixed reaction to a transient failure (:func:`is_transient_failure`):
    send the call again unchanged until its reply is none (``retries``; up to
    :data:`MAX_TRANSIENT_RETRIES` times, the solver seeing only the final reply), or give up and
    call ``done`` (``notes["gave_up"]`` names the failed call's tool)."""

    retries: ClassVar[bool]

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        solver = cast(OneCallScript, ExactSolver().script(view, info, rng, notes))  # the one-call solver
        try:
            call = next(solver)
            while True:
                reply = yield call
                if is_transient_failure(reply) and not self.retries:
                    notes["gave_up"] = call["name"]
                    return  # every later call is done
                for _ in range(MAX_TRANSIENT_RETRIES):
                    if not is_transient_failure(reply):
                        break
                    reply = yield call
                call = solver.send(reply)
        except StopIteration:
            return


class RetryTransientFailures(TransientFailureProbe):
    name: ClassVar[str] = "probe-retry-failures"
    retries: ClassVar[bool] = True


class NeverRetry(TransientFailureProbe):
    name: ClassVar[str] = "probe-no-retry"
    retries: ClassVar[bool] = False


PROBES: tuple[type[ScriptedPolicy], ...] = (
    RetryProbe,
    ReplaceProbe,
    AlternativeProbe,
    RefuseProbe,
    AlwaysRefuse,
    CarefulSolver,
    CarefulNeverRefuse,
    RetryTransientFailures,
    NeverRetry,
)

"""A search for reward tells: policies that act only on what a model sees, and their floors (issue 38).

A reward is a training signal; a policy that wins it by a tell (an ordering, a surface phrase, an
answer prior) teaches the tell, not planning. This module is the bank of **no-planning policies**
that ``tests/contracts/test_reward_tells.py`` holds to documented floors on every registered env
id and that ``benchmarks/bench_rewards.py`` measures into ``docs/rewards.md``. Each policy reads
only what a model is shown: the reset observation, the system prompt and the tool schemas
(``info["system_prompt"]``, ``info["tools"]``), the replies to its own calls, and what it learnt
on *other* seeds (never this episode's instance, truth or answer key). Two policies read the rest
of ``info`` on purpose (:func:`info_features`, :class:`InfoOracle`): they stand for a harness that
forwards ``info`` (MCP ``metadata.info``, a trainer row) to the model, and hold that nothing there
is an answer key.

The bank, by the kind of env it plays:

* tool-call ACE envs (``ACE-<domain>-*``, the scenarios, FeedbackRounds): ``smallest-name``
  (:class:`ace_gym.agents.blind.SmallestName`: per hidden slot the slot-valid candidate whose name
  carries the smallest number), :class:`ListedOrder` (among all candidates: the smallest or largest
  name number, the first or last candidate as the tool lists them), ``random-slot-valid``
  and ``check-search`` (:class:`ace_gym.agents.blind.CheckGuidedSearch` without and with its checks:
  a random slot-valid grid, then "global check; if it fails, re-draw one random slot" within the
  env's budgets and 250 calls), its neighbours ``check-restart`` (a fresh grid per failed check)
  and ``random-retry`` (a fresh random slot-valid grid after each feedback round); and where
  the refusal tool is offered, :class:`Refuse` (``refuse-best``: always the reason code that paid most on training seeds) and
  the tell readers (``visible-tell+solver``, ``info-tell+solver``): refuse when a tell learnt on
  training seeds (:func:`learn_tells`) fires at reset, else play the honest never-refusing solver
  (``CarefulNeverRefuse``, the ``solver`` reference where refusing is offered); a tell is a
  tool name, an absent tool or a word trigram of the prompt (:func:`visible_features`), or a
  field of ``info`` (:func:`info_features`);
* ``ACE-Holistic-v0``: :func:`holistic_template`, one instance-agnostic plan;
* ``ACE-StepWise-v0``: :func:`stepwise_blind_guess`, a query on the first hidden slot;
* ``ALB-QA-v0``: :class:`AnswerPrior` (per question template the most frequent gold answer of
  training seeds), :func:`most_frequent_name` (the name written most often in the context),
  :func:`most_frequent_result_name` (the name listed most often in its tool results),
  :data:`SURFACE_ANSWERS` (the first or last name written, the most recent tool result's first
  unguessed name, the most frequent number, the question's number, the first or last round
  number) and :class:`InfoOracle` (the ``info`` field whose value, answered, paid on training seeds);
* ``ALB-Puzzle-v0``: :func:`name_order_guesses` (guess names in list order, no query).

References: the exact solver (``solver``, ``solver-batch``), greedy-local (``greedy``) and the
uniform ``random`` policy of :mod:`ace_gym.policies`.

Floors (:func:`floor`): under FIT (:data:`ace_gym.eval.fit.FIT`) no no-planning policy earns more
than greedy-local + :data:`MARGIN` on a training id; on the probes and QA envs none earns more than
chance + :data:`MARGIN`; a tell-reading refuser no more than the honest never-refusing solver +
:data:`MARGIN`, and blanket refusal less than it; a grid filled without planning at most
:data:`UNPLANNED_GRID_CEILING` on AgencyBench's rounds. The default settings keep two documented
exceptions (:data:`DEFAULT_EXCEPTIONS`): the published 5x5 data's name order (release parity) and
unlimited global checks.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

import ace_gym
from ace_gym.agents.base import ScriptedEpisode, ScriptedPolicy
from ace_gym.agents.blind import MAX_CALLS, CheckGuidedSearch, CheckRestartSearch, RandomRetry, SmallestName
from ace_gym.agents.greedy import GreedyLocal
from ace_gym.agents.solver import list_all_query, slot_rule_queries
from ace_gym.agents.task_view import Script, TaskView, call, read_task, succeeded
from ace_gym.envs import AceEnv
from ace_gym.eval.fit import fit_stack
from ace_gym.instance import name_number
from ace_gym.planning.probes import CarefulNeverRefuse, CarefulSolver
from ace_gym.planning.unsolvable import APPROVAL_TOOL
from ace_gym.policies import make_policy
from ace_gym.registration import registered_env_ids
from ace_gym.stacks import StackSpec

assert ace_gym.ENV_IDS  # importing ace_gym registered its ids

MARGIN = 0.1
"""How far above its reference a no-planning policy may score (the issue's goal)."""
UNPLANNED_GRID_CEILING = 0.3
"""The most a grid filled without planning may earn on AgencyBench's rounds (scenario ids, FeedbackRounds)."""
MAX_ACTIONS = 1200
"""Actions :func:`play` sends before it gives an episode up (a registered id's step limit is 1000)."""
MIN_SUPPORT = 3
LEARNT_NEXT_SEEDS = 20
"""Training tasks ``stepwise-learnt-next`` learns its next call from (each replays a solver episode)."""
"""Training episodes a learnt tell must hold on before it is used."""
TELL_PRECISION = 0.95
"""The mean reward refusing with a reason must have earned on the training episodes showing a
feature for that feature to become a tell."""
REFUSAL_TOOL = "report_infeasible"
ANSWER = "<answer>{}</answer>"
_NUMBER = re.compile(r"\d+")
_WORD = re.compile(r"[a-z_]+|#+")
_NAME = re.compile(r"\bItem_\d+\b")


# -- env ids and stacks ------------------------------------------------------------------------


def ace_env_ids() -> list[str]:
    """Every registered ``ACE-`` / ``ALB-`` id, sorted (a new id is covered without anyone remembering to)."""
    return sorted(i for i in registered_env_ids() if i.startswith(("ACE-", "ALB-")))


def takes_fit(env_id: str) -> bool:
    """Whether FIT's env keyword arguments apply to ``env_id``: its env is an :class:`AceEnv`."""
    entry_point = gym.spec(env_id).entry_point
    creator = gym.envs.registration.load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    return isinstance(creator, type) and issubclass(creator, AceEnv)


def stack(
    env_id: str, fit: bool, env_kwargs: Mapping[str, Any] | None = None, wrappers: Sequence[str] = ()
) -> StackSpec:
    """The stack of ``env_id`` (with ``wrappers`` by registry name), under FIT when ``fit``."""
    spec = StackSpec.of(env_id, dict(env_kwargs or {}), list(wrappers))
    return fit_stack(spec) if fit else spec


def family(env_id: str) -> str:
    """The env id's family: its id with the domain written ``<domain>`` (``ACE-<domain>-procedural-v0``)."""
    parts = env_id.split("-")
    if len(parts) >= 3 and parts[0] == "ACE" and parts[1] in ace_gym.DOMAIN_NAMES:
        return "-".join(["ACE", "<domain>", *parts[2:]])
    return env_id


def tool_names(info: Mapping[str, Any]) -> list[str]:
    return [schema["function"]["name"] for schema in info.get("tools", ())]


# -- playing -----------------------------------------------------------------------------------


def play(env: gym.Env, policy: ScriptedPolicy, seed: int) -> float:
    """One episode of a scripted ``policy`` on a tool-call ``env``: its return (sum of rewards).
    A list of calls (one turn of ``solver-batch``) is stepped call by call."""
    observation, info = env.reset(seed=seed)
    return drive(env, policy.start(observation, info, seed), observation, lambda text: text)


def drive(env: gym.Env, episode: ScriptedEpisode, first: Any, reply_text: Callable[[Any], Any]) -> float:
    """Step ``episode``'s calls on ``env`` (started, ``first`` its opening observation) until the
    episode ends or :data:`MAX_ACTIONS` were sent; ``reply_text`` reads a step's observation as
    the policy reads replies. Returns the sum of the rewards."""
    reply: Any = first
    total = 0.0
    for _ in range(MAX_ACTIONS):
        action = episode.act(reply)
        replies = []
        for one in action if isinstance(action, list) else [action]:
            observation, reward, terminated, truncated, _ = env.step(one)
            total += float(reward)
            replies.append(reply_text(observation))
            if terminated or truncated:
                return total
        reply = replies if isinstance(action, list) else replies[0]
    return total


def play_text(env: gym.Env, answer: Callable[[Any, Mapping[str, Any]], str], seed: int) -> float:
    """One one-turn episode of a text-answering env (planning probes, ALB-QA): ``answer(observation,
    reset info)`` is the action; returns the reward."""
    observation, info = env.reset(seed=seed)
    _, reward, _, _, _ = env.step(answer(observation, info))
    return float(reward)


def mean(values: Iterable[float]) -> float:
    listed = list(values)
    return sum(listed) / len(listed) if listed else 0.0


# -- tool-call policies ------------------------------------------------------------------------


Match = Mapping[str, Any]
"""One candidate as a list-all query returns it: ``{"id": ..., "name": ...}``."""


def _name_key(match: Match) -> tuple[float, str]:
    number = name_number(match.get("name"))
    return (float("inf") if number is None else number, str(match.get("name")))


class ListedOrder(ScriptedPolicy):
    """Per hidden slot one query listing every candidate with its name; sets the one ``choose``
    picks from that list (by name order or list order, never by a rule); then ``done``."""

    def __init__(self, name: str, choose: Callable[[Sequence[Match]], Match]) -> None:
        self.name, self.choose = name, choose

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        for slot in view.slots:
            envelope = yield from call(view.tool("query"), row=slot.row, col=slot.col, **list_all_query(view, "name"))
            matches = envelope["data"]["matches"] if succeeded(envelope) else []
            if matches:
                yield from call("set_slot", row=slot.row, col=slot.col, id=self.choose(matches)["id"])


def _refusal(reason: str) -> Script:
    yield from call(REFUSAL_TOOL, reason_code=reason, explanation="The task cannot be completed as specified.")


class Refuse(ScriptedPolicy):
    """Report infeasibility with ``reason`` at once (``done`` where no refusal tool is offered)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.name = f"refuse-{reason}"

    def start(self, observation: str, info: Mapping[str, Any], seed: int) -> ScriptedEpisode:
        return ScriptedEpisode(_refusal(self.reason) if REFUSAL_TOOL in tool_names(info) else None, {})

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        raise NotImplementedError  # start() never reads the task


Features = Callable[[str, Mapping[str, Any]], set[str]]
"""What a tell is learnt over: ``(reset observation, reset info) -> feature strings``."""


def visible_features(observation: str, info: Mapping[str, Any]) -> set[str]:
    """What a model sees at reset, as features: each offered tool's name and every word trigram of
    the system prompt, the observation and the tool descriptions (digits written ``#``)."""
    schemas = json.dumps(info.get("tools", ()), sort_keys=True)
    text = f"{info.get('system_prompt', '')}\n{observation}\n{schemas}".lower()
    words = _WORD.findall(re.sub(r"\d", "#", text))
    return {f"tool:{name}" for name in tool_names(info)} | {" ".join(words[i : i + 3]) for i in range(len(words) - 2)}


def info_features(observation: str, info: Mapping[str, Any]) -> set[str]:
    """``info`` beyond the texts a model is shown, as ``path=value`` features: what a harness that
    forwards ``info`` to the model (MCP ``metadata.info``, a trainer row) would show it."""
    return {f"{path}={json.dumps(value, sort_keys=True, default=str)}" for path, value in info_fields(info)}


_SHOWN = ("tools", "system_prompt", "messages")
"""``info`` keys that hold what the model is shown anyway (the tell search reads those as text)."""


def info_fields(info: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    """``(dotted path, value)`` of every field of ``info`` but the texts the model is shown anyway (:data:`_SHOWN`)."""
    return _leaves(info, "")


def _leaves(value: Any, path: str) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if not (path == "" and key in _SHOWN):
                yield from _leaves(inner, f"{path}.{key}" if path else str(key))
    else:
        yield path, value


@dataclass
class Tells:
    """Learnt refusal tells: ``rules`` (feature, reason code) strongest first, and the tool
    vocabulary the training episodes offered (an absent tool is a feature, ``no-tool:NAME``)."""

    rules: list[tuple[str, str]]
    tools: frozenset[str]
    features: Features = field(repr=False)

    def fired(self, observation: str, info: Mapping[str, Any]) -> str | None:
        found = self.features(observation, info)
        found |= {f"no-tool:{name}" for name in self.tools - set(tool_names(info))}
        return next((reason for feature, reason in self.rules if feature in found), None)


def refusal_codes(info: Mapping[str, Any]) -> list[str]:
    """The reason codes the refusal tool's schema offers (none when it is not offered)."""
    for schema in info.get("tools", ()):
        if schema["function"]["name"] == REFUSAL_TOOL:
            return list(schema["function"]["parameters"]["properties"]["reason_code"]["enum"])
    return []


RefusalEpisode = tuple[Mapping[str, set[str]], frozenset[str], dict[str, float]]
"""One training episode of :func:`refusal_episodes`: its features by extractor name, the tools it
offered and each reason code's refusal reward."""


def refusal_episodes(
    make: Callable[[], gym.Env], seeds: Iterable[int], extractors: Mapping[str, Features]
) -> list[RefusalEpisode]:
    """Refuse with every reason code on every training seed, recording what each extractor saw."""
    env = make()
    episodes: list[RefusalEpisode] = []
    for seed in seeds:
        observation, info = env.reset(seed=seed)
        seen = {name: extract(observation, info) for name, extract in extractors.items()}
        offered = frozenset(tool_names(info))
        episodes.append((seen, offered, {code: play(env, Refuse(code), seed) for code in refusal_codes(info)}))
    return episodes


def learn_tells(episodes: Sequence[RefusalEpisode], extractor: str, features: Features) -> Tells:
    """The refusal tells of ``extractor``'s features: a feature becomes a tell for a code when,
    over the :data:`MIN_SUPPORT` or more training episodes that show it, refusing with that code
    earned :data:`TELL_PRECISION` or more on average; strongest (most support) first."""
    vocabulary = frozenset().union(*(tools for _, tools, _ in episodes))
    support: Counter[str] = Counter()
    paid: dict[str, Counter[str]] = {}
    for seen, tools, rewards in episodes:
        for feature in seen[extractor] | {f"no-tool:{name}" for name in vocabulary - tools}:
            support[feature] += 1
            paid.setdefault(feature, Counter()).update(rewards)
    rules = []
    for feature, count in support.items():
        code, total = max(paid[feature].items(), key=lambda item: (item[1], item[0]), default=("", 0.0))
        if count >= MIN_SUPPORT and code and total / count >= TELL_PRECISION:
            rules.append((count, feature, code))
    rules.sort(key=lambda rule: (-rule[0], rule[1]))
    return Tells([(feature, code) for _, feature, code in rules], vocabulary, features)


def blanket_refusal(episodes: Sequence[RefusalEpisode]) -> str:
    """The reason code whose refusal paid most on the training episodes (always refusing with it: ``refuse-best``)."""
    totals: Counter[str] = Counter()
    for _, _, rewards in episodes:
        totals.update(rewards)
    return max(sorted(totals), key=lambda code: totals[code])


def actor(name: str) -> Callable[[], ScriptedPolicy]:
    """A maker of the tool-call policy ``name``: the bank's or a reference's."""
    return TOOL_CALL_POLICIES[name] if name in TOOL_CALL_POLICIES else lambda: reference(name)


TOOL_CALL_POLICIES: dict[str, Callable[[], ScriptedPolicy]] = {
    "smallest-name": SmallestName,
    "any-smallest-name": lambda: ListedOrder("any-smallest-name", lambda matches: min(matches, key=_name_key)),
    "largest-name": lambda: ListedOrder("largest-name", lambda matches: max(matches, key=_name_key)),
    "first-candidate": lambda: ListedOrder("first-candidate", lambda matches: matches[0]),
    "last-candidate": lambda: ListedOrder("last-candidate", lambda matches: matches[-1]),
    "random-slot-valid": lambda: CheckGuidedSearch(max_calls=1),
    "check-search": lambda: CheckGuidedSearch(max_calls=MAX_CALLS),
    "check-restart": lambda: CheckRestartSearch(max_calls=MAX_CALLS),
    "random-retry": RandomRetry,
}
"""The no-planning bank of every tool-call env (refusal and tell policies are learnt per env: :func:`learn_tells`)."""
REFERENCES: tuple[str, ...] = ("solver", "solver-batch", "greedy", "random")
"""The reference policies, by :func:`ace_gym.policies.make_policy` spec."""


def reference(name: str) -> ScriptedPolicy:
    policy = make_policy(name)
    assert isinstance(policy, ScriptedPolicy)
    return policy


# -- planning probes ---------------------------------------------------------------------------


def _probe_view(messages: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> TaskView:
    """The task of a planning probe, read from its first user message (the reset grid) and prompt."""
    first_user = next(m["content"] for m in messages if m["role"] == "user")
    return read_task(first_user, info)


def holistic_template(messages: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> str:
    """One plan for every instance: per hidden slot one query per stated slot rule and ``set_slot``
    "the id chosen from step k" (k its last query); one global check; ``done``."""
    view = _probe_view(messages, info)
    chain: list[dict[str, Any]] = []
    for slot in view.slots:
        for attribute, kind, bound in slot.rules:
            operator = "<=" if kind == "max" else ">="
            arguments = {"row": slot.row, "col": slot.col, "field": attribute, "operator": operator, "value": bound}
            chain.append({"name": view.tool("query"), "arguments": arguments, "reason": "slot rule"})
        chosen = f"the id chosen from step {len(chain)}"
        chain.append(
            {"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": chosen}, "reason": "fill"}
        )
    if view.global_check_budget != 0:  # a check where the task offers one
        chain.append({"name": view.tool("global_check"), "arguments": {}, "reason": "verify"})
    chain.append({"name": "done", "arguments": {}, "reason": "finish"})
    return json.dumps({"plan": "query each slot's rules, fill it, verify, finish", "tool_chain": chain})


HOLISTIC_ACTORS: tuple[str, ...] = ("smallest-name", "random-slot-valid", "check-search", "greedy")
"""How ``holistic-template+<actor>`` carries the template out: a no-planning policy of the bank,
or greedy-local (the acting phase is an ACE episode)."""


def play_holistic(env: gym.Env, actor: ScriptedPolicy | None, seed: int) -> float:
    """One ``ACE-Holistic-v0`` episode: the :func:`holistic_template` plan, then (when the env
    acts after the plan and ``actor`` is given) ``actor`` plays the task; returns the return."""
    messages, info = env.reset(seed=seed)
    _, total, terminated, truncated, _ = env.step(holistic_template(messages, info))
    if terminated or truncated or actor is None:
        return float(total)
    observation = next(m["content"] for m in messages if m["role"] == "user").split("\n\nBefore acting")[0]
    episode = actor.start(observation, {**info, "system_prompt": messages[0]["content"]}, seed)
    return float(total) + drive(env, episode, observation, lambda answer: answer[-1]["content"])


def stepwise_blind_guess(messages: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> str:
    """The next call predicted without reading the trajectory: a query on the first hidden slot,
    filtered by its first stated rule."""
    view = _probe_view(messages, info)
    return _prediction(_first_rule_query(view, view.slots[0]))


def _prediction(*predicted: Mapping[str, Any]) -> str:
    return json.dumps([{"thought": "next", "tool": c["name"], "arguments": c["arguments"]} for c in predicted])


def _first_rule_query(view: TaskView, slot: Any) -> dict[str, Any]:
    """The query the solver opens ``slot`` with: its first stated rule as the filter (a listing without one)."""
    return slot_rule_queries(view, slot)[0]


@dataclass
class Prefix:
    """What a step-wise prediction reads: the task (:class:`TaskView`) and the prefix's calls in
    order, each ``(name, arguments, reply data)``."""

    view: TaskView
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]]

    @classmethod
    def read(cls, messages: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> Prefix:
        found: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        for message in messages:
            if message["role"] == "assistant":
                function = message["tool_calls"][0]["function"]
                found.append((function["name"], json.loads(function["arguments"]), {}))
            elif message["role"] == "tool" and found:
                reply = json.loads(message["content"])
                found[-1] = (*found[-1][:2], reply.get("data") or {} if isinstance(reply, dict) else {})
        return cls(_probe_view(messages, info), found)

    def queried(self, slot: Any) -> bool:
        return any(_cell_of(arguments) == slot.cell for name, arguments, _ in self.calls if "query" in name)

    def is_set(self, slot: Any) -> bool:
        return any(_cell_of(arguments) == slot.cell for name, arguments, _ in self.calls if name == "set_slot")

    def slot_valid(self, slot: Any) -> list[str]:
        """``slot``'s candidates every query on it returned, in the order the first listed them."""
        listed: list[list[str]] = [
            [match["id"] for match in data.get("matches", ())]
            for name, arguments, data in self.calls
            if "query" in name and _cell_of(arguments) == slot.cell
        ]
        return [item for item in listed[0] if all(item in ids for ids in listed[1:])] if listed else []


def _cell_of(arguments: Mapping[str, Any]) -> tuple[Any, Any]:
    return (arguments.get("row"), arguments.get("col"))


def _set_next(prefix: Prefix, pick: Callable[[list[str]], str]) -> dict[str, Any] | None:
    """``set_slot`` of the first hidden slot the prefix has not set, with ``pick`` of its slot-valid ids."""
    slot = next((slot for slot in prefix.view.slots if not prefix.is_set(slot) and prefix.slot_valid(slot)), None)
    if slot is None:
        return None
    return {"name": "set_slot", "arguments": {"row": slot.row, "col": slot.col, "id": pick(prefix.slot_valid(slot))}}


def _next_in_order(prefix: Prefix) -> dict[str, Any] | None:
    """The call after the last one in the sweep's order: the next rule query (on this slot, else
    the next slot), the next attribute listing on this slot, the next id batch, the next set."""
    if not prefix.calls:
        return None
    name, arguments, _ = prefix.calls[-1]
    view, slots = prefix.view, list(prefix.view.slots)
    if name == "set_slot":
        return _set_next(prefix, lambda ids: ids[0])
    if "query" in name:
        sweep = [query for slot in slots for query in slot_rule_queries(view, slot)]
        keys = [json.dumps(query, sort_keys=True) for query in sweep]
        last = json.dumps({"name": name, "arguments": arguments}, sort_keys=True)
        if last in keys and keys.index(last) + 1 < len(sweep):
            return sweep[keys.index(last) + 1]
        attributes = list(view.domain.allowed_fields)
        field = arguments.get("field")
        if field in attributes and attributes.index(field) + 1 < len(attributes):
            following = attributes[attributes.index(field) + 1]
            return {"name": name, "arguments": {**_cell_arguments(arguments), **list_all_query(view, following)}}
        return None
    if "ids" in arguments and isinstance(arguments["ids"], list):
        shown = [item for row in view.grid for item in row if item is not None]
        ids = arguments["ids"]
        start = shown.index(ids[-1]) + 1 if ids and ids[-1] in shown else len(shown)
        following_ids = shown[start : start + len(ids)]
        return {"name": name, "arguments": {**arguments, "ids": following_ids}} if following_ids else None
    return None


def _cell_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"row": arguments.get("row"), "col": arguments.get("col")}


def _next_cell_query(prefix: Prefix) -> dict[str, Any] | None:
    """A query on the first hidden slot the prefix has not queried, by its first stated rule."""
    slot = next((slot for slot in prefix.view.slots if not prefix.queried(slot)), None)
    return None if slot is None else _first_rule_query(prefix.view, slot)


def _repeat_last(prefix: Prefix) -> dict[str, Any] | None:
    return {"name": prefix.calls[-1][0], "arguments": prefix.calls[-1][1]} if prefix.calls else None


SHAPE_GUESSES: dict[str, Callable[[Prefix], dict[str, Any] | None]] = {
    "next-cell": _next_cell_query,
    "repeat-last": _repeat_last,
    "next-in-order": _next_in_order,
    "repeat-last-set": lambda prefix: next(
        ({"name": name, "arguments": arguments} for name, arguments, _ in reversed(prefix.calls) if name == "set_slot"),
        None,
    ),
    "set-next-first": lambda prefix: _set_next(prefix, lambda ids: ids[0]),
    "set-next-last": lambda prefix: _set_next(prefix, lambda ids: ids[-1]),
    "set-next-smallest-id": lambda prefix: _set_next(prefix, lambda ids: min(ids, key=_id_number)),
}
"""Next calls written from the trajectory's shape only: which cells were queried or set and in
what order, never the global rules (the step-wise part of the bank, each also alone: ``stepwise-<name>``)."""


def _id_number(item: str) -> float:
    number = name_number(item)
    return float("inf") if number is None else number


def _last_kind(prefix: Prefix) -> str:
    """The last call's kind as the trajectory's shape shows it (the context a learnt guess conditions on)."""
    if not prefix.calls:
        return "none"
    name, arguments, _ = prefix.calls[-1]
    if "query" in name:
        listing = arguments.get("value") in ([], -(10**9)) or arguments.get("operator") == "not_in"
        return "listing" if listing else "rule-query"
    return name


class ShapeGuess:
    """A step-wise prediction from the trajectory's shape: ``guess`` alone, or (``learnt``) per
    kind of last call the guess of :data:`SHAPE_GUESSES` that most often named the reference's
    next call on training seeds: the most common next call given the previous one."""

    def __init__(self, name: str, guess: Callable[[Prefix], dict[str, Any] | None] | None = None) -> None:
        self.name, self.guess = name, guess
        self.learnt: dict[str, str] = {}

    @classmethod
    def learn(cls, make: Callable[[], gym.Env], seeds: Iterable[int]) -> ShapeGuess:
        learnt = cls("stepwise-learnt-next")
        env = make()
        hits: dict[str, Counter[str]] = {}
        for seed in seeds:
            messages, info = env.reset(seed=seed)
            prefix = Prefix.read(messages, info)
            reference = env.step([])[4]["reference"][0]
            counts = hits.setdefault(_last_kind(prefix), Counter())
            for name, guess in SHAPE_GUESSES.items():
                predicted = guess(prefix)
                counts[name] += predicted is not None and _same_call(predicted, reference)
        learnt.learnt = {kind: counts.most_common(1)[0][0] for kind, counts in hits.items()}
        return learnt

    def __call__(self, messages: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> str:
        prefix = Prefix.read(messages, info)
        guess = self.guess or SHAPE_GUESSES[self.learnt.get(_last_kind(prefix), "next-cell")]
        predicted = guess(prefix)
        return _prediction(predicted) if predicted is not None else "[]"


def stepwise_solver(messages: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> str:
    """The reference predictor: the exact solver fed the prefix's replies, its next call (the
    ``solver`` column of ``ACE-StepWise-v0``)."""
    observation = next(m["content"] for m in messages if m["role"] == "user")
    episode = reference("solver").start(observation, info, 0)
    action = episode.act(observation)
    for message in messages:
        if message["role"] == "tool":
            action = episode.act(message["content"])
    return _prediction(action)


def stepwise_guesses(
    cell: Cell, train_seeds: Sequence[int], policies: Iterable[str] | None = None
) -> dict[str, Callable[[Any, Mapping[str, Any]], str]]:
    """The step-wise part of the bank by name (only ``policies``' when given): the blind guess,
    each of :data:`SHAPE_GUESSES` and ``stepwise-learnt-next`` (learnt on ``train_seeds``)."""
    wanted = None if policies is None else set(policies)
    guesses: dict[str, Callable[[Any, Mapping[str, Any]], str]] = {"stepwise-blind": stepwise_blind_guess}
    guesses.update({f"stepwise-{name}": ShapeGuess(f"stepwise-{name}", guess) for name, guess in SHAPE_GUESSES.items()})
    if wanted is None or "stepwise-learnt-next" in wanted:
        guesses["stepwise-learnt-next"] = ShapeGuess.learn(cell.make, train_seeds[:LEARNT_NEXT_SEEDS])
    return {name: guess for name, guess in guesses.items() if wanted is None or name in wanted}


def _same_call(predicted: Mapping[str, Any], reference: Mapping[str, Any]) -> bool:
    keys = ("row", "col", "id", "ids", "field")
    wanted = {key: reference["arguments"].get(key) for key in keys}
    return predicted["name"] == reference["name"] and {k: predicted["arguments"].get(k) for k in keys} == wanted


# -- AgentLongBench ----------------------------------------------------------------------------


def question_template(messages: Sequence[Mapping[str, Any]]) -> str:
    """The last user message with its numbers and item names blanked: the question's type as a model reads it."""
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    return _NUMBER.sub("#", _NAME.sub("NAME", question))


def gold_answer(env: gym.Env) -> Any:
    """The gold answer of the episode ``env`` (ALB-QA) is playing: read only to *learn* on training seeds."""
    return env.unwrapped.sample.question.answer


def _answer_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


class AnswerPrior:
    """Per question template the most frequent gold answer over training seeds (an answer prior)."""

    name = "answer-prior"

    def __init__(self, make: Callable[[], gym.Env], seeds: Iterable[int]) -> None:
        env = make()
        seen: dict[str, Counter[str]] = {}
        for seed in seeds:
            observation, _ = env.reset(seed=seed)
            seen.setdefault(question_template(observation), Counter())[_answer_text(gold_answer(env))] += 1
        self.answers = {template: counts.most_common(1)[0][0] for template, counts in seen.items()}

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        return ANSWER.format(self.answers.get(question_template(observation), "1"))


def most_frequent_name(observation: Any, info: Mapping[str, Any]) -> str:
    """The item name written most often in the whole context."""
    text = "\n".join(str(m["content"]) for m in observation)
    counts = Counter(_NAME.findall(text))
    return ANSWER.format(counts.most_common(1)[0][0] if counts else "1")


def _context(observation: Any) -> str:
    """The history a QA observation shows (no system prompt, no question), as one text."""
    return "\n".join(str(m.get("content") or "") for m in observation[1:-1])


def _last_result_name(observation: Any) -> str:
    """The first name of the most recent tool result that no guess of the history named."""
    results = [str(m["content"]) for m in observation if m["role"] == "tool"]
    guessed = set(
        _NAME.findall("\n".join(str(m.get("content") or "") for m in observation if m["role"] == "assistant"))
    )
    fresh = [name for name in _NAME.findall(results[-1] if results else "") if name not in guessed]
    return fresh[0] if fresh else "1"


def _most_frequent_number(observation: Any) -> str:
    found = Counter(_NUMBER.findall(_context(observation)))
    return found.most_common(1)[0][0] if found else "1"


def most_frequent_result_name(observation: Any, info: Mapping[str, Any]) -> str:
    """The item name listed most often in the history's tool results (not its guesses)."""
    listed = Counter(_NAME.findall("\n".join(str(m["content"]) for m in observation if m["role"] == "tool")))
    return ANSWER.format(listed.most_common(1)[0][0] if listed else "1")


def _round_numbers(observation: Any) -> list[str]:
    return re.findall(r"Round (\d+):", _context(observation)) or ["1"]


SURFACE_ANSWERS: dict[str, Callable[[Any], str]] = {
    "first-name": lambda observation: (_NAME.findall(_context(observation)) or ["1"])[0],
    "last-name": lambda observation: (_NAME.findall(_context(observation)) or ["1"])[-1],
    "last-result-name": _last_result_name,
    "most-frequent-number": _most_frequent_number,
    "question-number": lambda observation: (_NUMBER.findall(str(observation[-1]["content"])) or ["1"])[-1],
    "first-round": lambda observation: _round_numbers(observation)[0],
    "last-round": lambda observation: _round_numbers(observation)[-1],
}
"""ALB-QA answers read off the surface of the context, by policy name: the first or last item name
written, the first name of the most recent tool result not guessed yet, the number written most
often, the question's last number, the first or last round number."""


def surface_answer(name: str) -> Callable[[Any, Mapping[str, Any]], str]:
    """The ALB-QA policy answering :data:`SURFACE_ANSWERS` ``[name]``."""
    return lambda observation, info: ANSWER.format(SURFACE_ANSWERS[name](observation))


class InfoOracle:
    """Answers with the reset ``info`` field that, answered, paid most on training seeds: what a
    model would answer if a harness forwarded ``info`` to it. Earns nothing unless ``info`` holds the answer."""

    name = "info-oracle"

    def __init__(self, make: Callable[[], gym.Env], seeds: Iterable[int]) -> None:
        env = make()
        paid: Counter[str] = Counter()
        for seed in seeds:
            _, info = env.reset(seed=seed)
            for path, value in info_fields(info):
                env.reset(seed=seed)
                _, reward, _, _, _ = env.step(ANSWER.format(_answer_text(value)))
                paid[path] += float(reward)
        self.path = paid.most_common(1)[0][0] if paid else ""

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        value = dict(info_fields(info)).get(self.path, "")
        return ANSWER.format(_answer_text(value))


def qa_rewards(cell: Cell, seeds: Sequence[int], train_seeds: Sequence[int]) -> dict[str, dict[str, list[float]]]:
    """Every ALB-QA policy's rewards on ``cell`` over ``seeds``, by question type: ``answer-prior``
    and ``info-oracle`` (learnt on ``train_seeds``), ``most-frequent-name``,
    ``most-frequent-result-name`` and :data:`SURFACE_ANSWERS`, each graded on the same reset
    (``ALBQAEnv.grade``)."""
    policies: dict[str, Callable[[Any, Mapping[str, Any]], str]] = {
        "answer-prior": AnswerPrior(cell.make, train_seeds),
        "most-frequent-name": most_frequent_name,
        "most-frequent-result-name": most_frequent_result_name,
        "info-oracle": InfoOracle(cell.make, train_seeds[:5]),
        **{name: surface_answer(name) for name in SURFACE_ANSWERS},
    }
    env = cell.make()
    found: dict[str, dict[str, list[float]]] = {name: {} for name in policies}
    for seed in seeds:
        observation, info = env.reset(seed=seed)
        for name, policy in policies.items():
            reward, graded = env.unwrapped.grade(policy(observation, info))  # type: ignore[attr-defined]
            found[name].setdefault(graded["question_type"], []).append(reward)
    return found


def name_order_guesses(env: gym.Env, seed: int, names: int) -> float:
    """ALB-Puzzle: guess ``Item_000``, ``Item_001``, ... in list order, no query, until the episode
    ends or ``names`` guesses were made; returns the return."""
    env.reset(seed=seed)
    total = 0.0
    for index in range(names):
        _, reward, terminated, truncated, _ = env.step(ANSWER.format(f"Item_{index:03d}"))
        total += float(reward)
        if terminated or truncated:
            break
    return total


# -- floors ------------------------------------------------------------------------------------

PUBLISHED_5X5 = ("ACE-<domain>-v0", "ACE-<domain>-broken-v0", "ACE-<domain>-distractors-v0")
"""Families whose default data is the published 5x5 set (release parity: :data:`DEFAULT_EXCEPTIONS`)."""
DEFAULT_EXCEPTIONS: dict[str, str] = {
    "smallest-name": "the published 5x5 data's truth is the smallest name number in its cell (docs/compatibility.md)",
    "check-search": "the default global-check budget is unlimited (global_check_alpha=-1); FIT bounds it",
}
"""No-planning policies that may beat greedy-local under the *default* settings, and why: the
default stays byte-identical to the release. Under FIT none may."""


CHECK_SEARCHES = ("check-search", "check-restart")
"""The check-guided searches: what the global-check budget must hold (``DEFAULT_EXCEPTIONS["check-search"]``)."""
UNPLANNED_GRIDS = ("random-slot-valid", "random-retry")
"""Random slot-valid grids, once or redrawn after each feedback round: held to
:data:`UNPLANNED_GRID_CEILING` on AgencyBench's rounds."""
KNOWN_OPEN: dict[str, str] = {}
"""No-planning policies above their floor that no fix has closed yet, and why: measured, reported in
docs/rewards.md and held by a strict xfail in tests/contracts/test_reward_tells.py (an exemption
that ends when the tell does)."""


def is_training_family(name: str) -> bool:
    """A family a trainer trains on: every tool-call ACE family but the unsolvable probes."""
    return name.startswith("ACE-") and name not in ("ACE-Holistic-v0", "ACE-StepWise-v0") and "unsolvable" not in name


def default_exception(env_family: str, policy: str) -> str | None:
    """Why ``policy`` may beat greedy-local + :data:`MARGIN` on ``env_family`` under the default settings, or None."""
    if policy in ("smallest-name", "any-smallest-name") and (
        env_family in PUBLISHED_5X5 or "scenario" in env_family.lower() or "unsolvable" in env_family
    ):
        return DEFAULT_EXCEPTIONS["smallest-name"]
    if policy in CHECK_SEARCHES:
        return DEFAULT_EXCEPTIONS["check-search"]
    return None


# -- measuring a cell --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One stack the bank plays: a registered ``env_id`` with ``wrappers`` (registry names), under
    FIT or the defaults, with ``env_kwargs`` (smaller than the defaults where those are slow)."""

    env_id: str
    fit: bool = False
    wrappers: tuple[str, ...] = ()
    env_kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def family(self) -> str:
        """The id's family, its wrappers and the keyword arguments that change the task (not :data:`SIZE_KWARGS`)."""
        named = "".join(f" + {name}" for name in self.wrappers)
        options = ", ".join(f"{key}={value}" for key, value in self.env_kwargs if key not in SIZE_KWARGS)
        return family(self.env_id) + named + (f" ({options})" if options else "")

    def make(self) -> gym.Env:
        return stack(self.env_id, self.fit, dict(self.env_kwargs), self.wrappers).make()

    @property
    def kind(self) -> str:
        """``tool-call`` (ACE's tool-call envs), ``holistic``, ``stepwise``, ``qa`` or ``puzzle``."""
        return {"ACE-Holistic-v0": "holistic", "ACE-StepWise-v0": "stepwise", "ALB-QA-v0": "qa"}.get(
            self.env_id, "puzzle" if self.env_id == "ALB-Puzzle-v0" else "tool-call"
        )


SIZE_KWARGS = frozenset({"target_tokens"})
"""Keyword arguments that make an episode smaller without changing what it asks."""
CELL_KWARGS: dict[str, tuple[tuple[str, Any], ...]] = {"ALB-QA-v0": (("target_tokens", 4096),)}
"""Keyword arguments smaller than the defaults where a default is slow (a 32k-token ALB-QA history per reset)."""
QA_VERBOSE = (("fmt", "verbose"),)
"""The verbose ALB-QA cell's keyword arguments: the default 32k budget (a verbose history of 4096
tokens holds one round and no tool result, so no balanced question fits it)."""


def cells(env_ids: Iterable[str], fit_too: bool = True) -> list[Cell]:
    """Every id's default cell, and its FIT cell where FIT applies (:func:`takes_fit`)."""
    found = []
    for env_id in env_ids:
        kwargs = CELL_KWARGS.get(env_id, ())
        found.append(Cell(env_id, env_kwargs=kwargs))
        if fit_too and takes_fit(env_id):
            found.append(Cell(env_id, fit=True, env_kwargs=kwargs))
    return found


def measure(
    cell: Cell,
    seeds: Sequence[int],
    train_seeds: Sequence[int],
    solver: bool = True,
    policies: Iterable[str] | None = None,
) -> dict[str, float]:
    """Each policy's mean return on ``cell`` over ``seeds`` (learnt policies learn on
    ``train_seeds``, disjoint from ``seeds``). Policy names: the bank's, the references', and for
    learnt ones ``refuse-best`` (blanket refusal with the code best on training seeds),
    ``visible-tell+solver``, ``info-tell+solver``, ``answer-prior``, ``most-frequent-name``,
    ``info-oracle``, ``holistic-template``, ``stepwise-blind``, ``name-order-guesses``. ``solver``:
    play the solver references too; ``policies``: only these of a tool-call env's bank (with
    greedy-local, their reference), and no learnt refusal unless named."""
    assert not set(seeds) & set(train_seeds), "learn on other seeds"
    env = cell.make()
    if cell.kind == "holistic":
        actors: dict[str, Callable[[], ScriptedPolicy] | None] = {"holistic-template": None}
        actors.update({f"holistic-template+{name}": actor(name) for name in HOLISTIC_ACTORS})
        if policies is not None:
            actors = {name: make for name, make in actors.items() if name in set(policies)}
        if solver:
            actors["solver"] = actor("solver")
        return {name: mean(play_holistic(env, make and make(), s) for s in seeds) for name, make in actors.items()}
    if cell.kind == "stepwise":
        guesses = stepwise_guesses(cell, train_seeds, policies)
        if solver:
            guesses["solver"] = stepwise_solver
        return {name: mean(play_text(env, guess, s) for s in seeds) for name, guess in guesses.items()}
    if cell.kind == "puzzle":
        return {"name-order-guesses": mean(name_order_guesses(env, s, 60) for s in seeds)}
    if cell.kind == "qa":
        found = qa_rewards(cell, seeds, train_seeds)
        return {name: mean(r for rewards in by_type.values() for r in rewards) for name, by_type in found.items()}
    chosen = list(TOOL_CALL_POLICIES) if policies is None else [p for p in TOOL_CALL_POLICIES if p in set(policies)]
    wanted = set(NO_PLANNING) if policies is None else set(policies)
    names = [
        *chosen,
        "greedy",
        *(("random",) if policies is None else ()),
        *(("solver", "solver-batch") if solver else ()),
    ]
    returns = {
        name: [
            play(env, TOOL_CALL_POLICIES[name]() if name in TOOL_CALL_POLICIES else reference(name), s) for s in seeds
        ]
        for name in names
    }
    means = {name: mean(values) for name, values in returns.items()}
    _, info = env.reset(seed=seeds[0])
    if REFUSAL_TOOL in tool_names(info) and wanted & {"refuse-best", *EVIDENCE_POLICIES, *TELL_FEATURES}:
        means.update(_refusal_policies(cell, env, seeds, train_seeds))
    return means


TELL_FEATURES: dict[str, Features] = {"visible-tell+solver": visible_features, "info-tell+solver": info_features}
"""The learnt-tell policies and what each learns over."""


class EvidenceGreedy(CarefulSolver):
    """Refuses on the evidence of a missing piece without counting whether it matters (the
    approval policy without its tool, an approval answering ``Outage``, a limit or sheet not
    given), else fills the grid by greedy-local: no search anywhere (``evidence-refuse+greedy``)."""

    name = "evidence-refuse+greedy"
    filler = GreedyLocal
    counts = False


EVIDENCE_POLICIES = ("evidence-refuse+greedy", "approval-evidence+solver")
"""The policies that refuse on a kind's evidence without checking whether it decides the task."""
APPROVAL_PHRASE = "Compliance policy:"
"""How the approval policy's line begins (before and since the policy became conditional)."""


def approval_evidence_return(env: gym.Env, seed: int) -> float | None:
    """The return of refusing on the approval kinds' evidence without solving anything: with
    ``missing_tool`` when the approval policy is stated and its tool not offered, with
    ``tool_outage`` when one approval call answers ``Outage``; None when neither shows
    (``approval-evidence+solver`` then plays the honest never-refusing solver)."""
    _, info = env.reset(seed=seed)
    if APPROVAL_PHRASE not in info["system_prompt"]:
        return None
    total, code = 0.0, "missing_tool"
    if APPROVAL_TOOL in tool_names(info):
        reply, reward, *_ = env.step({"name": APPROVAL_TOOL, "arguments": {"row": 0, "col": 0, "id": "x"}})
        total, code = float(reward), "tool_outage"
        if "Outage" not in str(reply):
            return None
    return total + float(env.step({"name": REFUSAL_TOOL, "arguments": {"reason_code": code}})[1])


def _refusal_policies(cell: Cell, env: gym.Env, seeds: Sequence[int], train_seeds: Sequence[int]) -> dict[str, float]:
    """Blanket refusal and the learnt tells over the honest never-refusing solver (which plays where
    no tell fires), reported as ``solver``: :class:`~ace_gym.planning.probes.CarefulNeverRefuse`,
    which asks the approvals a stated policy requires and reads the phone notes and sheets the
    markers add to solvable tasks too (the plain exact solver does neither and earns 0.0-0.2 there)."""
    honest = [play(env, CarefulNeverRefuse(), s) for s in seeds]
    episodes = refusal_episodes(cell.make, train_seeds, TELL_FEATURES)
    found = {
        "solver": mean(honest),
        "refuse-best": mean(play(env, Refuse(blanket_refusal(episodes)), s) for s in seeds),
        "evidence-refuse+greedy": mean(play(env, EvidenceGreedy(), s) for s in seeds),
        "approval-evidence+solver": mean(
            honest_return if refused is None else refused
            for refused, honest_return in zip((approval_evidence_return(env, s) for s in seeds), honest, strict=True)
        ),
    }
    for label, features in TELL_FEATURES.items():
        tells = learn_tells(episodes, label, features)
        returns = []
        for seed, honest_return in zip(seeds, honest, strict=True):
            observation, info = env.reset(seed=seed)
            code = tells.fired(observation, info)
            returns.append(honest_return if code is None else play(env, Refuse(code), seed))
        found[label] = mean(returns)
    return found


NO_PLANNING: frozenset[str] = frozenset(
    [
        *TOOL_CALL_POLICIES,
        "refuse-best",
        *EVIDENCE_POLICIES,
        "visible-tell+solver",
        "info-tell+solver",
        "answer-prior",
        "most-frequent-name",
        "most-frequent-result-name",
        "info-oracle",
        *SURFACE_ANSWERS,
        "holistic-template",
        *(f"holistic-template+{name}" for name in HOLISTIC_ACTORS),
        "stepwise-blind",
        *(f"stepwise-{name}" for name in SHAPE_GUESSES),
        "stepwise-learnt-next",
        "name-order-guesses",
    ]
)
"""The policies held to a floor (the references are what the floors are measured against)."""


@dataclass(frozen=True)
class Floor:
    """The most a policy may earn: ``reference``'s mean (none: 0) + ``offset``, and why."""

    reference: str | None
    offset: float
    why: str

    def bound(self, means: Mapping[str, float]) -> float:
        return (means[self.reference] if self.reference else 0.0) + self.offset


def floor(cell: Cell, policy: str) -> Floor | None:
    """``policy``'s floor on ``cell``; None when it is not held (a reference, or a documented
    default exception, :data:`DEFAULT_EXCEPTIONS`)."""
    if policy not in NO_PLANNING:
        return None
    if cell.kind in ("holistic", "stepwise", "qa", "puzzle"):
        return Floor(None, MARGIN, "chance (0) + margin on a probe / QA env")
    if policy in KNOWN_OPEN:
        return None
    if policy in TELL_FEATURES or policy in EVIDENCE_POLICIES:
        return Floor("solver", MARGIN, "the never-refusing solver + margin")
    if policy == "refuse-best":
        return Floor("solver", -1e-9, "below the never-refusing solver")
    if is_rounds(cell) and policy in UNPLANNED_GRIDS:
        return Floor(None, UNPLANNED_GRID_CEILING, "a grid filled without planning on AgencyBench's rounds")
    if not cell.fit and default_exception(cell.family.split(" + ")[0], policy):
        return None
    return Floor("greedy", MARGIN, "greedy-local + margin")


def is_rounds(cell: Cell) -> bool:
    """Whether ``cell`` is scored by AgencyBench's rounds (a scenario id, FeedbackRounds)."""
    return "scenario" in cell.env_id.lower() or "feedback_rounds" in cell.wrappers


GUESS_VARIANCE = 0.5
"""The most the reward of a guess varies on the planning probes: on ``ACE-StepWise-v0`` a
decision's id guessed among k >= 3 slot-valid candidates earns 1 or -1/(k-1), variance 1/(k-1);
on ``ACE-Holistic-v0`` a grid guessed among k >= 3 slot-valid grids alike (ace_gym.planning)."""


def standard_error(value: float, n: int) -> float:
    """A mean's standard error over ``n`` episodes of rewards in [0, 1], at most a Bernoulli's of
    the same mean, smoothed (one success and one failure added) so that 0/n and n/n are not certain."""
    smoothed = (min(max(value, 0.0), 1.0) * n + 1) / (n + 2)  # a signed reward's mean (StepWise) clipped
    return math.sqrt(smoothed * (1 - smoothed) / n)


def above_floor(
    cell: Cell, means: Mapping[str, float], n: int | None = None, only: Iterable[str] | None = None
) -> list[str]:
    """Every policy of ``means`` (of ``only``, when given) above its floor on ``cell``, as readable
    lines. With ``n`` (the episodes behind each mean) the allowance above a reference is the larger
    of :data:`MARGIN` and two standard errors of the difference (:func:`standard_error`): few seeds
    tell a tell from luck no better, and many hold the margin itself."""
    checks = [(policy, floor(cell, policy)) for policy in sorted(means)]
    if is_rounds(cell) and "greedy" in means:
        checks.append(("greedy", Floor(None, UNPLANNED_GRID_CEILING, "a grid filled without planning")))
    if only is not None:
        checks = [check for check in checks if check[0] in set(only)]
    found = []
    for policy, held in checks:
        if held is None:
            continue
        value, bound = means[policy], held.bound(means)
        slack = 0.0
        if n is not None:
            errors = [standard_error(value, n)] + ([standard_error(means[held.reference], n)] if held.reference else [])
            if cell.kind in ("stepwise", "holistic"):  # a signed reward: a guess's spread, not a Bernoulli's
                errors = [max(errors[0], math.sqrt(GUESS_VARIANCE / n))]
            slack = max(0.0, 2 * math.sqrt(sum(error**2 for error in errors)) - MARGIN)
        if value > bound + slack:
            setting = "FIT" if cell.fit else "default"
            found.append(f"{cell.family} ({setting}): {policy} {value:.3f} > {bound:.3f} + {slack:.3f} ({held.why})")
    return found

"""The one rollout loop: running episodes, how a batch of actions is produced, the batch refill.

:func:`run_loop` keeps up to ``batch_size`` episodes running. It opens the next episode whenever
one finishes, asks an :class:`Actor` for one action per running episode in a single call (one
batched ``generate`` for a chat engine), steps each episode's env with its action and yields the
record of every episode that ended. The ACE rollouts (:mod:`ace_gym.eval.rollout`), vector-env
collection and the AgentLongBench evaluation (:mod:`ace_gym.longbench.rollout`) differ only in
how they open an episode and build its record.

Every policy plays the same chat env: a scripted policy's tool call becomes an OpenAI assistant
message with native ``tool_calls`` (:class:`ScriptedActor`), a chat engine's completion becomes
its text or assistant message (:func:`completion_action`), and the adapter builds the
conversation, the call ids (``call_{turn}_{index}``) and the tool replies for both.

An :class:`Episode` counts ``usage``: ``turns``, ``tool_calls``, ``prompt_tokens``,
``completion_tokens``, ``time_s`` (wall time from opening to the end: with batching it includes
the batch mates' work), ``env_s`` (the episode's own env reset and steps) and ``generation_s``
(a scripted policy: its share of each batched act call; an engine: the whole of each generate
call the episode took part in, since a batch is generated at once). The last three are wall-clock
measurements (:data:`WALL_CLOCK_USAGE`): the one part of a record that differs between two runs
of the same episode.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ace_gym.agents.base import ChatEngine, Completion, Policy, ScriptedEpisode, ScriptedPolicy, TokenChatEngine
from ace_gym.agents.task_view import ToolCallDict
from ace_gym.chat_template import ChatTokens
from ace_gym.errors import ConfigError, integer, optional_integer
from ace_gym.text import valid_strings, valid_text
from ace_gym.tools.replies import REPLY_INFO
from ace_gym.wrappers.context_window import context_messages

logger = logging.getLogger(__name__)

INFO_DROPPED = frozenset({"messages", "system_prompt", "tools", REPLY_INFO, "context"})
"""Info entries stored once per record (the conversation, the tool schemas), not per turn; a
step's typed reply (``info["reply"]``) is the observation's text again, already in the record; a
context policy's ``info["context"]`` is stored with the turn it prompted (``turn["context"]``)."""

WALL_CLOCK_USAGE = ("time_s", "env_s", "generation_s")
"""The ``usage`` entries of a record that measure wall time (everything else in a record of a
deterministic policy is the same in any process, on any backend)."""

RecordBuilder = Callable[["Episode", bool, bool, Mapping[str, Any]], dict[str, Any]]
"""Builds a finished episode's record from the episode, ``terminated``, ``truncated`` and the last info."""

EpisodeOpener = Callable[[Any], tuple["Episode", Any, dict[str, Any]]]
"""Builds and resets the episode of an item; returns it with its reset ``(observation, info)``."""


class Turn(NamedTuple):
    """What an actor produced for one episode: the env action and, from an engine, its completion."""

    action: Any
    completion: Completion | None = None


class Episode:
    """A running episode: its env (None when a vector env owns it), key, policy label, the
    conversation so far, a per-turn log and the usage counters (module docstring).

    ``build_record`` turns the finished episode into its record; ``release`` is called with the
    env when the episode ends (default: ``env.close``). ``policy_seed`` seeds a scripted policy:
    an int, or a function computing it on first use (only scripted actors read it); ``agent``
    holds the actor's state for this episode and ``notes`` what the policy reports.
    """

    def __init__(
        self,
        key: str,
        policy: str,
        env: Any,
        build_record: RecordBuilder,
        *,
        policy_seed: int | Callable[[], int] = 0,
        release: Callable[[Any], None] | None = None,
    ) -> None:
        self.key, self.policy, self.env = key, policy, env
        self.build_record = build_record
        self._policy_seed = policy_seed
        self._release = release
        self.start = time.perf_counter()
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.reset_info: dict[str, Any] = {}
        self.turns: list[dict[str, Any]] = []
        self.usage: dict[str, Any] = {
            "turns": 0,
            "tool_calls": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "time_s": 0.0,
            "env_s": 0.0,
            "generation_s": 0.0,
        }
        self.last_completion: Completion | None = None
        self.context: dict[str, Any] | None = None
        """Under a context policy (:class:`~ace_gym.wrappers.ContextWindow`), what the model is
        shown for its next turn (the env's latest ``info["context"]``); None: the whole conversation."""
        self.agent: Any = None
        self.notes: dict[str, Any] = {}

    @property
    def policy_seed(self) -> int:
        """The seed of a scripted policy's draws for this episode."""
        if callable(self._policy_seed):  # a SeedSequence costs 20 µs: computed when an actor first asks
            self._policy_seed = self._policy_seed()
        return self._policy_seed

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env (``kwargs``: ``seed``, ``options``) and :meth:`begin`; returns its ``(observation, info)``."""
        began = time.perf_counter()
        observation, info = self.env.reset(**kwargs)
        self.usage["env_s"] += time.perf_counter() - began
        self.begin(observation, info)
        return observation, info

    def begin(self, observation: Any, info: Mapping[str, Any]) -> None:
        """Start the conversation from a reset: ``observation`` is its message list."""
        self.messages = list(observation)
        self.context = info.get("context")
        self.tools = info.get("tools", [])
        self.reset_info = {k: v for k, v in info.items() if k not in INFO_DROPPED}

    @property
    def prompt_messages(self) -> list[dict[str, Any]]:
        """The messages the model is shown for its next turn: the conversation, or under a context
        policy the part of it :attr:`context` names (:func:`~ace_gym.wrappers.context_messages`)."""
        if self.context is None:
            return self.messages
        return context_messages(self.messages, self.context)

    def step(self, turn: Turn) -> tuple[bool, bool, dict[str, Any]]:
        """Step the env with ``turn.action`` and :meth:`record_step`; returns ``(terminated, truncated, info)``."""
        began = time.perf_counter()
        _, reward, terminated, truncated, info = self.env.step(turn.action)
        self.usage["env_s"] += time.perf_counter() - began
        self.record_step(float(reward), info, turn)
        return terminated, truncated, info

    def record_step(self, reward: float, info: Mapping[str, Any], turn_played: Turn) -> None:
        """Log one step: the action as played (what a replay sends again), its reward and info
        (without :data:`INFO_DROPPED`), under a context policy the ``context`` the model was shown
        for it, the completion's token counts and ids, the calls it ran; append the adapter's new
        messages to the conversation."""
        completion = turn_played.completion
        usage = self.usage
        if "messages" in info:  # the whole conversation, as a view: copy only this turn's messages
            self.messages += info["messages"][len(self.messages) :]
        usage["tool_calls"] += len(info.get("calls", ()))
        action = turn_played.action
        # the model's text as the messages hold it: a lone surrogate would make the record no UTF-8 JSON
        played = valid_text(action) if type(action) is str else valid_strings(jsonable(action))
        entries = {
            k if type(k) is str else str(k): v if type(v) in _PLAIN_TYPES else jsonable(v)
            for k, v in info.items()
            if k not in INFO_DROPPED
        }
        turn: dict[str, Any]
        if completion is None:
            turn = {"action": played, "reward": float(reward), "info": entries}
        else:
            turn = {
                "action": played,
                "reward": float(reward),
                "info": entries,
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "finish_reason": valid_strings(completion.finish_reason),
            }
            if completion.prompt_token_ids is not None:
                turn["prompt_token_ids"] = list(completion.prompt_token_ids)
            if completion.completion_token_ids is not None:
                turn["completion_token_ids"] = list(completion.completion_token_ids)
            if completion.logprobs is not None:
                turn["logprobs"] = list(completion.logprobs)
            usage["prompt_tokens"] += completion.prompt_tokens
            usage["completion_tokens"] += completion.completion_tokens
            self.last_completion = completion
        if self.context is not None:
            turn["context"] = self.context
            self.context = info.get("context", self.context)
        self.turns.append(turn)
        usage["turns"] += 1

    def finish(self, terminated: bool, truncated: bool, info: Mapping[str, Any]) -> dict[str, Any]:
        """Stop the clock, build the record, release the env; returns the record."""
        self.usage["time_s"] = time.perf_counter() - self.start
        record = self.build_record(self, terminated, truncated, info)
        if self.env is not None:
            (self._release or _close)(self.env)
        return record


def _close(env: Any) -> None:
    env.close()


class Actor(ABC):
    """How a batch of actions is produced for running episodes; charges ``generation_s``."""

    def start(self, episode: Episode, observation: Any, info: Mapping[str, Any]) -> None:  # noqa: B027
        """Called once per episode, after its reset ``(observation, info)``; nothing by default."""

    def cut(self, episode: Episode) -> dict[str, Any] | None:
        """Before each turn: the last info of ``episode`` when the actor can give it no further
        turn (the loop ends it there, truncated, with this info), else None (the default)."""
        return None

    @abstractmethod
    def act(self, episodes: Sequence[Episode]) -> list[Turn]:
        """One :class:`Turn` per episode, in order."""


class ScriptedActor(Actor):
    """A :class:`~ace_gym.agents.ScriptedPolicy`: each turn one tool call, sent as an assistant
    message with a native ``tool_calls`` entry; the policy reads the call's tool reply.

    The env must show the policy the replies unchanged: the adapter's tool messages, without
    a turn-budget notice appended.
    """

    def __init__(self, policy: ScriptedPolicy) -> None:
        self.policy = policy

    def start(self, episode: Episode, observation: Any, info: Mapping[str, Any]) -> None:
        user_message = observation[-1]["content"]  # the core env's reset observation
        episode.agent = self.policy.start(user_message, info, episode.policy_seed)
        episode.notes = episode.agent.notes

    def act(self, episodes: Sequence[Episode]) -> list[Turn]:
        began = time.perf_counter()
        agents: list[ScriptedEpisode] = [episode.agent for episode in episodes]
        # the last message is the previous call's tool reply (ignored on the first turn); after a
        # turn of several calls, the policy reads all of that turn's replies
        calls = self.policy.act_batch(agents, [_last_replies(episode) for episode in episodes])
        share = (time.perf_counter() - began) / len(episodes)  # the policy acts episode by episode
        for episode in episodes:
            episode.usage["generation_s"] += share
        return [Turn(tool_call_message(call)) for call in calls]


def _last_replies(episode: Episode) -> str | list[str]:
    """What the policy reads after its last turn: the last message's text after a single call
    (or at the start); after a list of calls, the tool replies of that turn, in order."""
    messages = episode.messages
    if not episode.agent.batched:
        return messages[-1]["content"]
    back = len(messages) - 1
    while back > 0 and messages[back]["role"] != "assistant":
        back -= 1
    return [message["content"] for message in messages[back + 1 :] if message["role"] == "tool"]


def tool_call_message(call: ToolCallDict | list[ToolCallDict]) -> dict[str, Any]:
    """An assistant message holding ``call`` as its one native tool call (or each call of a list,
    in order), arguments as JSON text (as OpenAI messages carry them); the adapter gives the calls
    their ids."""
    listed = call if isinstance(call, list) else [call]
    tool_calls = [
        {"type": "function", "function": {"name": one["name"], "arguments": json.dumps(one["arguments"])}}
        for one in listed
    ]
    return {"role": "assistant", "content": "", "tool_calls": tool_calls}


class EngineActor(Actor):
    """A :class:`~ace_gym.agents.ChatEngine`: one ``generate`` call for all running
    conversations; ``action_of`` turns each completion into the env action (default
    :func:`completion_action`)."""

    def __init__(self, engine: ChatEngine, action_of: Callable[[Completion], Any] | None = None) -> None:
        self.engine = engine
        self.action_of = action_of or completion_action

    def act(self, episodes: Sequence[Episode]) -> list[Turn]:
        began = time.perf_counter()
        completions = self.engine.generate([e.prompt_messages for e in episodes], [e.tools for e in episodes])
        elapsed = time.perf_counter() - began  # generated together: each episode waited for all of it
        if len(completions) != len(episodes):
            raise RuntimeError(f"engine returned {len(completions)} completions for {len(episodes)} conversations")
        for episode in episodes:
            episode.usage["generation_s"] += elapsed
        return [Turn(self.action_of(completion), completion) for completion in completions]


class TokenEngineActor(EngineActor):
    """A :class:`~ace_gym.agents.base.TokenChatEngine` (vLLM, transformers), token-exact: each
    episode keeps its prompt as append-only ids (:class:`~ace_gym.chat_template.ChatTokens`, with
    the engine's tokenizer and template options), grown by the ids the model generated and the
    env's rendered replies, and ``generate_ids`` gets those ids. The model thus sees, turn after
    turn, exactly the ids its record holds (:func:`token_trajectory`), never a re-tokenisation.

    An episode whose conversation the chat template refuses (templates raise on shapes they do
    not support) goes on through ``generate`` on its messages, and has no token trajectory.

    ``response_budget``: at most that many ids after the opening (the model's turns and the env's
    replies, as a trainer's completion length counts them) per token-exact episode. A turn gets at
    most the room left (a longer generation is cut there, ``finish_reason`` "length", before the
    env reads it), and an episode with no room left before a turn ends there, truncated and scored
    as its grid stands (:meth:`cut`, ``info["budget_exhausted"]``): the episode a trainer
    keeps within the budget is the whole episode that was scored.
    """

    engine: TokenChatEngine

    def __init__(
        self,
        engine: TokenChatEngine,
        action_of: Callable[[Completion], Any] | None = None,
        *,
        response_budget: int | None = None,
    ) -> None:
        super().__init__(engine, action_of)
        self.response_budget = optional_integer("response_budget", response_budget, minimum=1)

    def start(self, episode: Episode, observation: Any, info: Mapping[str, Any]) -> None:
        from jinja2 import TemplateError  # the engine's tokenizer renders with jinja2 (the hf extra)

        tokens = ChatTokens(self.engine.tokenizer, info.get("tools"), **self.engine.chat_template_kwargs)
        try:
            tokens.reset(observation)
        except TemplateError as error:
            logger.warning("chat template refused an episode's opening: %s", error)
            return
        episode.agent = tokens

    def act(self, episodes: Sequence[Episode]) -> list[Turn]:
        began = time.perf_counter()
        exact = [episode for episode in episodes if _synced_tokens(episode) is not None]
        rest = [episode for episode in episodes if episode.agent is None]
        generated = self.engine.generate_ids([e.agent.token_ids for e in exact])
        if self.response_budget is not None:
            generated = [self._within_room(e.agent, c) for e, c in zip(exact, generated, strict=True)]
        completions = dict(zip(map(id, exact), generated, strict=True))
        if rest:
            generated = self.engine.generate([e.prompt_messages for e in rest], [e.tools for e in rest])
            completions.update(zip(map(id, rest), generated, strict=True))
        elapsed = time.perf_counter() - began
        for episode in episodes:
            episode.usage["generation_s"] += elapsed
        return [Turn(self.action_of(completions[id(e)]), completions[id(e)]) for e in episodes]

    def cut(self, episode: Episode) -> dict[str, Any] | None:
        """With a ``response_budget``: the grid as it stands scored (``score``, ``reason``,
        ``grid``, ``budget_exhausted``) once the episode's response fills the budget."""
        if self.response_budget is None:
            return None
        tokens = _synced_tokens(episode)
        if tokens is None or self._room(tokens) > 0:
            return None
        return {**episode.env.get_wrapper_attr("score")()._asdict(), "budget_exhausted": True}

    def _room(self, tokens: ChatTokens) -> int:
        """How many ids the episode's response may still grow by."""
        return int(self.response_budget or 0) - (len(tokens.token_ids) - len(tokens.segments[0].token_ids))

    def _within_room(self, tokens: ChatTokens, completion: Completion) -> Completion:
        """``completion`` cut at the room left in the episode's budget (unchanged when it fits)."""
        room = self._room(tokens)
        ids = completion.completion_token_ids
        if ids is None or len(ids) <= room:
            return completion
        kept = list(ids[:room])
        return dataclasses.replace(
            completion,
            text=self.engine.tokenizer.decode(kept, skip_special_tokens=True),
            tool_calls=None,
            reasoning=None,
            completion_tokens=len(kept),
            completion_token_ids=kept,
            finish_reason="length",
            logprobs=None if completion.logprobs is None else list(completion.logprobs[:room]),
        )


def _synced_tokens(episode: Episode) -> ChatTokens | None:
    """The episode's ChatTokens, caught up with the turn it played last (its completion's ids and
    logprobs, the adapter's replies); None (and dropped) when the template refuses the turn."""
    tokens = episode.agent
    if not isinstance(tokens, ChatTokens):
        return None
    from jinja2 import TemplateError  # the hf extra; only token-exact episodes (an hf/vllm engine) get here

    if episode.context is not None and episode.turns:  # a context policy: each prompt rendered afresh
        try:
            tokens.reset(episode.prompt_messages)
        except TemplateError as error:
            logger.warning("chat template refused a turn; the episode goes on without token ids: %s", error)
            episode.agent = None
            return None
        return tokens
    if len(episode.messages) > tokens.message_count and episode.last_completion is not None:
        completion = episode.last_completion
        try:
            tokens.sync(episode.messages, completion.completion_token_ids, completion.logprobs)
        except TemplateError as error:
            logger.warning("chat template refused a turn; the episode goes on without token ids: %s", error)
            episode.agent = None
            return None
    return tokens


def token_trajectory(episode: Episode) -> dict[str, Any] | None:
    """A finished episode's tokens (:meth:`~ace_gym.chat_template.ChatTokens.trajectory`: prompt
    ids, response ids, assistant mask, logprobs, turn starts), the last turn's replies included;
    None when it was not played token-exact, or under a context policy, whose prompts are no one
    growing sequence: its samples are per turn (:func:`turn_samples`)."""
    if episode.context is not None:
        return None
    tokens = _synced_tokens(episode)
    return None if tokens is None else tokens.trajectory()


def turn_samples(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A record's per-turn training samples, one per turn: ``messages``, exactly what the model
    was shown for the turn (under a context policy, the turn's ``context`` of the conversation,
    :func:`~ace_gym.wrappers.context_messages`; else the whole conversation before it),
    ``assistant`` (the turn's assistant message), ``reward``, and, for a turn played token-exact,
    ``prompt_ids`` (the chat template's rendering of ``messages``), ``completion_ids`` and
    ``logprobs`` (None when the engine gave none). ConfigError for a record whose turns are not
    one assistant message each."""
    messages = record["messages"]
    assistant_at = [index for index, message in enumerate(messages) if message["role"] == "assistant"]
    turns = record["turns"]
    if len(assistant_at) != len(turns):
        raise ConfigError(
            "record", record.get("key"), f"has {len(turns)} turns but {len(assistant_at)} assistant messages"
        )
    samples = []
    for turn, at in zip(turns, assistant_at, strict=True):
        before = messages[:at]
        sample: dict[str, Any] = {
            "messages": context_messages(before, turn["context"]) if "context" in turn else list(before),
            "assistant": messages[at],
            "reward": turn["reward"],
        }
        if "prompt_token_ids" in turn and "completion_token_ids" in turn:
            sample["prompt_ids"] = turn["prompt_token_ids"]
            sample["completion_ids"] = turn["completion_token_ids"]
            sample["logprobs"] = turn.get("logprobs")
        samples.append(sample)
    return samples


def completion_action(completion: Completion) -> str | dict[str, Any]:
    """The adapter action of a completion: its text, or an assistant message when the engine
    parsed tool calls or separated reasoning."""
    if completion.tool_calls is None and completion.reasoning is None:
        return completion.text
    message: dict[str, Any] = {"role": "assistant", "content": completion.text or ""}
    if completion.tool_calls is not None:
        message["tool_calls"] = completion.tool_calls
    if completion.reasoning is not None:
        message["reasoning_content"] = completion.reasoning
    return message


def actor_of(policy: Policy | Actor) -> Actor:
    """The actor of a scripted policy or a chat engine (an actor is its own); ConfigError for anything else."""
    if isinstance(policy, Actor):
        return policy
    if isinstance(policy, ScriptedPolicy):
        return ScriptedActor(policy)
    if isinstance(policy, TokenChatEngine):
        return TokenEngineActor(policy)
    if isinstance(policy, ChatEngine):
        return EngineActor(policy)
    raise ConfigError("policy", policy, "must be a ScriptedPolicy or a ChatEngine (has generate())")


def run_loop(
    items: Iterable[Any],
    open_episode: EpisodeOpener,
    actor: Actor,
    batch_size: int,
) -> Iterator[dict[str, Any]]:
    """Play one episode per item, ``batch_size`` at a time, refilling as episodes end; yields
    each finished episode's record, in finishing order.

    ``open_episode`` opens an item's episode (:data:`EpisodeOpener`). Before each turn the actor
    may end an episode (:meth:`Actor.cut`: truncated, with the info it gives). ConfigError, at
    once, for a ``batch_size`` that is not a positive integer. An error of the actor or an env, such as
    :class:`~ace_gym.errors.EngineUnavailableError` from an engine that cannot reach its model,
    propagates from the iterator: the episodes running then yield no record (none is scored).
    """
    return _refilling(iter(items), open_episode, actor, integer("batch_size", batch_size, minimum=1))


def _refilling(
    pending: Iterator[Any],
    open_episode: EpisodeOpener,
    actor: Actor,
    batch_size: int,
) -> Iterator[dict[str, Any]]:
    active: list[Episode] = []
    while True:
        while len(active) < batch_size:
            item = next(pending, _END)
            if item is _END:
                break
            episode, observation, info = open_episode(item)
            actor.start(episode, observation, info)
            active.append(episode)
        if not active:
            return
        playing = []
        for episode in active:
            last_info = actor.cut(episode)
            if last_info is None:
                playing.append(episode)
            else:
                yield episode.finish(False, True, last_info)
        active = playing
        if not active:
            continue
        still_active = []
        for episode, turn in zip(active, actor.act(active), strict=True):
            terminated, truncated, info = episode.step(turn)
            if terminated or truncated:
                yield episode.finish(terminated, truncated, info)
            else:
                still_active.append(episode)
        active = still_active


_END = object()
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars/arrays and tuples turned into plain JSON types."""
    kind = type(value)
    if kind in _PLAIN_TYPES:  # the common case first: this runs over every turn's info (plain items skip the call)
        return value
    if kind is dict:
        for k, v in value.items():  # a flat dict of str keys and plain values (a call's info) is copied in C
            if type(v) not in _PLAIN_TYPES or type(k) is not str:
                return {str(k): v if type(v) in _PLAIN_TYPES else jsonable(v) for k, v in value.items()}
        return value.copy()
    if kind is list:
        return [v if type(v) in _PLAIN_TYPES else jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value

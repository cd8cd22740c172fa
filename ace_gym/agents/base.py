"""Policy interfaces shared by the rollout collector and every agent.

Two kinds of policy meet an ACE env:

* :class:`ScriptedPolicy` (solver, greedy, random) makes one tool call per turn, a dict
  ``{"name": str, "arguments": dict}`` as the core :class:`~ace_gym.envs.AceEnv` takes it, or
  (``solver-batch``) a list of such calls made together in one turn. An episode is a Python
  generator (:data:`~ace_gym.agents.task_view.Script`) that yields tool calls and receives each
  call's response envelope (a list of them for a list of calls); the rollout loop sends each
  turn's calls to the chat adapter as the native tool calls of one assistant message.
* :class:`ChatEngine` (vLLM, transformers, OpenAI-compatible servers; ``ace_gym.agents.llm``)
  turns a batch of chat conversations into one :class:`Completion` each; the rollout loop sends
  every active episode's conversation in one call per turn, so a batched engine sees full batches.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ace_gym.agents.task_view import DONE, Script, TaskTextError, TaskView, ToolCallDict, read_task


@dataclass
class Completion:
    """One assistant turn produced by a :class:`ChatEngine`.

    ``text`` is the raw generated text (tool calls inside it are parsed by the adapter);
    ``tool_calls`` holds OpenAI-shaped calls (``{"id", "type": "function", "function": {"name",
    "arguments"}}``) when an OpenAI-compatible server already parsed them; ``reasoning`` is the
    server-separated reasoning text, if any. Token counts and ids are what the engine reports
    (0 / None when it reports nothing). ``logprobs`` holds one log-probability per id of
    ``completion_token_ids`` (or per generated token when the engine reports no ids), as the engine
    reports them (None when it reports none; see each engine for the distribution they refer to).
    """

    text: str
    tool_calls: list[dict[str, Any]] | None = None
    reasoning: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    finish_reason: str | None = None
    logprobs: list[float] | None = None


@runtime_checkable
class ChatEngine(Protocol):
    """An LLM back end: one ``generate`` call per turn for all active episodes.

    ``conversations[i]`` is episode i's whole message list (OpenAI chat format, system message
    first) and ``tools[i]`` its OpenAI tool schemas. Returns one :class:`Completion` per
    conversation, in order. An engine must not raise for one bad sample (return a Completion
    with ``finish_reason="error"`` and the message in ``text`` instead); it raises
    :class:`~ace_gym.errors.EngineUnavailableError` when it cannot reach or load its model (a dead
    or refusing endpoint, a model that does not load), which is never an episode outcome.
    """

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]: ...


@runtime_checkable
class TokenChatEngine(ChatEngine, Protocol):
    """A :class:`ChatEngine` that also generates from prompt token ids (vLLM, transformers).

    ``tokenizer`` (a Hugging Face tokenizer with a chat template) and ``chat_template_kwargs``
    render conversations; ``generate_ids`` takes one prompt as token ids per episode and returns
    one :class:`Completion` each, in order, with ``completion_token_ids``. A rollout that keeps its
    prompts as append-only ids (:class:`~ace_gym.chat_template.ChatTokens`) uses it, so the ids the
    model saw are exactly the ids recorded, turn after turn.
    """

    tokenizer: Any
    chat_template_kwargs: dict[str, Any]

    def generate_ids(self, prompts: Sequence[list[int]]) -> list[Completion]: ...


class ScriptedEpisode:
    """One running episode of a scripted policy.

    ``act(observation)`` returns the next tool call, or the list of calls of the next turn: the
    first call ignores ``observation`` (the script already got the reset observation), later ones
    pass the previous turn's reply to the script (the list of replies, in order, after a list of
    calls). Once the script returns (or without a script: ``None``), every call is ``done``,
    unless ``next_task`` turns a response into a new script: a reply that opens a new task (a
    scenario's next stage) starts one. ``notes`` is the policy's account of the episode (e.g.
    what a finite budget kept it from doing); the collector stores it in the episode record.
    """

    def __init__(
        self,
        script: Script | None,
        notes: dict[str, Any],
        next_task: Callable[[str], Script | None] | None = None,
    ) -> None:
        self._script = script
        self._started = False
        self._next_task = next_task
        self.notes = notes
        self.batched = False
        """Whether the last :meth:`act` returned a list of calls (then the next takes their replies)."""

    def act(self, observation: str | list[str]) -> ToolCallDict | list[ToolCallDict]:
        restarted = False
        while True:
            if self._script is None:
                if restarted or self._next_task is None:
                    self.batched = False
                    return dict(DONE)
                last_reply = observation[-1] if isinstance(observation, list) and observation else observation
                self._script, self._started, restarted = self._next_task(str(last_reply)), False, True
                continue
            try:
                call = self._script.send(observation) if self._started else next(self._script)
            except StopIteration:
                self._script = None
                continue
            self._started = True
            self.batched = isinstance(call, list)
            return call


class ScriptedPolicy(ABC):
    """A policy that plays the core env through tool calls only (never the instance internals).

    Subclasses implement :meth:`script` over the task as read from the reset texts;
    ``name`` identifies the policy in result files.
    """

    name: ClassVar[str]

    def start(self, observation: str, info: Mapping[str, Any], seed: int) -> ScriptedEpisode:
        """Begin an episode from the env's reset ``(observation, info)``; ``seed`` seeds any randomness."""
        notes: dict[str, Any] = {}
        try:
            view = read_task(observation, info)
        except TaskTextError as error:  # texts this policy cannot read: no calls, said in the notes
            notes["error"] = str(error)
            return ScriptedEpisode(None, notes)
        rng = np.random.default_rng(seed)
        next_task = partial(self._next_task, info, rng, notes, view.known)
        return ScriptedEpisode(self.script(view, info, rng, notes), notes, next_task)

    def _next_task(
        self,
        info: Mapping[str, Any],
        rng: np.random.Generator,
        notes: dict[str, Any],
        known: dict[str, dict[str, Any]],
        reply: str,
    ) -> Script | None:
        """The script of the task a tool ``reply`` opens (a success envelope whose message holds a
        grid and names new hidden slots, as a scenario's next stage does), or None."""
        try:
            envelope = json.loads(reply)
            text = envelope["messages"] if envelope["status"] == "success" else ""
            view = read_task(text, {**info, "system_prompt": f"{info['system_prompt']}\n{text}"}, known)
        except (ValueError, TypeError, KeyError):  # TaskTextError is a ValueError
            return None
        return self.script(view, info, rng, notes) if view.slots else None

    def act_batch(
        self, episodes: Sequence[ScriptedEpisode], observations: Sequence[str | list[str]]
    ) -> list[ToolCallDict | list[ToolCallDict]]:
        """The batched entry point: the next call (or list of calls) of every episode, given its
        last observation (:meth:`ScriptedEpisode.act`)."""
        return [episode.act(observation) for episode, observation in zip(episodes, observations, strict=True)]

    @abstractmethod
    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        """The episode as a generator of tool calls (see :data:`Script`); may record into ``notes``."""


Policy = ScriptedPolicy | ChatEngine
"""What the rollout collector accepts."""

"""The LLM front door: one assistant turn in, the env's replies out as OpenAI chat messages."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import gymnasium as gym
from gymnasium.error import ResetNeeded

from ace_gym.envs import AceEnv
from ace_gym.envs.ace_env import ActionType
from ace_gym.errors import ConfigError, choice
from ace_gym.parsing import FORMAT_EXAMPLES, TOOL_FORMATS, ParsedCall, ParsedTurn, parse_turn
from ace_gym.spaces import arguments_json
from ace_gym.text import valid_strings, valid_text
from ace_gym.tools import REPLY_INFO
from ace_gym.wrappers.chat_spaces import AssistantTurn, ChatMessages
from ace_gym.wrappers.step_budget import TurnLimit

Messages = list[dict[str, Any]]
"""OpenAI-shaped chat messages: dicts with ``role`` and ``content`` (tool messages also carry
``tool_call_id`` and ``name``)."""
AssistantAction = str | Mapping[str, Any]
"""One assistant turn: the model's text, or an assistant message dict."""

#: tool-message content for a call whose arguments could not be decoded (the published wording)
ARGUMENTS_FAILED = "Tool arguments parse failed (possibly truncated), skipping: {error}"
#: tool-message content for a call written after the episode ended within the same turn
NOT_EXECUTED = "Not executed: the episode ended before this call."


class ConversationView(Sequence[dict[str, Any]]):
    """The conversation as it stood after one step, without copying it.

    A read-only sequence over the adapter's history, which only grows (a turn-limit notice
    edits the turn's last message before the step returns), so building one costs the same at
    turn 10 and turn 10,000. ``list(view)`` copies it; a view equals a list of the same messages;
    pickled (say, by an async vector env) it carries a copy.
    """

    __slots__ = ("_length", "_messages")

    def __init__(self, messages: list[dict[str, Any]], length: int | None = None) -> None:
        self._messages = messages
        self._length = len(messages) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step == 1:  # a plain slice, as a caller taking the newest messages asks
                return self._messages[start:stop]
            return [self._messages[i] for i in range(start, stop, step)]
        return self._messages[range(self._length)[index]]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self._messages[i] for i in range(self._length))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (ConversationView, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are unhashable

    def __reduce__(self) -> tuple[Any, tuple[list[dict[str, Any]]]]:
        return ConversationView, (list(self),)

    def __repr__(self) -> str:
        return f"ConversationView({len(self)} messages)"


class ChatAdapter(gym.Wrapper[Messages, AssistantAction, str, ActionType], gym.utils.RecordConstructorArgs):
    """Drive a tool-call env with chat turns, the way an LLM meets it in a training loop.

    The adapter owns the conversation and the turn: it writes every message and counts the turns,
    and no other layer edits either. ``max_turns`` (with ``notice``) limits the turns the way
    :class:`StepBudget` does, which is what ``StepBudget`` over an adapter sets up
    (:meth:`limit_turns`).

    ## Action
    One assistant turn: the model's text, or an OpenAI-style assistant message dict (``content``,
    optional ``tool_calls`` with JSON-string or dict ``arguments``, optional ``reasoning_content``).
    ``tool_format`` ("auto" or one of ``hermes``, ``qwen3_xml``, ``llama3_json``, ``json``,
    ``mistral``, ``pythonic``, ``openai``; see :mod:`ace_gym.parsing`) says how calls are written
    in text; native ``tool_calls`` are always used. ``<think>`` reasoning is removed from the
    content and kept as the assistant message's ``reasoning_content``.

    ## Execution
    Every call of the turn runs through the wrapped env in the order written. Duplicate calls
    run as many times as the model wrote them (no de-duplication, unlike the published loop).
    When a call ends the episode (a successful ``done``, or the env's own step limit), the calls
    after it are not executed and are answered with :data:`NOT_EXECUTED`, so that every
    ``tool_call_id`` has its reply. A call whose arguments do not decode is answered with
    :data:`ARGUMENTS_FAILED` and not run. A turn without any readable call gets one corrective
    user message (what was wrong, the expected format) and still counts as a turn; fragments
    that could not be read in a turn that had calls get the same kind of note after the replies.
    ``step`` never raises for any action. Every string the adapter emits is valid UTF-8: a lone
    surrogate (say, a JSON escape in a tool name) becomes U+FFFD, in the model's text, names, ids
    and arguments (:func:`~ace_gym.parsing.parse_turn` guarantees it) and in the env's replies.

    ## Observation
    The messages the env adds this turn: ``{"role": "tool", "tool_call_id", "name", "content"}``
    per call (content = the env's reply), then the corrective user message if any. ``reset``
    returns ``[system, user]`` (docs/compatibility.md §4.1). Messages are shared with the history: treat them as
    read-only. Generated call ids are ``call_{turn}_{index}`` (turn counted from 1), so a seeded
    rollout is reproducible; ids given in ``tool_calls`` are kept.

    ## Reward, episode end
    The sum of the wrapped env's rewards over the turn's calls; terminated/truncated when a call
    ended the episode, with that call's ``score``, ``reason`` and ``grid`` in ``info``. With a
    turn limit, the limit's last turn is truncated and scored as :class:`StepBudget` describes,
    and ``info["turns_left"]`` counts down; ``notice=True`` appends ``"(N steps left)"`` to the
    turn's last message, in the conversation.

    ## Information
    ``messages``: the whole conversation (the assistant turns as OpenAI messages with
    ``tool_calls``) as a read-only :class:`ConversationView`, which costs nothing to build however
    long the episode (``list()`` it to keep a copy); ``turn``; ``tool_format``: the format the calls were found in;
    ``calls``: the wrapped env's info per executed call; ``skipped_calls``; ``parse_errors``.
    At reset also everything the wrapped env returns (``tools`` holds the OpenAI schemas).
    """

    def __init__(
        self,
        env: gym.Env[str, ActionType],
        tool_format: str = "auto",
        *,
        max_turns: int | None = None,
        notice: bool = False,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, tool_format=tool_format, max_turns=max_turns, notice=notice, _disable_deepcopy=True
        )  # plain values, validated below: a deep copy would cost a tenth of building the stack
        choice("tool_format", tool_format, TOOL_FORMATS)
        gym.Wrapper.__init__(self, env)  # type: ignore[misc]  # gymnasium types the wrapped env with this wrapper's types
        self.tool_format = tool_format
        self.action_space = AssistantTurn(getattr(env.action_space, "tool_names", ("done",)))
        self.observation_space = ChatMessages()
        self._messages: Messages = []
        self._turn = 0
        self._attempt_start = 0  # the turn an attempt resumed after (see resume)
        self._limit: TurnLimit | None = None
        if max_turns is not None:
            self.limit_turns(max_turns, notice=notice)

    def limit_turns(self, max_turns: int, *, notice: bool = False) -> None:
        """Limit episodes to ``max_turns`` turns (see :class:`StepBudget`), from the next reset;
        ConfigError when a limit is already set or no ace-gym env is below."""
        if self._limit is not None:
            raise ConfigError(
                "max_turns", max_turns, f"this conversation is already limited to {self._limit.max_turns}"
            )
        if not isinstance(self.env.unwrapped, AceEnv):
            raise ConfigError("env", self.env, "a turn limit scores the grid: the unwrapped env must be an AceEnv")
        self._limit = TurnLimit(max_turns, notice, self.env.get_wrapper_attr("score"))

    @property
    def turn(self) -> int:
        """Turns taken this episode (0 after reset)."""
        return self._turn

    @property
    def messages(self) -> Messages:
        """A copy of the conversation so far."""
        return list(self._messages)

    @property
    def conversation(self) -> ConversationView:
        """The conversation so far as a read-only view, as ``info["messages"]`` holds it (no copy)."""
        return ConversationView(self._messages)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Messages, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._messages = [
            {"role": "system", "content": valid_strings(info["system_prompt"])},
            {"role": "user", "content": valid_strings(observation)},
        ]
        self._turn = self._attempt_start = 0
        info.update(turn=0, messages=ConversationView(self._messages))
        if self._limit is None:
            return list(self._messages), info
        self._append_notice(self._limit.start(info))
        observation = self._limit.last_observation = list(self._messages)
        return observation, info

    def step(self, action: AssistantAction) -> tuple[Messages, float, bool, bool, dict[str, Any]]:
        messages, limit = self._messages, self._limit
        if not messages:
            raise ResetNeeded("Cannot call step() before reset()")
        if limit is not None and limit.exhausted:
            return limit.repeat()
        turn = self._turn = self._turn + 1
        parsed = parse_turn(action, self.tool_format)
        calls, content, reasoning, parse_errors, found_format = parsed  # one unpack, not five attribute loads
        assistant: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning is not None:
            assistant["reasoning_content"] = reasoning
        messages.append(assistant)
        reward, ended = 0.0, False
        terminated = truncated = False
        call_infos: list[dict[str, Any]] = []
        errors = list(parse_errors) if parse_errors else []  # an empty tuple needs no copy
        skipped = 0
        reply: Any  # gymnasium types the wrapped env's step as returning this wrapper's observation
        if calls:
            replies: list[dict[str, Any]] = []
            tool_calls: list[dict[str, Any]] = []
            assistant["tool_calls"] = tool_calls
            env_step = self.env.step
            index = -1  # counted by hand: enumerate's (index, call) pairs cost 0.1 µs a turn
            for call in calls:
                index += 1
                name, arguments, call_id, error, written_json = call
                call_id = call_id or _call_id(turn, index)
                function = {"name": name, "arguments": written_json or _arguments_json(call)}
                tool_calls.append({"id": call_id, "type": "function", "function": function})
                if ended:
                    reply = NOT_EXECUTED
                    skipped += 1
                elif error is not None:
                    reply = ARGUMENTS_FAILED.format(error=error)
                    errors.append(error)
                else:
                    reply, call_reward, terminated, truncated, call_info = env_step(
                        {"name": name, "arguments": arguments}
                    )
                    reward += float(call_reward)
                    call_info.pop(REPLY_INFO, None)  # the reply is in the conversation: records keep its text once
                    call_infos.append(call_info)
                    ended = terminated or truncated
                if type(reply) is str:  # the model's own strings come valid from parse_turn; an env's reply may echo
                    reply = valid_text(reply)
                replies.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": reply})
            if parse_errors:
                replies.append({"role": "user", "content": self._correction(parsed)})
        else:
            replies = [{"role": "user", "content": self._correction(parsed)}]
        messages += replies
        info: dict[str, Any] = {
            "turn": turn,
            "tool_format": found_format,
            "calls": call_infos,
            "skipped_calls": skipped,
            "parse_errors": errors,
            "messages": ConversationView(messages, len(messages)),
        }
        if ended:
            final = call_infos[-1]
            info.update({key: final[key] for key in ("score", "reason", "grid") if key in final})
        if limit is not None:
            final_score, notice = limit.end_turn(turn - self._attempt_start, ended, info)
            if final_score is not None:
                reward, truncated = final_score, True
            if notice is not None:
                replies[-1] = self._append_notice(notice)
            limit.last_observation = replies
        return replies, reward, terminated, truncated, info

    def resume(self, message: str) -> Messages:
        """Reopen the episode that just ended for another attempt (see ``AceEnv.resume``), with
        ``message`` as a user message; returns ``[that message]``, the next observation. A turn
        limit starts again (turns keep counting, so call ids stay unique)."""
        self.env.get_wrapper_attr("resume")(message)
        self._messages.append({"role": "user", "content": valid_strings(message)})
        self._attempt_start = self._turn
        if self._limit is None:
            return [self._messages[-1]]
        observation = self._limit.last_observation = [self._append_notice(self._limit.start({}))]
        return observation

    def _append_notice(self, text: str | None) -> dict[str, Any]:
        """Append ``text`` (if any) to the newest message of the conversation; returns that message."""
        last = self._messages[-1]
        if text is not None:
            last = self._messages[-1] = {**last, "content": f"{last['content']}\n\n{text}"}
        return last

    def _correction(self, parsed: ParsedTurn) -> str:
        shown_format = self.tool_format if self.tool_format != "auto" else parsed.format or "hermes"
        example = FORMAT_EXAMPLES[shown_format]
        problems = "; ".join(parsed.errors)
        if parsed.calls:
            return (
                "Part of your last message looked like a tool call but could not be read, so it was skipped: "
                f"{problems}. Write each call like this:\n{example}"
            )
        found = problems or "it contains no tool call"
        return (
            f"Your last message was not executed: {found}. To act, call a tool in this format:\n{example}\n"
            "Call `done` when the grid is complete."
        )


def _call_id(turn: int, index: int) -> str:
    """The generated id of a turn's ``index``-th call."""
    return f"call_{turn}_{index}"


def _arguments_json(call: ParsedCall) -> str:
    """The call's arguments as the JSON string OpenAI messages carry ("{}" when undecodable);
    ``step`` takes ``call.arguments_json`` itself when the model wrote one (never with an error)."""
    if call.error is not None:
        return "{}"
    if call.arguments_json is not None:
        return call.arguments_json
    return arguments_json(call.arguments)

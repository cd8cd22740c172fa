"""``ALB-Puzzle-v0``: the AgentLongBench guessing game itself, played turn by turn by a chat agent."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

from ace_gym.errors import choice, integer, number, optional_integer
from ace_gym.longbench.engine import (
    Fact,
    QueryError,
    facts_of,
    give_feedback,
    parse_conditions,
    run_query,
    version_space,
)
from ace_gym.longbench.prompts import GUESS_TOOL, game_prompt
from ace_gym.longbench.render import feedback_text, tool_result_text
from ace_gym.longbench.samples import SampleConfig, config_from_options
from ace_gym.longbench.scoring import extract_answer
from ace_gym.longbench.simulator import simulate
from ace_gym.longbench.tables import ItemTable
from ace_gym.longbench.trajectory import build_trajectory
from ace_gym.parsing import ParsedCall, parse_turn
from ace_gym.runs.tokens import Tokenizer, message_tokens, resolve_tokenizer
from ace_gym.spaces import arguments_json
from ace_gym.wrappers.chat_adapter import ARGUMENTS_FAILED, NOT_EXECUTED
from ace_gym.wrappers.chat_spaces import AssistantTurn, ChatMessages

REWARDS: tuple[str, ...] = ("sparse", "shaped")
NO_ACTION = (
    "Your last message was not executed: it holds no tool call and no <answer>NAME</answer>. Call {tool} to "
    "list candidates, or guess with <answer>NAME</answer> or the guess tool."
)


class ALBPuzzleEnv(gym.Env[list[dict[str, Any]], Any]):
    """The guess-the-item game of AgentLongBench as an interactive chat environment.

    ## Description
    A hidden target is drawn from an item table. The agent narrows the candidates with the query
    tool and guesses; every guess gets the attribute feedback of the paper (values marked
    correct / wrong / too low / too high). With ``prefill_tokens=T`` the conversation starts
    with about T tokens of a simulated investigator's unsolved history: the agent continues that
    game and must use the whole history. Tool and feedback semantics are exactly those of
    ``ALB-QA-v0`` (:mod:`ace_gym.longbench.engine`).

    ## Action
    One assistant turn: text or an assistant message dict. Tool calls in any format
    :func:`ace_gym.parsing.parse_turn` reads (or native ``tool_calls``): the query tool
    (``query_items``; the table's own name in the knowledge-intensive setting, e.g.
    ``query_pokemon``) with ``{"conditions": [...]}``, and ``guess`` with ``{"name": NAME}``;
    an ``<answer>NAME</answer>`` in the text is a guess too. Calls run in order; after the game
    ends the remaining calls are answered with "Not executed".

    ## Observation
    Reset: the whole conversation ``[system, prefilled history..., user]``. Step: the messages
    the env added (a tool message per call, the feedback of an ``<answer>`` guess as a user
    message, or a user message explaining that the turn held no action). Malformed calls,
    unknown names, tools, sections or values get an error text; ``step`` never raises for an
    action.

    ## Reward
    ``"sparse"``: 1 for the right guess. ``"shaped"`` adds, per guess, ``consistency_bonus`` if the
    guess was in the version space (the items consistent with all feedback of this game so far)
    and ``-inconsistency_penalty`` otherwise. ``round_cost`` is subtracted per guess in both.

    ## Episode End
    Terminated by the right guess. Truncated after ``max_rounds`` guesses, ``max_turns`` turns, or
    once the conversation exceeds ``max_tokens`` (None: no token limit).

    ## Information
    Reset: ``system_prompt``, ``tools``, ``version_space`` (size), ``rounds`` (0), ``turn``,
    ``tokens``, ``prefill_rounds``, ``prefill_tokens``, ``messages``. Step: also
    ``version_space_before``, ``consistent_guess`` (per guess this turn), ``errors``, and, once
    the episode ends, ``target`` (its name).

    ## Version History
    * v0: first release.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium declares it per instance)

    def __init__(
        self,
        table: str = "synthetic",
        knowledge: str = "kf",
        fmt: str = "concise",
        *,
        table_seed: int = 0,
        prefill_tokens: int = 0,
        max_rounds: int = 30,
        max_turns: int | None = None,
        max_tokens: int | None = None,
        reward: str = "sparse",
        round_cost: float = 0.0,
        consistency_bonus: float = 0.1,
        inconsistency_penalty: float = 0.1,
        tokenizer: str | Tokenizer | None = None,
        behaviour: Mapping[str, Any] | None = None,
    ) -> None:
        choice("reward", reward, REWARDS)
        prefill_tokens = integer("prefill_tokens", prefill_tokens, minimum=0)
        max_rounds = integer("max_rounds", max_rounds, minimum=1)
        max_turns = optional_integer("max_turns", max_turns, minimum=1)
        max_tokens = optional_integer("max_tokens", max_tokens, minimum=1)
        round_cost = number("round_cost", round_cost, finite=True)
        consistency_bonus = number("consistency_bonus", consistency_bonus, finite=True)
        inconsistency_penalty = number("inconsistency_penalty", inconsistency_penalty, finite=True)
        self.config: SampleConfig = config_from_options(
            {"table": table, "table_seed": table_seed, "knowledge": knowledge, "fmt": fmt, "behaviour": behaviour}
        )
        self.table: ItemTable = self.config.resolve_table()[0]
        self.tokenizer = resolve_tokenizer(tokenizer)
        self.prefill_tokens, self.max_rounds = prefill_tokens, max_rounds
        self.max_turns = max_turns if max_turns is not None else 4 * max_rounds
        self.max_tokens, self.reward_kind = max_tokens, reward
        self.round_cost, self.bonus, self.penalty = (
            float(round_cost),
            float(consistency_bonus),
            float(inconsistency_penalty),
        )
        self.system_prompt = game_prompt(self.table, self.config.fmt, max_rounds)
        self.tools = _tool_schemas(self.table)
        self.observation_space = ChatMessages()
        self.action_space = AssistantTurn((self.table.tool_name, GUESS_TOOL))
        self._messages: list[dict[str, Any]] = []
        self._finished = True

    # -- gymnasium API -----------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = int(self.np_random.integers(2**63 - 1))
        self._facts: list[Fact] = []
        self._wrong: list[int] = []
        self._rounds = self._turn = 0
        self._finished = False
        history: list[dict[str, Any]] = []
        round_number, game_start = 1, 1
        self._target = int(np.random.default_rng([episode_seed, 2]).integers(self.table.size))
        prefill_rounds = 0
        if self.prefill_tokens:
            behaviour = dataclasses.replace(self.config.behaviour, avoid_target=True)
            rounds = simulate(self.table, behaviour, self.config.fmt, np.random.default_rng([episode_seed, 1]))
            budget = self.prefill_tokens - message_tokens(self.tokenizer, {"content": self.system_prompt})
            trajectory = build_trajectory(self.table, self.config.fmt, rounds, self.tokenizer, max(0, budget))
            history, prefill_rounds = trajectory.messages, len(trajectory.rounds)
            if trajectory.rounds:
                last = trajectory.rounds[-1]
                round_number = game_start = last.number + 1
                if not last.ends_game:
                    self._target = last.target
                    game = [r for r in trajectory.rounds if r.game == last.game]
                    game_start = game[0].number
                    for played in game:
                        self._facts += facts_of(played.feedback)
                        self._wrong.append(played.guess)
        self._round_number = round_number
        opening = (
            f"A new game begins: find the hidden target in at most {self.max_rounds} rounds."
            if game_start == round_number
            else f"Continue the game that started in round {game_start}: find its hidden target in at most "
            f"{self.max_rounds} more rounds."
        )
        self._messages = [
            {"role": "system", "content": self.system_prompt},
            *history,
            {"role": "user", "content": opening},
        ]
        self._tokens = sum(message_tokens(self.tokenizer, m) for m in self._messages)
        info = {
            "system_prompt": self.system_prompt,
            "tools": [json.loads(json.dumps(t)) for t in self.tools],
            "version_space": self._space_size(),
            "rounds": 0,
            "turn": 0,
            "tokens": self._tokens,
            "prefill_rounds": prefill_rounds,
            "prefill_tokens": self._tokens,
            "messages": list(self._messages),
        }
        return list(self._messages), info

    def step(self, action: Any) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        if not self._messages:
            raise ResetNeeded("Cannot call step() before reset()")
        if self._finished:
            note = {"role": "user", "content": "The episode has ended; call reset()."}
            return [note], 0.0, True, False, {"errors": ["the episode has ended"], "messages": list(self._messages)}
        self._turn += 1
        before = self._space_size()
        parsed = parse_turn(action)
        assistant: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        replies: list[dict[str, Any]] = []
        reward, consistent, errors = 0.0, [], list(parsed.errors)
        if parsed.calls:
            assistant["tool_calls"] = []
            for index, call in enumerate(parsed.calls):
                call_id = call.call_id or f"call_{self._turn}_{index}"
                arguments = call.arguments_json if call.arguments_json is not None else arguments_json(call.arguments)
                assistant["tool_calls"].append(
                    {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}
                )
                if self._finished:
                    content = NOT_EXECUTED
                else:
                    content, gained, verdict = self._run_call(call, errors)
                    reward += gained
                    consistent += verdict
                replies.append({"role": "tool", "tool_call_id": call_id, "name": call.name, "content": content})
        guessed_name = extract_answer(parsed.content)
        if guessed_name is not None and not self._finished:
            content, gained, verdict = self._guess(guessed_name, errors)
            reward += gained
            consistent += verdict
            replies.append({"role": "user", "content": content})
        elif not parsed.calls and guessed_name is None:
            replies.append({"role": "user", "content": NO_ACTION.format(tool=self.table.tool_name)})
        self._append(assistant, *replies)
        terminated = self._finished
        truncated = not terminated and (
            self._rounds >= self.max_rounds
            or self._turn >= self.max_turns
            or (self.max_tokens is not None and self._tokens >= self.max_tokens)
        )
        self._finished = terminated or truncated
        info: dict[str, Any] = {
            "version_space_before": before,
            "version_space": self._space_size(),
            "consistent_guess": consistent,
            "rounds": self._rounds,
            "turn": self._turn,
            "tokens": self._tokens,
            "errors": errors,
            "messages": list(self._messages),
        }
        if self._finished:
            info["target"] = self.table.names[self._target]
        return replies, reward, terminated, truncated, info

    # -- the game ----------------------------------------------------------------------------

    def _run_call(self, call: ParsedCall, errors: list[str]) -> tuple[str, float, list[bool]]:
        if call.error is not None:
            errors.append(call.error)
            return ARGUMENTS_FAILED.format(error=call.error), 0.0, []
        if call.name == self.table.tool_name:
            try:
                conditions = parse_conditions(self.table, call.arguments)
            except QueryError as error:
                errors.append(str(error))
                return json.dumps({"error": str(error)}, ensure_ascii=False), 0.0, []
            return tool_result_text(self.table, run_query(self.table, conditions), self.config.fmt), 0.0, []
        if call.name == GUESS_TOOL:
            name = call.arguments.get("name") if isinstance(call.arguments, Mapping) else None
            if not isinstance(name, str):
                errors.append("guess needs a string argument name")
                return json.dumps({"error": 'arguments must be {"name": NAME}'}), 0.0, []
            return self._guess(name.strip(), errors)
        problem = f"unknown tool {call.name[:80]!r}; tools: {self.table.tool_name}, {GUESS_TOOL}"
        errors.append(problem)
        return json.dumps({"error": problem}, ensure_ascii=False), 0.0, []

    def _guess(self, name: str, errors: list[str]) -> tuple[str, float, list[bool]]:
        try:
            guess = self.table.index(name)
        except KeyError:
            problem = f"{name[:80]!r} is not a name in the list; the guess does not count"
            errors.append(problem)
            return f"Unknown name: {problem}.", 0.0, []
        consistent = bool(version_space(self.table, self._facts, self._wrong)[guess])
        feedback = give_feedback(self.table, guess, self._target)
        self._rounds += 1
        text = feedback_text(self.table, feedback, self._round_number, self.max_rounds - self._rounds, chained=False)
        self._round_number += 1
        self._facts += facts_of(feedback)
        reward = -self.round_cost
        if feedback.correct:
            self._finished = True
            reward += 1.0
        else:
            self._wrong.append(guess)
        if self.reward_kind == "shaped":
            reward += self.bonus if consistent else -self.penalty
        return text, reward, [consistent]

    def _space_size(self) -> int:
        return int(np.count_nonzero(version_space(self.table, self._facts, self._wrong)))

    def _append(self, *messages: dict[str, Any]) -> None:
        self._messages.extend(messages)
        self._tokens += sum(message_tokens(self.tokenizer, m) for m in messages)


def _tool_schemas(table: ItemTable) -> list[dict[str, Any]]:
    """OpenAI schemas of the query tool and the guess tool."""
    condition = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["value", "numeric"]},
            "section": {"type": "string", "enum": [s.name for s in table.sections]},
            "values": {"type": "array", "items": {"type": "string"}, "description": "value conditions only"},
            "exclude": {"type": "boolean", "description": "value conditions: keep names holding none of the values"},
            "comparator": {"type": "string", "enum": [">", "<", "=="], "description": "numeric conditions only"},
            "threshold": {"type": "integer", "description": "numeric conditions only"},
        },
        "required": ["type", "section"],
    }
    return [
        {
            "type": "function",
            "function": {
                "name": table.tool_name,
                "description": f"List the {table.noun} names that meet every condition.",
                "parameters": {
                    "type": "object",
                    "properties": {"conditions": {"type": "array", "items": condition}},
                    "required": ["conditions"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": GUESS_TOOL,
                "description": f"Guess the hidden target {table.noun} by name.",
                "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            },
        },
    ]

"""Rounds rendered as chat messages, token-counted, and cut to a budget at a round boundary.

Round 1 of a game is ``[assistant <answer>guess</answer>, user feedback]``; every later round is
``[assistant tool call, tool result, assistant <answer>guess</answer>, user feedback]``. Each
message is rendered and counted once, as it is generated (no re-counting, no repeated string
concatenation), so building a trajectory is linear in its length.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ace_gym.longbench.render import feedback_text, guess_message, tool_call_message, tool_result_message
from ace_gym.longbench.simulator import Round
from ace_gym.longbench.tables import ItemTable
from ace_gym.runs.tokens import Tokenizer, message_tokens


def render_round(table: ItemTable, fmt: str, played: Round) -> list[dict[str, Any]]:
    """The chat messages of one round (layout in the module docstring)."""
    messages = []
    if played.query is not None:
        call_id = f"call_{played.number}"
        messages.append(tool_call_message(table, played.query.conditions, call_id))
        messages.append(tool_result_message(table, played.query, fmt, call_id))
    messages.append(guess_message(table, played.guess))
    text = feedback_text(table, played.feedback, played.number, played.remaining)
    messages.append({"role": "user", "content": text})
    return messages


@dataclass
class Trajectory:
    """The kept rounds and their messages (the history after the system message).

    ``starts[k]`` is the index in ``messages`` of round k's first message (``starts[-1]`` is
    ``len(messages)``); ``message_tokens[i]`` is message i's cost; ``next_round_tokens`` the cost
    of the first round that did not fit (None if generation stopped for another reason).
    """

    table: ItemTable
    fmt: str
    rounds: list[Round] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    message_tokens: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=lambda: [0])
    tokens: int = 0
    next_round_tokens: int | None = None

    def tool_message(self, k: int) -> int | None:
        """Index of round k's tool result message (None in a game's first round)."""
        return self.starts[k] + 1 if self.rounds[k].query is not None else None

    def feedback_message(self, k: int) -> int:
        """Index of round k's feedback message."""
        return self.starts[k + 1] - 1

    def append(self, played: Round, messages: Sequence[dict[str, Any]], costs: Sequence[int]) -> None:
        self.rounds.append(played)
        self.messages.extend(messages)
        self.message_tokens.extend(costs)
        self.starts.append(len(self.messages))
        self.tokens += sum(costs)


def build_trajectory(
    table: ItemTable, fmt: str, rounds: Iterable[Round], tokenizer: Tokenizer, budget: int
) -> Trajectory:
    """Render ``rounds`` in order and keep the longest prefix of whole rounds whose messages cost
    at most ``budget`` tokens: generation stops at the first round that would exceed it (its
    cost is kept as ``next_round_tokens``) or when ``rounds`` ends."""
    trajectory = Trajectory(table, fmt)
    for played in rounds:
        messages = render_round(table, fmt, played)
        costs = [message_tokens(tokenizer, m) for m in messages]
        if trajectory.tokens + sum(costs) > budget:
            trajectory.next_round_tokens = sum(costs)
            break
        trajectory.append(played, messages, costs)
    return trajectory

"""Gymnasium spaces of the chat interface: assistant turns in, lists of chat messages out."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ace_gym.spaces import ObjectSpace

ROLES = frozenset({"system", "user", "assistant", "tool"})
_PROSE = ("", "Let me check.", "Filling the slot now.", "I think this works: ", "好的。")


class ChatMessages(ObjectSpace):
    """Lists of OpenAI-shaped chat messages: dicts with a ``role`` and ``content`` str; ``tool``
    messages also carry ``tool_call_id`` and ``name`` strings."""

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(dtype=object, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, Any]]:
        count = int(self.np_random.integers(1, 4))
        return [
            {"role": "tool", "tool_call_id": f"call_0_{i}", "name": "get_current_grid_state", "content": "{}"}
            for i in range(count)
        ]

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(_is_message(m) for m in x)

    def to_jsonable(self, sample_n: Iterable[Any]) -> list[Any]:
        return [json.loads(json.dumps(s)) for s in sample_n]

    def from_jsonable(self, sample_n: list[Any]) -> list[Any]:
        return list(sample_n)

    def __repr__(self) -> str:
        return "ChatMessages()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatMessages)


def _is_message(message: Any) -> bool:
    if not isinstance(message, Mapping) or message.get("role") not in ROLES:
        return False
    if not isinstance(message.get("content"), str):
        return False
    return message["role"] != "tool" or (
        isinstance(message.get("tool_call_id"), str) and isinstance(message.get("name"), str)
    )


class AssistantTurn(ObjectSpace):
    """One assistant turn: any text, or an assistant message dict (``content`` and/or
    ``tool_calls``). ``sample`` writes a Hermes-format call to one of ``tool_names``."""

    def __init__(self, tool_names: Sequence[str], seed: int | np.random.Generator | None = None) -> None:
        self.tool_names = tuple(tool_names)
        super().__init__(dtype=object, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        rng = self.np_random
        name = self.tool_names[int(rng.integers(len(self.tool_names)))]
        arguments = {"row": int(rng.integers(0, 6)), "col": int(rng.integers(0, 6))}
        prose = _PROSE[int(rng.integers(len(_PROSE)))]
        call = json.dumps({"name": name, "arguments": arguments})
        return f"{prose}\n<tool_call>\n{call}\n</tool_call>"

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) or (isinstance(x, Mapping) and ("content" in x or "tool_calls" in x))

    def to_jsonable(self, sample_n: Iterable[Any]) -> list[Any]:
        return [json.loads(json.dumps(s)) for s in sample_n]

    def from_jsonable(self, sample_n: list[Any]) -> list[Any]:
        return list(sample_n)

    def __repr__(self) -> str:
        return f"AssistantTurn({len(self.tool_names)} tools)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AssistantTurn) and other.tool_names == self.tool_names

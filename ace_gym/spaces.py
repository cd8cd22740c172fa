"""Gymnasium spaces for text observations and tool-call actions."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

_PRINTABLE = tuple(chr(c) for c in range(32, 127))


@dataclass(frozen=True)
class ToolCall:
    """A typed tool call; ``arguments`` is a mapping or a JSON object string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)


class UnicodeText(spaces.Space[str]):
    """Any Python ``str`` of at most ``max_length`` characters (samples printable ASCII)."""

    def __init__(self, max_length: int = 1 << 31, seed: int | np.random.Generator | None = None) -> None:
        self.max_length = max_length
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        return "".join(self.np_random.choice(_PRINTABLE, size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length


class ToolCallSpace(spaces.Space[dict[str, Any]]):
    """Tool calls ``{"name": str, "arguments": dict | JSON string}`` (or :class:`ToolCall`).

    ``contains`` accepts any well-formed call, whatever the tool name or argument values: the env
    answers bad names and values with error observations. ``sample`` draws a call to one of
    ``tool_names`` with small random row/col/id/field arguments.
    """

    def __init__(self, tool_names: Sequence[str], seed: int | np.random.Generator | None = None) -> None:
        self.tool_names = tuple(tool_names)
        super().__init__(dtype=object, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        rng = self.np_random
        name = self.tool_names[int(rng.integers(len(self.tool_names)))]
        arguments: dict[str, Any] = {"row": int(rng.integers(-1, 8)), "col": int(rng.integers(-1, 8))}
        if rng.random() < 0.5:
            arguments["id"] = f"X{int(rng.integers(1000))}"
        if rng.random() < 0.5:
            arguments.update(field="name", operator="not_in", value=[])
        return {"name": name, "arguments": arguments}

    def contains(self, x: Any) -> bool:
        if isinstance(x, ToolCall):
            x = {"name": x.name, "arguments": x.arguments}
        return (
            isinstance(x, Mapping)
            and isinstance(x.get("name"), str)
            and isinstance(x.get("arguments", {}), (Mapping, str))
        )

    def to_jsonable(self, sample_n: Iterable[Any]) -> list[Any]:
        return [json.loads(json.dumps(s if isinstance(s, Mapping) else s.__dict__)) for s in sample_n]

    def from_jsonable(self, sample_n: list[Any]) -> list[Any]:
        return list(sample_n)

    def __repr__(self) -> str:
        return f"ToolCallSpace({len(self.tool_names)} tools)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCallSpace) and other.tool_names == self.tool_names

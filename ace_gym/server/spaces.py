"""Gymnasium spaces over the wire: a JSON description, the space rebuilt from it, its JSON schema.

ace-gym's spaces (:class:`~ace_gym.spaces.UnicodeText`, :class:`~ace_gym.spaces.ToolCallSpace`,
:class:`~ace_gym.wrappers.ChatMessages`, :class:`~ace_gym.wrappers.AssistantTurn`) travel
exactly; any other space travels as ``{"type": <class name>, "repr": ...}`` and is rebuilt as an
:class:`OpaqueSpace` that says what it stands for.
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

from ace_gym.errors import ConfigError
from ace_gym.spaces import ToolCallSpace, UnicodeText
from ace_gym.wrappers.chat_spaces import ROLES, AssistantTurn, ChatMessages

_TOOL_CALL_SCHEMA_ARGUMENTS = {"anyOf": [{"type": "object"}, {"type": "string"}]}


class OpaqueSpace(spaces.Space[Any]):
    """A server-side space ace-gym cannot rebuild: it keeps the description; ``contains`` and
    ``sample`` raise ConfigError naming the space."""

    def __init__(self, description: dict[str, Any]) -> None:
        self.description = description
        super().__init__(dtype=object)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        raise ConfigError("space", self.description, "is not known to the client: it cannot be sampled here")

    def contains(self, x: Any) -> bool:
        raise ConfigError("space", self.description, "is not known to the client: membership cannot be checked")

    def __repr__(self) -> str:
        return f"OpaqueSpace({self.description.get('repr', self.description.get('type'))})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueSpace) and other.description == self.description


def describe_space(space: spaces.Space[Any]) -> dict[str, Any]:
    """A JSON description of ``space`` (see the module docstring)."""
    if isinstance(space, UnicodeText):
        return {"type": "UnicodeText", "max_length": space.max_length}
    if isinstance(space, ToolCallSpace):
        return {"type": "ToolCallSpace", "tool_names": list(space.tool_names)}
    if isinstance(space, ChatMessages):
        return {"type": "ChatMessages"}
    if isinstance(space, AssistantTurn):
        return {"type": "AssistantTurn", "tool_names": list(space.tool_names)}
    return {"type": type(space).__name__, "repr": repr(space)}


def space_from_description(description: dict[str, Any]) -> spaces.Space[Any]:
    """The space a :func:`describe_space` description stands for."""
    kind = description.get("type")
    if kind == "UnicodeText":
        return UnicodeText(max_length=int(description["max_length"]))
    if kind == "ToolCallSpace":
        return ToolCallSpace([str(name) for name in description["tool_names"]])
    if kind == "ChatMessages":
        return ChatMessages()
    if kind == "AssistantTurn":
        return AssistantTurn([str(name) for name in description["tool_names"]])
    return OpaqueSpace(description)


def space_schema(space: spaces.Space[Any]) -> dict[str, Any]:
    """The JSON schema of the values of ``space`` (``{}``, any value, for spaces not listed above)."""
    if isinstance(space, UnicodeText):
        return {"type": "string", "maxLength": space.max_length}
    if isinstance(space, ToolCallSpace):
        return {
            "type": "object",
            "properties": {"name": {"enum": list(space.tool_names)}, "arguments": _TOOL_CALL_SCHEMA_ARGUMENTS},
            "required": ["name"],
        }
    if isinstance(space, ChatMessages):
        message = {
            "type": "object",
            "properties": {"role": {"enum": sorted(ROLES)}, "content": {"type": "string"}},
            "required": ["role", "content"],
        }
        return {"type": "array", "items": message}
    if isinstance(space, AssistantTurn):
        return {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"content": {}, "tool_calls": {}}}]}
    return {}

"""The tool set of a domain: the table binding each tool key to its function, the OpenAI schemas
generated from the functions' signatures and docstrings (read-only, shared by every episode), and
the dispatcher."""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from ace_gym.domains import Domain
from ace_gym.domains.tool_names import ToolKey, tool_names
from ace_gym.tools.functions import (
    check_global_constraints,
    check_slot_constraints,
    done,
    get_current_grid_state,
    get_global_check_budget,
    get_hidden_slot_query_budget,
    get_item_attributes,
    get_item_info,
    get_slot_id,
    query_candidate_from_attribute,
    set_slot,
)
from ace_gym.tools.readonly import ReadOnlyDict, ReadOnlyList, read_only
from ace_gym.tools.replies import ToolReply, echo, invalid, unknown_tool
from ace_gym.tools.state import EpisodeState

TOOL_FUNCTIONS: dict[ToolKey, Callable[..., ToolReply]] = {
    "set_slot": set_slot,
    "grid_state": get_current_grid_state,
    "slot_query_budget": get_hidden_slot_query_budget,
    "global_check_budget": get_global_check_budget,
    "slot_id": get_slot_id,
    "done": done,
    "query": query_candidate_from_attribute,
    "item_info": get_item_info,
    "item_attributes": get_item_attributes,
    "slot_check": check_slot_constraints,
    "global_check": check_global_constraints,
}
"""The function of every tool key (names: :data:`ace_gym.domains.tool_names.TOOL_NAMES`)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool bound to a domain: its key, public name, function, parameters (in the function's
    order, ``state`` left out), the required ones among them and its (read-only) schema."""

    key: ToolKey
    name: str
    function: Callable[..., ToolReply]
    parameters: tuple[str, ...]
    required: frozenset[str]
    schema: ReadOnlyDict

    def invoke(self, state: EpisodeState, arguments: dict[str, Any]) -> ToolReply:
        """``function(state, **values)`` with the values ``arguments`` gives for the tool's
        parameters: a left-out optional one takes its default and keys the tool does not take are
        ignored, as the published ``**kwargs`` did. When ``arguments`` lacks a required one, the
        failed reply naming every one it lacks (in the function's order), without calling the tool."""
        values = {}
        for parameter in self.parameters:
            if parameter in arguments:
                values[parameter] = arguments[parameter]
            elif parameter in self.required:
                missing = [p for p in self.parameters if p in self.required and p not in arguments]
                return invalid(f"missing required argument(s): {', '.join(missing)}")
        return self.function(state, **values)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    summary, _, rest = inspect.cleandoc(doc).partition("\n\n")
    params = {}
    for line in rest.splitlines():
        name, sep, text = line.partition(": ")
        if sep:
            params[name.strip()] = text.strip()
    return summary.strip(), params


_SCALAR_TYPES: dict[Any, str] = {int: "integer", str: "string", float: "number", bool: "boolean", type(None): "null"}


def type_schema(annotation: Any) -> dict[str, Any]:
    """The JSON schema of a tool parameter's type, exactly as pydantic's
    ``TypeAdapter(annotation).json_schema()`` writes it (keys in its order) for the types tool
    parameters use: scalars, ``list[...]``, a ``Literal`` of strings and unions of these.
    TypeError for any other type."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal and all(type(a) is str for a in args):
        return {"enum": list(args), "type": "string"}
    if origin is list and len(args) == 1:
        return {"items": type_schema(args[0]), "type": "array"}
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [type_schema(a) for a in args]}
    if annotation in _SCALAR_TYPES:
        return {"type": _SCALAR_TYPES[annotation]}
    raise TypeError(f"no JSON schema for the tool parameter type {annotation!r}")


def _parameter_schema(annotation: Any, description: str, default: Any) -> dict[str, Any]:
    """The JSON schema of one parameter: its type's schema, then the description and default, then
    any ``enum`` the type implies (a Literal), in that key order."""
    schema = type_schema(annotation)
    enum = schema.pop("enum", None)
    schema["description"] = description
    if default is not inspect.Parameter.empty:
        schema["default"] = default
    if enum is not None:
        schema["enum"] = enum
    return schema


def _make_tool(key: ToolKey, name: str, function: Callable[..., ToolReply], domain: Domain) -> Tool:
    signature = inspect.signature(function)
    summary, docs = _parse_docstring((function.__doc__ or "").format(title=domain.tool_title))
    parameters = [p for p in signature.parameters.values() if p.name != "state"]
    hints = inspect.get_annotations(function, eval_str=True)
    properties = {p.name: _parameter_schema(hints[p.name], docs[p.name], p.default) for p in parameters}
    required = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    schema = {
        "type": "function",
        "function": {
            "name": name,
            "description": summary,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }
    names = tuple(p.name for p in parameters)
    return Tool(key, name, function, names, frozenset(required), read_only(schema))


class ToolSet:
    """The 11 tools of one domain (6 common + 5 domain tools), by public name."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        tools = [_make_tool(key, name, TOOL_FUNCTIONS[key], domain) for key, name in tool_names(domain).items()]
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.names: tuple[str, ...] = tuple(self.tools)
        self.invokers: dict[str, Callable[[EpisodeState, dict[str, Any]], ToolReply]] = {
            t.name: t.invoke for t in tools
        }
        """Each tool's :meth:`Tool.invoke` by name (kept for callers of earlier releases; :meth:`call`
        is the dispatch path)."""
        self.schemas = ReadOnlyList([t.schema for t in tools])
        """The tools' OpenAI schemas, in order: read-only, shared by every env of the domain."""

    def __reduce__(self) -> tuple[Callable[[Domain], ToolSet], tuple[Domain]]:
        """Pickled as its domain: unpickling gives that domain's shared tool set."""
        return toolset, (self.domain,)

    def call(self, state: EpisodeState, name: Any, arguments: Any) -> ToolReply:
        """Run one tool call: the tool named ``name`` with ``arguments`` (a dict, a JSON object
        as text, any other mapping, or None or blank text for none), through :meth:`Tool.invoke`.
        Never raises for bad input: unknown names, non-object or missing arguments and bad values
        become failed replies; keys the tool does not take are ignored."""
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return unknown_tool(name, self.domain.name)
        if type(arguments) is not dict:
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except (ValueError, RecursionError) as error:
                    return invalid(f"arguments are not valid JSON ({echo(str(error))})")
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, Mapping):
                return invalid(f"arguments must be a JSON object, got {type(arguments).__name__}")
            if type(arguments) is not dict:  # its own keys only: a defaultdict must not fill gaps
                arguments = dict(arguments)
        return tool.invoke(state, arguments)


_TOOLSETS: dict[str, ToolSet] = {}


def toolset(domain: Domain) -> ToolSet:
    """The (immutable, shared) tool set of ``domain``."""
    found = _TOOLSETS.get(domain.name)
    if found is None:
        found = _TOOLSETS[domain.name] = ToolSet(domain)
    return found

"""The one table of tool names: a stable key per tool, and its public name in each domain.

Code that calls, lists or recognises a tool names it by key (``tool_name("query", domain)``),
never by building or parsing the string: the five domain tools carry the domain's ``tool_noun``
(``query_course_candidate_from_attribute``), the six common tools are spelled the same in every
domain. The keys are the vocabulary of agents, prompts, benchmarks and tests alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Literal, get_args

from ace_gym.domains import Domain, get_domain

ToolKey = Literal[
    "set_slot",
    "grid_state",
    "slot_query_budget",
    "global_check_budget",
    "slot_id",
    "done",
    "query",
    "item_info",
    "item_attributes",
    "slot_check",
    "global_check",
]
TOOL_KEYS: tuple[ToolKey, ...] = get_args(ToolKey)

TOOL_NAMES: dict[ToolKey, str] = {
    "set_slot": "set_slot",
    "grid_state": "get_current_grid_state",
    "slot_query_budget": "get_hidden_slot_query_budget",
    "global_check_budget": "get_global_check_budget",
    "slot_id": "get_slot_id",
    "done": "done",
    "query": "query_{noun}_candidate_from_attribute",
    "item_info": "get_{noun}_item_info",
    "item_attributes": "get_{noun}_item_attributes",
    "slot_check": "check_{noun}_slot_constraints",
    "global_check": "check_{noun}_global_constraints",
}
"""Key -> public name, ``{noun}`` standing for the domain's ``tool_noun``; in the published order
(six common tools, then the five domain tools), which is the order of schemas and action spaces."""


def tool_names(domain: Domain | str) -> Mapping[ToolKey, str]:
    """Every tool of ``domain`` (a Domain or its name): key -> public name, in table order (read-only)."""
    return _names(_noun(domain))


def tool_name(key: ToolKey, domain: Domain | str) -> str:
    """The public name of tool ``key`` in ``domain``; KeyError for an unknown key."""
    return _names(_noun(domain))[key]


def tool_key(name: str, domain: Domain | str) -> ToolKey | None:
    """The key of the tool called ``name`` in ``domain``, or None when the domain has no such tool."""
    return _keys(_noun(domain)).get(name)


def _noun(domain: Domain | str) -> str:
    return (get_domain(domain) if isinstance(domain, str) else domain).tool_noun


@cache
def _names(noun: str) -> Mapping[ToolKey, str]:
    return MappingProxyType({key: pattern.format(noun=noun) for key, pattern in TOOL_NAMES.items()})


@cache
def _keys(noun: str) -> Mapping[str, ToolKey]:
    return MappingProxyType({name: key for key, name in _names(noun).items()})

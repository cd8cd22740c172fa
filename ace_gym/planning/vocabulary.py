"""Words for the tools planning wrappers add: distractor names per domain, synonym-built names for
the replacement of a broken tool, and the rules such names must pass.

Distractors (:func:`draw_distractors`) are ``<verb>_<noun>`` names: *related* nouns speak of the
domain's items (``forecast_course_popularity``), *unrelated* ones of anything else
(``summarize_news_headlines``). Each noun has a *scope* that fixes the tool's parameters: a
hidden cell (``row``, ``col``), a list of item ``ids``, the whole grid (none), or free text
(``query``). A replacement (:func:`replacement_name`) swaps every word of the original name for a
synonym, keeping only the domain noun, and renames its parameters (:func:`renamed_parameters`).
Every name is checked against the names the agent already has: it may neither equal, contain nor
be contained in one of them (:func:`clashes`), and a replacement is never an affix variant of the
original such as ``query_v2`` or ``new_query`` (:func:`is_variant_name`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ace_gym.domains import Domain
from ace_gym.tools.readonly import ReadOnlyDict, read_only

VERBS: tuple[str, ...] = (
    "rank",
    "estimate",
    "forecast",
    "export",
    "summarize",
    "compare",
    "score",
    "predict",
    "audit",
    "archive",
    "benchmark",
    "recommend",
    "translate",
    "sync",
    "notify",
)
SCOPES = ("cell", "items", "grid", "text")


@dataclass(frozen=True)
class Distractor:
    """A distractor tool: its name, the scope its parameters follow, and a one-line description."""

    name: str
    scope: str
    description: str


def _related_nouns(domain: Domain) -> tuple[tuple[str, str], ...]:
    """(noun, scope) pairs about the domain's items, built from its words."""
    item, plural = domain.item_label.replace(" ", "_"), domain.item_plural.replace(" ", "_")
    return (
        (f"{item}_popularity", "cell"),
        (f"{item}_reviews", "items"),
        (f"{item}_price_history", "items"),
        (f"{item}_availability", "cell"),
        (f"{plural}_trends", "grid"),
        (f"{item}_ratings", "items"),
        (f"{domain.name}_plan_report", "grid"),
        (f"{item}_demand", "cell"),
    )


UNRELATED_NOUNS: tuple[tuple[str, str], ...] = (
    ("stock_quotes", "text"),
    ("currency_rates", "text"),
    ("weather_outlook", "text"),
    ("news_headlines", "text"),
    ("sports_scores", "text"),
    ("email_inbox", "text"),
    ("calendar_invites", "text"),
    ("music_playlists", "text"),
    ("podcast_episodes", "text"),
    ("flight_status", "text"),
)


def clashes(name: str, existing: Iterable[str]) -> bool:
    """Whether ``name`` equals, contains or is contained in one of ``existing``."""
    return any(name in other or other in name for other in existing)


def draw_distractors(
    domain: Domain, count: int, style: str, existing: Sequence[str], rng: np.random.Generator
) -> list[Distractor]:
    """``count`` distinct distractors of ``style`` ("related" or "unrelated") drawn with ``rng``,
    none clashing with ``existing`` names or with each other. ValueError when the vocabulary has
    fewer than ``count`` admissible names."""
    nouns = _related_nouns(domain) if style == "related" else UNRELATED_NOUNS
    pool = [(f"{verb}_{noun}", scope, verb, noun) for verb in VERBS for noun, scope in nouns]
    chosen: list[Distractor] = []
    for index in rng.permutation(len(pool)).tolist():
        name, scope, verb, noun = pool[index]
        if clashes(name, [*existing, *(d.name for d in chosen)]):
            continue
        chosen.append(Distractor(name, scope, _description(verb, noun, scope)))
        if len(chosen) == count:
            return chosen
    raise ValueError(f"only {len(chosen)} {style} distractor names are available for {domain.name}, not {count}")


def distractor_capacity(domain: Domain, style: str) -> int:
    """How many distractor names the vocabulary holds for ``domain`` and ``style`` (before clashes)."""
    return len(VERBS) * len(_related_nouns(domain) if style == "related" else UNRELATED_NOUNS)


def _description(verb: str, noun: str, scope: str) -> str:
    subject = noun.replace("_", " ")
    where = {
        "cell": " for the candidates of one grid cell",
        "items": " for a list of item ids",
        "grid": " for the whole plan",
        "text": " matching a free-text query",
    }[scope]
    return f"{verb.capitalize()} {subject}{where}."


def distractor_parameters(scope: str) -> tuple[dict[str, object], list[str]]:
    """JSON-schema ``properties`` and ``required`` list of a distractor of ``scope``."""
    if scope == "cell":
        properties: dict[str, object] = {
            "row": {"type": "integer", "description": "Row index as an integer."},
            "col": {"type": "integer", "description": "Column index as an integer."},
        }
    elif scope == "items":
        properties = {"ids": {"type": "array", "items": {"type": "string"}, "description": "Item ids as strings."}}
    elif scope == "text":
        properties = {"query": {"type": "string", "description": "What to look up."}}
    else:
        properties = {}
    return properties, list(properties)


# -- replacement names ------------------------------------------------------------------------------

SYNONYMS: dict[str, tuple[str, ...]] = {
    "set": ("assign", "place", "fill"),
    "slot": ("cell", "position"),
    "get": ("fetch", "retrieve", "read", "obtain"),
    "current": ("present", "live"),
    "grid": ("board", "layout"),
    "state": ("status", "snapshot"),
    "hidden": ("open", "unfilled", "blank"),
    "query": ("search", "filter", "find", "lookup"),
    "budget": ("allowance", "quota"),
    "global": ("overall", "plan_wide"),
    "check": ("verify", "validate", "audit"),
    "id": ("identifier", "key"),
    "done": ("finish", "submit", "complete"),
    "candidate": ("option", "choice"),
    "from": ("by", "using"),
    "attribute": ("property", "trait", "feature"),
    "item": ("entry", "record", "listing"),
    "info": ("details", "profile"),
    "attributes": ("properties", "traits", "features"),
    "constraints": ("rules", "requirements", "limits"),
}
"""Synonyms of every word in the env's tool names (domain nouns are kept)."""
PARAMETER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "row": ("row_index", "row_number", "line"),
    "col": ("column", "col_index", "column_number"),
    "id": ("item_key", "identifier", "entry_id"),
    "ids": ("item_keys", "identifiers", "entry_ids"),
    "field": ("property", "attribute_name", "trait"),
    "operator": ("comparison", "relation", "op"),
    "value": ("target_value", "threshold", "target"),
}
VARIANT_MARKERS = frozenset({"new", "old", "alt", "alternative", "backup", "fallback", "legacy", "copy", "tmp", "ii"})


def replacement_name(original: str, domain: Domain, existing: Sequence[str], rng: np.random.Generator) -> str:
    """A synonym-built name for ``original``: every word but the domain noun replaced, drawn with
    ``rng`` until the name neither clashes with ``existing`` nor is an affix variant of it.
    ValueError if no synonym covers a word or no admissible name exists."""
    noun_words = domain.tool_noun.split("_")
    words = original.split("_")
    options = [(word,) if word in noun_words else SYNONYMS.get(word, ()) for word in words]
    missing = [word for word, choices in zip(words, options, strict=True) if not choices]
    if missing:
        raise ValueError(f"no synonym for {', '.join(missing)} in {original}")
    others = [name for name in existing if name != original]
    for _ in range(64):
        name = "_".join(choices[int(rng.integers(len(choices)))] for choices in options)
        if not clashes(name, [original, *others]) and not is_variant_name(original, name):
            return name
    raise ValueError(f"no admissible replacement name for {original}")


def renamed_parameters(parameters: Sequence[str], rng: np.random.Generator) -> dict[str, str]:
    """``{new name: original name}`` for ``parameters``, each renamed to a drawn synonym."""
    renamed = {}
    for parameter in parameters:
        choices = PARAMETER_SYNONYMS.get(parameter, (f"{parameter}_value",))
        renamed[choices[int(rng.integers(len(choices)))]] = parameter
    return renamed


def is_variant_name(original: str, candidate: str) -> bool:
    """Whether ``candidate`` is ``original`` with affixes such as ``_v2``, ``new_`` or ``_alt``
    (or one name contains the other)."""
    if original in candidate or candidate in original:
        return True

    def core(name: str) -> list[str]:
        return [w for w in name.lower().split("_") if w and w not in VARIANT_MARKERS and not _is_version(w)]

    return core(original) == core(candidate)


def _is_version(word: str) -> bool:
    return word.isdigit() or (word[0] == "v" and word[1:].isdigit())


def tool_schema(name: str, description: str, properties: Mapping[str, Any], required: Sequence[str]) -> ReadOnlyDict:
    """An OpenAI function schema, shaped like the env's own and read-only like them
    (:mod:`ace_gym.tools.readonly`)."""
    return read_only(
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": dict(properties), "required": list(required)},
            },
        }
    )

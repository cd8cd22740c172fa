"""The published ACE dataset format: pydantic models, a validating loader, and compilation.

Data flows one way: JSON file -> validated :class:`DatasetFile` -> :class:`CompiledInstance`
(numpy arrays the tools and the scorer work on). A broken file raises one :class:`DatasetError`
naming the file, the JSON path and the problem, before anything is cached or returned.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import zlib
from collections.abc import Sequence
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ace_gym.constraints import CompiledGlobalRule, compile_global_rule, slot_rule_mask
from ace_gym.domains import DOMAINS, Domain, NumericAttribute
from ace_gym.errors import ConfigError, DatasetError, did_you_mean

_STRICT = ConfigDict(strict=True, extra="forbid")


class Position(BaseModel):
    """A grid cell."""

    model_config = _STRICT
    row: int
    col: int


class InstanceMeta(BaseModel):
    """Generation metadata of one instance (docs/compatibility.md §1.3); generators may add extra keys."""

    model_config = ConfigDict(strict=True, extra="allow")
    rows: int
    cols: int
    hidden_slots: int
    branch_budget: int
    branch_slot_count: int
    branch_budget_allocations: list[int]
    candidates_per_slot: int
    requested_candidates_per_slot: int
    decoy_generation_final_stage: int
    decoy_generation_final_stage_label: str


class SlotEntry(BaseModel):
    """One hidden cell: its rules (``slot_constraints``) and its K candidates."""

    model_config = _STRICT
    row: int
    col: int
    truth_id: str
    is_hidden: bool
    slot_constraints: dict[str, int | str | list[str]]
    candidate_ids: list[str]
    decoy_ids: list[str]
    filter_candidate_ids: list[str]
    is_branch_slot: bool
    branch_rank: int | None
    allocated_budget: int
    decoy_generation_final_stage: int | None
    decoy_generation_final_stage_label: str | None


class Instance(BaseModel):
    """One ACE task instance, field for field as published (docs/compatibility.md §1.3)."""

    model_config = _STRICT
    domain: str
    meta: InstanceMeta
    global_constraints: dict[str, int | str]
    item_pool: dict[str, dict[str, int | str]]
    truth_solution: list[list[str]]
    partial_solution: list[list[str | None]]
    hidden_slots: list[Position]
    slots: list[SlotEntry]
    task_instruction: str
    instance_id: str


class DatasetFile(BaseModel):
    """A published dataset file: one domain, instances ordered ``for h in H: for b in B``."""

    model_config = _STRICT
    domain: str
    num_instances: int
    rows: int
    cols: int
    hidden_slots: list[int]
    branch_budget: list[int]
    candidates_per_slot: int
    instances: list[Instance]


# --------------------------------------------------------------------------------------------
# compiled form


class CompiledSlot:
    """A hidden cell ready for the tools: candidate indices, slot validity, cached texts."""

    __slots__ = (
        "allowed_ids_text",
        "candidate_ids",
        "candidate_items",
        "candidates",
        "cell",
        "col",
        "item_of_id",
        "row",
        "rule_count",
        "rules",
        "slot_valid",
        "valid_items",
    )

    def __init__(
        self,
        row: int,
        col: int,
        cell: int,
        candidate_ids: tuple[str, ...],
        candidates: np.ndarray,
        rules: tuple[tuple[str, str, str, int], ...],
        slot_valid: np.ndarray,
    ) -> None:
        self.row, self.col, self.cell = row, col, cell
        self.candidate_ids = candidate_ids
        self.candidates = candidates
        self.candidate_items: tuple[int, ...] = tuple(candidates.tolist())
        self.item_of_id: dict[str, int] = dict(zip(candidate_ids, self.candidate_items, strict=True))
        self.rules = rules  # (rule name, attribute, kind, bound) in the domain's rule order
        self.rule_count = len(rules)
        self.slot_valid = slot_valid
        self.valid_items: frozenset[int] = frozenset(candidates[slot_valid].tolist())
        # the published release leaks the sorted candidate list in set_slot errors (docs/compatibility.md §3.3)
        self.allowed_ids_text = repr(sorted(candidate_ids))


class CompiledInstance:
    """Read-only arrays compiled from one validated :class:`Instance`.

    Items are numbered in ``item_pool`` order. ``numeric[attr]`` is an int64 column over items;
    ``categorical[attr]`` is ``(codes, vocabulary)``. Grids are flat row-major int32 arrays of item
    indices with -1 for an empty cell. ``cell_slot[cell]`` is the hidden-slot index or -1.
    """

    def __init__(self, instance: Instance, domain: Domain) -> None:
        self.instance = instance
        self.domain = domain
        self.instance_id = instance.instance_id
        self.rows, self.cols = instance.meta.rows, instance.meta.cols
        self.n_cells = self.rows * self.cols
        self.hidden_count = len(instance.slots)
        self.decoy_budget = instance.meta.branch_budget
        self.item_ids: tuple[str, ...] = tuple(instance.item_pool)
        self.item_index: dict[str, int] = {item_id: i for i, item_id in enumerate(self.item_ids)}
        self.items: tuple[dict[str, int | str], ...] = tuple(instance.item_pool.values())
        self.numeric: dict[str, np.ndarray] = {}
        self.categorical: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
        for attribute in domain.attributes:
            column = [item[attribute.name] for item in self.items]
            if isinstance(attribute, NumericAttribute):
                self.numeric[attribute.name] = _frozen(np.asarray(column, dtype=np.int64))
            else:
                vocabulary = tuple(sorted({str(v) for v in column} | set(attribute.values)))
                code = {value: i for i, value in enumerate(vocabulary)}
                codes = np.asarray([code[str(value)] for value in column], dtype=np.int32)
                self.categorical[attribute.name] = (_frozen(codes), vocabulary)
        self.truth = _frozen(
            np.asarray([self.item_index[i] for row in instance.truth_solution for i in row], dtype=np.int32)
        )
        self.initial = _frozen(
            np.asarray(
                [-1 if i is None else self.item_index[i] for row in instance.partial_solution for i in row],
                dtype=np.int32,
            )
        )
        self.initial_grid: tuple[int, ...] = tuple(self.initial.tolist())
        self.visible_ids: frozenset[str] = frozenset(
            i for row in instance.partial_solution for i in row if i is not None
        )
        cell_slot = np.full(self.n_cells, -1, dtype=np.int32)
        slots = []
        rule_order = {rule.name: k for k, rule in enumerate(domain.slot_rules)}
        rule_by_name = {rule.name: rule for rule in domain.slot_rules}
        for s, entry in enumerate(instance.slots):
            cell = entry.row * self.cols + entry.col
            cell_slot[cell] = s
            candidates = np.asarray([self.item_index[i] for i in entry.candidate_ids], dtype=np.int32)
            names = sorted(entry.slot_constraints["active_rule_names"], key=rule_order.__getitem__)  # type: ignore[arg-type]
            rules = tuple(
                (name, rule_by_name[name].attribute, rule_by_name[name].kind, int(entry.slot_constraints[name]))  # type: ignore[arg-type]
                for name in names
            )
            valid = np.ones(len(candidates), dtype=bool)
            for _, rule_attribute, kind, bound in rules:
                valid &= slot_rule_mask(self.numeric[rule_attribute][candidates], kind, bound)
            slots.append(
                CompiledSlot(
                    entry.row,
                    entry.col,
                    cell,
                    tuple(entry.candidate_ids),
                    _frozen(candidates),
                    rules,
                    _frozen(valid),
                )
            )
        self.cell_slot = _frozen(cell_slot)
        self.cell_slot_list: tuple[int, ...] = tuple(cell_slot.tolist())
        self.slots: tuple[CompiledSlot, ...] = tuple(slots)
        self.global_rules: tuple[CompiledGlobalRule, ...] = tuple(
            compile_global_rule(
                rule, int(instance.global_constraints[rule.name]), domain, self.numeric, self.categorical
            )
            for rule in domain.global_rules
        )

    origin: tuple[Dataset, int] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # pickles as a reference into its (file-backed) dataset when it has one
        if self.origin is not None:
            return (_compiled_from, self.origin)
        return (CompiledInstance, (self.instance, self.domain))

    @cached_property
    def allowed_fields(self) -> tuple[str, ...]:
        """Queryable fields: item keys minus the id key, sorted (docs/compatibility.md §3.4)."""
        return tuple(sorted(k for k in self.domain.item_keys if k != self.domain.id_key))

    def slot_at(self, row: int, col: int) -> CompiledSlot | None:
        """The hidden slot at (row, col), or None for a visible cell. Caller checks the range."""
        s = self.cell_slot_list[row * self.cols + col]
        return None if s < 0 else self.slots[s]


def _compiled_from(dataset: Dataset, index: int) -> CompiledInstance:
    return dataset.compiled(index)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


# --------------------------------------------------------------------------------------------
# loading


class Dataset(Sequence[Instance]):
    """A validated dataset file; instances compile lazily and are cached (shared read-only)."""

    def __init__(self, model: DatasetFile, source: str, cache_key: tuple[Any, ...] | None = None) -> None:
        self.model = model
        self.source = source
        self.domain: Domain = DOMAINS[model.domain]
        self._cache_key = cache_key
        self._compiled: dict[int, CompiledInstance] = {}
        self._lock = threading.Lock()
        self.instance_ids: tuple[str, ...] = tuple(i.instance_id for i in model.instances)
        self._index_of_id = {iid: k for k, iid in enumerate(self.instance_ids)}

    def __len__(self) -> int:
        return len(self.model.instances)

    def __getitem__(self, index: int) -> Instance:  # type: ignore[override]
        return self.model.instances[index]

    def index_of(self, instance_id: str) -> int:
        """Index of ``instance_id``; ConfigError with a suggestion when absent."""
        try:
            return self._index_of_id[instance_id]
        except (KeyError, TypeError):
            raise ConfigError(
                "instance_id",
                instance_id,
                f"not in {self.source}{did_you_mean(instance_id, self.instance_ids)}",
            ) from None

    def compiled(self, index: int) -> CompiledInstance:
        """The compiled form of instance ``index`` (built once per process)."""
        found = self._compiled.get(index)
        if found is None:
            with self._lock:
                found = self._compiled.get(index)
                if found is None:
                    found = CompiledInstance(self.model.instances[index], self.domain)
                    found.origin = (self, index)
                    self._compiled[index] = found
        return found

    def __reduce__(self) -> tuple[Any, ...]:
        # a file-backed dataset re-opens from the per-process cache instead of pickling its data
        if self._cache_key is not None:
            return (load_dataset, (self.source,))
        return (Dataset, (self.model, self.source))


_CACHE: dict[tuple[Any, ...], Dataset] = {}
_CACHE_LOCK = threading.Lock()
BUNDLED_DATASETS: tuple[str, ...] = ("5x5", "5x7")


def bundled_dataset_path(name: str, domain: str) -> Path:
    """Path of the bundled dataset ``name`` (e.g. "5x5") for ``domain``; ConfigError if unknown."""
    if name not in BUNDLED_DATASETS:
        raise ConfigError(
            "dataset",
            name,
            f"not a bundled dataset ({', '.join(BUNDLED_DATASETS)}) and not an existing file"
            f"{did_you_mean(name, BUNDLED_DATASETS)}",
        )
    folder = resources.files("ace_gym") / "data" / name
    for entry in folder.iterdir():
        if entry.name.startswith(f"{domain}_dataset_"):
            return Path(str(entry))
    raise ConfigError("domain", domain, f"bundled dataset {name} has no file for this domain")


def resolve_dataset(dataset: str | os.PathLike[str], domain: str) -> Dataset:
    """Load ``dataset`` (a bundled name or a file path) and check it is of ``domain``."""
    path = Path(dataset)
    loaded = load_dataset(path if path.is_file() else bundled_dataset_path(str(dataset), domain))
    if loaded.domain.name != domain:
        raise ConfigError("dataset", str(dataset), f"holds domain {loaded.domain.name!r}, not {domain!r}")
    return loaded


def load_dataset(path: str | os.PathLike[str]) -> Dataset:
    """Validate and load a dataset file (``.json`` or ``.json.gz``), once per process.

    Raises DatasetError (naming file, JSON path and problem) for any schema or consistency
    problem, and FileNotFoundError for a missing file. Nothing is cached for a broken file.
    """
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            raise DatasetError(str(path), "$", f"not a valid gzip file ({error})") from None
    dataset = parse_dataset(raw, str(path), cache_key=key)
    with _CACHE_LOCK:
        return _CACHE.setdefault(key, dataset)


def parse_dataset(raw: bytes | str, source: str, cache_key: tuple[Any, ...] | None = None) -> Dataset:
    """Validate a dataset from JSON text; ``source`` names it in errors."""
    try:
        model = DatasetFile.model_validate_json(raw)
    except ValidationError as error:
        raise _first_problem(error, raw, source) from None
    check_dataset(model, source)
    return Dataset(model, source, cache_key)


def _first_problem(error: ValidationError, raw: bytes | str, source: str) -> DatasetError:
    """The first validation problem at its path in the JSON document, with every message there.

    pydantic adds union-member tags (``int``, ``str``, ``list[str]``) to ``loc`` and reports one
    error per member; they are not part of the document, so the path is cut where the document
    ends and the members' messages are joined.
    """
    try:
        document: Any = json.loads(raw)
    except (ValueError, RecursionError):
        document = None
    problems = error.errors()
    located = [(_document_loc(p["loc"], p["type"], document), p["msg"]) for p in problems]
    first = located[0][0]
    messages = dict.fromkeys(msg for loc, msg in located if loc == first)
    return DatasetError(source, _json_path(first), "; ".join(messages))


def _document_loc(loc: Sequence[int | str], error_type: str, document: Any) -> tuple[int | str, ...]:
    if document is None:
        return tuple(loc)
    node, kept = document, []
    for k, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            if error_type == "missing" and k == len(loc) - 1 and isinstance(node, dict):
                kept.append(part)  # a required key absent from the document
            break
        kept.append(part)
    return tuple(kept)


def _json_path(loc: Sequence[int | str]) -> str:
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def check_dataset(model: DatasetFile, source: str) -> None:
    """Consistency checks the schema cannot express; raises DatasetError on the first problem."""
    if model.domain not in DOMAINS:
        raise DatasetError(source, "$.domain", f"unknown domain {model.domain!r}{did_you_mean(model.domain, DOMAINS)}")
    if model.num_instances != len(model.instances):
        raise DatasetError(
            source, "$.num_instances", f"is {model.num_instances} but the file holds {len(model.instances)} instances"
        )
    if not model.instances:
        raise DatasetError(source, "$.instances", "the file holds no instances")
    seen: set[str] = set()
    for k, instance in enumerate(model.instances):
        where = f"$.instances[{k}]"
        for name in ("rows", "cols"):
            if getattr(instance.meta, name) != getattr(model, name):
                raise DatasetError(
                    source,
                    f"{where}.meta.{name}",
                    f"is {getattr(instance.meta, name)} but the file declares {model.rows}x{model.cols}",
                )
        if instance.instance_id in seen:
            raise DatasetError(source, f"{where}.instance_id", f"duplicate instance id {instance.instance_id!r}")
        seen.add(instance.instance_id)
        if instance.domain != model.domain:
            raise DatasetError(source, f"{where}.domain", f"{instance.domain!r} in a {model.domain!r} file")
        check_instance(instance, DOMAINS[model.domain], source, where)


def check_instance(instance: Instance, domain: Domain, source: str, where: str = "$") -> None:
    """Check one instance against its domain; raises DatasetError naming the JSON path."""

    def fail(path: str, problem: str) -> DatasetError:
        return DatasetError(source, where + path, problem)

    rows, cols = instance.meta.rows, instance.meta.cols
    if rows <= 0 or cols <= 0:
        raise fail(".meta", f"grid size must be positive, got {rows}x{cols}")
    for name in ("truth_solution", "partial_solution"):
        grid = getattr(instance, name)
        if len(grid) != rows or any(len(row) != cols for row in grid):
            raise fail(f".{name}", f"must be a {rows}x{cols} grid")
    keys = set(domain.item_keys)
    numeric = set(domain.numeric_attributes)
    # the published layout: keys in declaration order, ints for numeric attributes, str otherwise
    key_order = domain.item_keys
    type_order = tuple(int if key in numeric else str for key in key_order)
    for item_id, item in instance.item_pool.items():
        if tuple(item) == key_order and tuple(map(type, item.values())) == type_order and item[key_order[0]] == item_id:
            continue  # fast path for well-formed items; anything else gets the detailed checks below
        if set(item) != keys:
            missing, extra = sorted(keys - set(item)), sorted(set(item) - keys)
            raise fail(
                f".item_pool.{item_id}",
                f"item keys differ from the {domain.name} domain (missing {missing}, unexpected {extra})",
            )
        if item[domain.id_key] != item_id:
            raise fail(f".item_pool.{item_id}.{domain.id_key}", f"is {item[domain.id_key]!r}, not the pool key")
        for key, value in item.items():
            if (key in numeric) != isinstance(value, int):
                kind = "an integer" if key in numeric else "a string"
                raise fail(f".item_pool.{item_id}.{key}", f"must be {kind}, got {value!r}")
    for name in [r.name for r in domain.global_rules]:
        if not isinstance(instance.global_constraints.get(name), int):
            raise fail(f".global_constraints.{name}", "missing or not an integer")
    for name in instance.global_constraints:
        if name != "global" and name not in {r.name for r in domain.global_rules}:
            raise fail(f".global_constraints.{name}", f"unknown global rule for {domain.name}")
    for r, row in enumerate(instance.truth_solution):
        for c, item_id in enumerate(row):
            if item_id not in instance.item_pool:
                raise fail(f".truth_solution[{r}][{c}]", f"id {item_id!r} is not in item_pool")
            shown = instance.partial_solution[r][c]
            if shown is not None and shown != item_id:
                raise fail(f".partial_solution[{r}][{c}]", f"is {shown!r} but the truth is {item_id!r}")
    hidden = [(r, c) for r in range(rows) for c in range(cols) if instance.partial_solution[r][c] is None]
    if [(p.row, p.col) for p in instance.hidden_slots] != hidden:
        raise fail(".hidden_slots", "must list the null cells of partial_solution in row-major order")
    if [(s.row, s.col) for s in instance.slots] != hidden:
        raise fail(".slots", "must hold one entry per hidden cell, in hidden_slots order")
    if instance.meta.hidden_slots != len(hidden):
        raise fail(
            ".meta.hidden_slots", f"is {instance.meta.hidden_slots} but the instance has {len(hidden)} hidden cells"
        )
    rule_names = {rule.name for rule in domain.slot_rules}
    for s, slot in enumerate(instance.slots):
        at = f".slots[{s}]"
        if slot.truth_id != instance.truth_solution[slot.row][slot.col]:
            raise fail(f"{at}.truth_id", "differs from truth_solution at this cell")
        if slot.truth_id not in slot.candidate_ids:
            raise fail(f"{at}.candidate_ids", "does not contain the truth id")
        if len(set(slot.candidate_ids)) != len(slot.candidate_ids):
            raise fail(f"{at}.candidate_ids", "contains duplicate ids")
        candidates = set(slot.candidate_ids)
        for field in ("candidate_ids", "decoy_ids", "filter_candidate_ids"):
            for item_id in getattr(slot, field):
                if item_id not in instance.item_pool:
                    raise fail(f"{at}.{field}", f"id {item_id!r} is not in item_pool")
                if item_id not in candidates:
                    raise fail(f"{at}.{field}", f"id {item_id!r} is not among the slot's candidate_ids")
            if field != "candidate_ids" and slot.truth_id in getattr(slot, field):
                raise fail(f"{at}.{field}", "contains the truth id")
        active = slot.slot_constraints.get("active_rule_names")
        if not isinstance(active, list) or not active:
            raise fail(f"{at}.slot_constraints.active_rule_names", "must be a non-empty list of rule names")
        for name in active:
            if name not in rule_names:
                raise fail(
                    f"{at}.slot_constraints.active_rule_names",
                    f"unknown slot rule {name!r}{did_you_mean(name, rule_names)}",
                )
            if not isinstance(slot.slot_constraints.get(name), int):
                raise fail(f"{at}.slot_constraints.{name}", "missing or not an integer")

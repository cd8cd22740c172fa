"""The published ACE dataset format: a validating loader, and compilation.

Data flows one way: JSON file -> validated :class:`DatasetFile` -> :class:`CompiledInstance`
(numpy arrays the tools and the scorer work on). A broken file raises one :class:`DatasetError`
naming the file, the JSON path and the problem, before anything is cached or returned; a
``dataset``/``path`` argument that names no regular file raises :class:`ConfigError` naming it.

The package, by concern: :mod:`~ace_gym.instance.compiled` (the compiled form),
:mod:`~ace_gym.instance.loading` (loading, with the per-process caches),
:mod:`~ace_gym.instance.cache` (the on-disk cache of validated files),
:mod:`~ace_gym.instance.cached_instance` (what its entries hold per instance, read back without validating),
:mod:`~ace_gym.instance.renumber` (item names without the published data's name-order tell),
:mod:`~ace_gym.instance.repeated_keys` and :mod:`~ace_gym.instance.validation` (the checks below).
Every name is importable from ``ace_gym.instance``.

The schema models (:class:`DatasetFile`, :class:`Instance`, :class:`InstanceMeta`,
:class:`SlotEntry`, :class:`Position`) live in :mod:`ace_gym.dataset_schema`. They are importable
from here too, imported (with pydantic) on first use: a file validated before is loaded from its
cache entry, and its instances set up, without them.

What a file must satisfy beyond the schema (every published and bundled file does):

* Size: at most :data:`MAX_DATASET_BYTES` (256 MiB) of JSON, counted after decompression for
  ``.json.gz``; decompression is streamed and abandoned at the limit, so a small file that
  inflates without end costs no more memory than the limit.
* Keys: no JSON object repeats a key (a reader keeps the last value only, so an item id listed
  twice in ``item_pool`` would silently lose the first item).
* Header: every instance has the file's ``rows`` and ``cols``, its ``meta.hidden_slots`` and
  ``meta.branch_budget`` appear in the file's ``hidden_slots`` and ``branch_budget`` lists, its
  ``meta.requested_candidates_per_slot`` is the file's ``candidates_per_slot``; instance ids
  are unique and at most :data:`MAX_INSTANCE_ID_LENGTH` (256) characters long (they name
  episodes in records, replays and URLs), and ``num_instances`` counts the instances.
* Items: the domain's keys, the pool key as id, integers for numeric attributes and strings
  otherwise; numeric values within :func:`accepted_ranges` and categorical values among the
  domain's declared values (``name`` is free text). The accepted range of an attribute is its
  declared ``[low, high]`` with the low end extended down to the ``floor`` of any ``sum_min``
  rule on it, because the published release's targeted decoy sampling reaches there: its 5x5
  data holds decoys with meal protein, shopping calories and workforce skill down to 0. Every
  accepted value is a small non-negative integer, so all aggregates stay far inside int64 and
  the scorer's array sums and the tools' running totals agree on every accepted file.
* Thresholds: every global rule of the domain, and no other, has an integer threshold in
  ``[0, threshold_limit]``, the values its aggregate can take on the grid (sums: cells x high,
  counts and repeats: cells, ``max_row_sum``: cols x high, ``max_cap``: high). Every active slot
  rule has an integer bound within the accepted range of its attribute; bounds outside the
  rule's usual list are fine (the release falls back to the truth's own value).
* Grids and slots: ``truth_solution`` and ``partial_solution`` are rows x cols, the partial grid
  is the truth with the hidden cells null, ``hidden_slots`` and ``slots`` list those cells in
  row-major order; every slot has ``is_hidden`` true. Each slot holds ``meta.candidates_per_slot``
  distinct pool ids, which its
  truth, ``decoy_ids`` and ``filter_candidate_ids`` list exactly once; ``allocated_budget``
  counts its decoys; its ``slot_constraints`` name each active rule once, with ``row``/``col``
  (if present) equal to the slot's and no other key.
* Branches: the slots with decoys are the branch slots, ranked 0, 1, ... in row-major order
  (``branch_rank`` null elsewhere); ``meta.branch_slot_count``, ``meta.branch_budget_allocations``
  (in rank order) and ``meta.branch_budget`` (their sum) agree with them.
* Truth: the truth passes every active slot rule and every global rule, checked with the
  constraint code the scorer uses.
* Instruction: ``task_instruction`` is exactly the text
  :func:`ace_gym.prompts.render_task_instruction` renders from the constraints (the published
  format); a difference is reported at its first line, naming the rule that line states.

What decoys and filters do (decoys pass the slot rules and break a global rule, filters break a
slot rule) is not checked at load: :func:`ace_gym.generators.certify` checks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ace_gym.instance.cache import CachedDataset
from ace_gym.instance.cached_instance import ItemRows, entry_document, entry_item_texts, entry_texts
from ace_gym.instance.compiled import (
    CompiledInstance,
    CompiledParts,
    CompiledSlot,
    SlotRules,
    active_slot_rules,
    forget_derived,
    item_columns,
    table_columns,
)
from ace_gym.instance.loading import (
    BUNDLED_DATASETS,
    MAX_DATASET_BYTES,
    Dataset,
    bundled_dataset_path,
    dataset_sha256,
    forget_loaded_datasets,
    load_dataset,
    parse_dataset,
    read_dataset,
    resolve_dataset,
)
from ace_gym.instance.renumber import ITEM_NAMES, name_number, names_rng, renumber_names
from ace_gym.instance.validation import (
    MAX_INSTANCE_ID_LENGTH,
    Fail,
    accepted_ranges,
    check_dataset,
    check_instance,
    stated_instruction,
    threshold_limit,
)
from ace_gym.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from ace_gym.dataset_schema import DatasetFile as DatasetFile
    from ace_gym.dataset_schema import Instance as Instance
    from ace_gym.dataset_schema import InstanceMeta as InstanceMeta
    from ace_gym.dataset_schema import Position as Position
    from ace_gym.dataset_schema import SlotEntry as SlotEntry

# the schema models, re-exported: imported (with pydantic) on first access
__getattr__, __dir__ = lazy_exports(
    __name__, "ace_gym.dataset_schema", ["DatasetFile", "Instance", "InstanceMeta", "Position", "SlotEntry"]
)

__all__ = [
    "BUNDLED_DATASETS",
    "ITEM_NAMES",
    "MAX_DATASET_BYTES",
    "MAX_INSTANCE_ID_LENGTH",
    "CachedDataset",
    "CompiledInstance",
    "CompiledParts",
    "CompiledSlot",
    "Dataset",
    "DatasetFile",
    "Fail",
    "Instance",
    "InstanceMeta",
    "ItemRows",
    "Position",
    "SlotEntry",
    "SlotRules",
    "accepted_ranges",
    "active_slot_rules",
    "bundled_dataset_path",
    "check_dataset",
    "check_instance",
    "dataset_sha256",
    "entry_document",
    "entry_item_texts",
    "entry_texts",
    "forget_derived",
    "forget_loaded_datasets",
    "item_columns",
    "load_dataset",
    "name_number",
    "names_rng",
    "parse_dataset",
    "read_dataset",
    "renumber_names",
    "resolve_dataset",
    "stated_instruction",
    "table_columns",
    "threshold_limit",
]

"""The published dataset format as pydantic models: :class:`DatasetFile` and the models it nests.

One home for the schema. :mod:`ace_gym.instance` validates files against it, compiles instances
and re-exports these names; it imports this module (and with it pydantic) on first use only, so
that ``import ace_gym`` and an env on a file validated before (read from its
:mod:`ace_gym.instance.cache` entry) never import pydantic.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

_STRICT = ConfigDict(strict=True, extra="forbid", defer_build=True)


class Position(BaseModel):
    """A grid cell."""

    model_config = _STRICT
    row: int
    col: int


class InstanceMeta(BaseModel):
    """Generation metadata of one instance (docs/compatibility.md §1.3); generators may add extra keys."""

    model_config = ConfigDict(strict=True, extra="allow", defer_build=True)
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

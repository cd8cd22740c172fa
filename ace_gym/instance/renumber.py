"""Item names without the published data's tell: the name numbers permuted per instance.

The published 5x5 release numbers every item's ``name`` by generation order (docs/compatibility.md
§1.4), so the truth is the candidate with the smallest number in its cell, in all 210 instances.
:func:`renumber_names` permutes the numbers among the pool's items at random, keeping every id,
attribute, candidate list and the truth: the instance plays and scores as before, and its names
no longer say which candidate is the truth. ``AceEnv(item_names="renumbered")`` applies it at
every reset, from the reset seed.
"""

from __future__ import annotations

import zlib

import numpy as np

from ace_gym.instance.compiled import CompiledInstance

ITEM_NAMES = ("published", "renumbered")
"""``AceEnv(item_names=...)``: the names as the data holds them, or :func:`renumber_names`'."""


def renumber_names(compiled: CompiledInstance, rng: np.random.Generator) -> CompiledInstance:
    """``compiled`` with the numbers of its items' names (``"<phrase> <number>"``) permuted at
    random among those items: each item keeps its phrase and gets another item's number. Names
    without a trailing number are kept; nothing else changes."""
    instance = compiled.instance
    pool = instance.item_pool
    numbered = []
    for item_id, item in pool.items():
        phrase, _, number = str(item.get("name", "")).rpartition(" ")
        if phrase and name_number(number) is not None:
            numbered.append((item_id, phrase, number))
    order = rng.permutation(len(numbered)).tolist()
    renamed = dict(pool)
    for (item_id, phrase, _), k in zip(numbered, order, strict=True):
        renamed[item_id] = {**pool[item_id], "name": f"{phrase} {numbered[k][2]}"}
    return CompiledInstance(instance.model_copy(update={"item_pool": renamed}), compiled.domain)


def name_number(name: object) -> int | None:
    """The number a name ends with (``"Topics 100"`` -> 100), or None."""
    number = str(name).rpartition(" ")[2]
    return int(number) if number.isascii() and number.isdigit() else None


def names_rng(seed_source: np.random.Generator, instance_id: str) -> np.random.Generator:
    """The generator of one episode's renaming: a draw of the env's seeded generator and the
    instance id, so that the same reset seed renames the same instance alike in any process and
    two instances reset with one seed are renamed independently."""
    return np.random.default_rng([int(seed_source.integers(2**63)), zlib.crc32(instance_id.encode("utf-8"))])

"""One row of the wrapper registry (:mod:`ace_gym.stacks`): what a wrapper is called, where it
is, where it sits in a stack, what it reports and how its reports are summarised.

The core's entries are declared in :mod:`ace_gym.stacks`, each benchmark home declares its own
(the ``wrappers`` of its :class:`~ace_gym.benchmark.Benchmark`), and :data:`ace_gym.stacks.WRAPPERS`
is the one table of all of them. This module imports nothing of ace_gym's but the foundation
layer, so every layer may declare entries; the wrapper class itself is imported on first use
(registering the env ids must not load every wrapper).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ace_gym.lazy_exports import check_entry_point, load_entry_point

Metrics = dict[str, float]
"""A wrapper's summary metrics: name -> value."""


@dataclass(frozen=True)
class WrapperEntry:
    """One wrapper of the registry.

    ``name``: how stacks, ``ace-gym eval --wrappers`` and the server name it (the class name is
    accepted too, :attr:`class_name`); ``entry_point``: ``"module:Class"``; ``order``: its place
    in a stack, innermost first (a lower order wraps closer to the env); ``defaults``: keyword
    arguments used when a stack names the wrapper without any; ``info_key``: where it reports in
    ``info`` (a dotted path, e.g. ``"apb.unsolvable"``; None: it reports nothing of its own);
    ``metrics``: its summary metrics over the episodes' reports (None: none); ``setting``: a
    planning setting ``ace-gym eval --wrappers`` may name.
    """

    name: str
    entry_point: str
    order: int
    defaults: Mapping[str, Any] = field(default_factory=dict)
    info_key: str | None = None
    metrics: Callable[[Sequence[Mapping[str, Any]]], Metrics] | None = None
    setting: bool = False

    def __post_init__(self) -> None:
        check_entry_point("entry_point", self.entry_point)

    @property
    def class_name(self) -> str:
        """The wrapper's class name (how ``env.spec`` and older server clients name it)."""
        return self.entry_point.rpartition(":")[2]

    @property
    def key(self) -> str:
        """The last part of :attr:`info_key` (a planning setting's ``info["apb"]`` sub-key); ""
        when the wrapper reports nothing."""
        return (self.info_key or "").rpartition(".")[2]

    @property
    def wrapper(self) -> Callable[..., Any]:
        """The wrapper class, imported on first use."""
        found: Callable[..., Any] = load_entry_point(self.entry_point)
        return found

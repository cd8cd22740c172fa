"""Where an env's instances come from: the :class:`InstanceSource` protocol and the dataset source.

An :class:`~ace_gym.envs.AceEnv` receives its source (as Jumanji's envs receive a generator) and
asks it for one instance per ``reset``: ``source.draw(np_random, options)``. The source owns
everything about choosing: which reset options it reads, how it uses the env's random generator,
and the reset-info keys that identify its instance. :class:`DatasetSource` serves a dataset file
(the bundled published data included); :class:`ace_gym.envs.procedural.GeneratorSource` generates
certified instances. A new source (a curriculum, a replay buffer) is any object with ``domain``
and ``draw``; it never needs a new env class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ace_gym.domains import Domain
from ace_gym.errors import integer
from ace_gym.instance import CompiledInstance, Dataset


class Drawn(NamedTuple):
    """One instance drawn for an episode: the compiled instance, ``instance_index`` (its position
    in the source's dataset, -1 when there is none) and ``info``, the source's own reset-info keys
    (appended after the env's, e.g. ``instance_seed``)."""

    compiled: CompiledInstance
    instance_index: int
    info: Mapping[str, Any]


@runtime_checkable
class InstanceSource(Protocol):
    """Gives an env one compiled instance of ``domain`` per reset.

    ``draw`` must be a pure function of the generator's state and ``options``: every random
    choice comes from ``rng`` (the env's ``np_random``, seeded by ``reset``), so the same seed
    gives the same instance in any process. Bad options raise ConfigError.
    """

    domain: Domain

    def draw(self, rng: np.random.Generator, options: Mapping[str, Any]) -> Drawn: ...


_NO_INFO: Mapping[str, Any] = {}


class DatasetSource:
    """Instances of a loaded :class:`~ace_gym.instance.Dataset`.

    Reset options: ``instance_id`` (str) or ``instance_index`` (int in ``[0, len)``) pin the
    instance; without them it is drawn uniformly with ``rng``.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self.domain = dataset.domain

    def draw(self, rng: np.random.Generator, options: Mapping[str, Any]) -> Drawn:
        dataset = self.dataset
        if "instance_id" in options:
            index = dataset.index_of(options["instance_id"])
        elif "instance_index" in options:
            index = integer("instance_index", options["instance_index"], minimum=0, maximum=len(dataset) - 1)
        else:
            index = int(rng.integers(len(dataset)))
        return Drawn(dataset.compiled(index), index, _NO_INFO)

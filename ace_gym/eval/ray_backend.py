"""Play episodes on a Ray cluster (``ace-gym eval --backend ray``): :func:`run_on_ray`.

``workers`` Ray actors (:class:`RolloutWorker`, named ``ace-gym-eval-<run>-<n>``; one CPU each, or
an equal share of the cluster's CPUs when there are more workers than CPUs) build the policy once
each (``make_policy(spec)``: a scripted policy by name, or an engine such as ``openai:MODEL@URL``
talking to a policy endpoint) and play chunks of items through the rollout
the local backend runs (``rollout(items, policy, batch_size=, name=)``:
:func:`ace_gym.eval.rollout.run_episodes` and the one rollout loop, or AgentLongBench's), each
record streaming back to the driver as its episode ends. :func:`run_on_ray` yields the records as
they arrive, so ``ace-gym eval`` appends each to the resumable episode file at once.

Work goes out in chunks (``chunk_size`` items, at least ``batch_size``), up to two per worker in
flight, the next chunk to whichever worker finishes one. When a worker dies (its process killed,
its node lost: Ray's ``RayActorError``), the items of its chunks whose records have not come back
are queued again, ahead of the rest, and a new worker takes its place. A key that came back is
never yielded again, so every item's record is yielded exactly once; a chunk whose workers died
:data:`MAX_ATTEMPTS` times raises :class:`WorkersLostError`. An exception raised by the rollout
itself (a bad dataset, an unreachable env server) stops the run and is raised here as its original
class, as the local backend raises it.

A record is the one the local backend writes for the same item, apart from the wall-clock usage
entries (:data:`ace_gym.runs.loop.WALL_CLOCK_USAGE`); the order records arrive in differs.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ace_gym.agents import Policy
from ace_gym.errors import AceGymError, ConfigError, integer, optional_integer
from ace_gym.ray_cluster import connect

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
"""How many workers may die holding the same chunk before the run gives up."""
CHUNKS_IN_FLIGHT = 2
"""Chunks sent to a worker ahead of time (the next one waits in its queue, no idle gap)."""
MAX_CHUNK = 32
"""Upper bound of the default chunk size: what one lost worker costs to re-run."""

Rollout = Callable[..., Iterator[dict[str, Any]]]
"""``rollout(items, policy, batch_size=, name=)``, yielding one record per item."""


class WorkersLostError(AceGymError):
    """Workers kept dying while they held the same episodes."""


class RolloutWorker:
    """A Ray actor's state: the policy (built by ``make_policy()`` on first use, so that an error
    building it is raised to the driver as itself) and how it plays a chunk of items."""

    def __init__(self, make_policy: Callable[[], Policy], rollout: Rollout, batch_size: int, name: str) -> None:
        self._make_policy = make_policy
        self._rollout = rollout
        self._batch_size = batch_size
        self._name = name
        self._policy: Policy | None = None

    def play(self, items: list[Any]) -> Iterator[dict[str, Any]]:
        """The record of every item, as each episode ends (a Ray streaming generator)."""
        if self._policy is None:
            self._policy = self._make_policy()
        yield from self._rollout(items, self._policy, batch_size=self._batch_size, name=self._name)


@dataclass
class _Chunk:
    keys: list[str]
    attempt: int = 0


def run_on_ray(
    items: Iterable[Any],
    key: Callable[[Any], str],
    rollout: Rollout,
    make_policy: Callable[[], Policy],
    *,
    name: str,
    batch_size: int,
    workers: int | None = None,
    address: str | None = None,
    chunk_size: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Play every item on ``workers`` Ray actors (default: one per CPU of the cluster) and yield
    each record once, as it arrives (module docstring).

    ``key(item)`` must be the ``"key"`` of the item's record; ``make_policy`` (picklable, e.g.
    ``functools.partial(ace_gym.policies.make_policy, spec)``) builds the policy in each worker;
    ``batch_size`` episodes run together in a worker; ``address`` names the cluster
    (:func:`ace_gym.ray_cluster.connect`). ConfigError for a bad number or duplicate keys.
    """
    by_key: dict[str, Any] = {}
    for item in items:
        if by_key.setdefault(key(item), item) is not item:
            raise ConfigError("items", key(item), "is the key of two items")
    batch_size = integer("batch_size", batch_size, minimum=1)
    workers = optional_integer("ray-workers", workers, minimum=1)
    chunk_size = optional_integer("chunk_size", chunk_size, minimum=1)
    if not by_key:
        return
    ray = connect(address)
    cpus = float(ray.cluster_resources().get("CPU", 1.0))
    workers = workers or max(1, int(cpus))
    chunk_size = chunk_size or max(batch_size, min(MAX_CHUNK, math.ceil(len(by_key) / (4 * workers))))
    keys = list(by_key)
    queue = deque(_Chunk(keys[start : start + chunk_size]) for start in range(0, len(keys), chunk_size))
    worker_cpus = min(1.0, math.floor(1e4 * cpus / workers) / 1e4)  # Ray counts CPUs in 1e-4 units
    yield from _Driver(ray, by_key, queue, make_policy, rollout, batch_size, name, worker_cpus).run(workers)


class _Driver:
    """Hands out chunks, collects records, replaces dead workers (one :func:`run_on_ray` call)."""

    def __init__(
        self,
        ray: Any,
        by_key: dict[str, Any],
        queue: deque[_Chunk],
        make_policy: Callable[[], Policy],
        rollout: Rollout,
        batch_size: int,
        name: str,
        worker_cpus: float,
    ) -> None:
        self.ray, self.by_key, self.queue = ray, by_key, queue
        self.actor_class = ray.remote(num_cpus=worker_cpus, max_restarts=0)(RolloutWorker)
        self.arguments = (make_policy, rollout, batch_size, name)
        self.run_name = f"ace-gym-eval-{uuid.uuid4().hex[:8]}"
        self.started = 0
        self.workers: dict[int, Any] = {}  # slot -> actor handle
        self.in_flight: dict[Any, tuple[int, _Chunk]] = {}  # streaming generator -> (slot, chunk)
        self.done: set[str] = set()

    def run(self, workers: int) -> Iterator[dict[str, Any]]:
        try:
            for slot in range(workers):
                self.workers[slot] = self._start_worker()
            self._hand_out()
            while self.in_flight:
                [generator], _ = self.ray.wait(list(self.in_flight), num_returns=1)
                slot, chunk = self.in_flight[generator]
                try:
                    record = self.ray.get(next(generator))
                except StopIteration:
                    del self.in_flight[generator]
                    self._hand_out()
                    continue
                except self.ray.exceptions.RayActorError as error:
                    self._replace(slot, error)
                    continue
                record_key = str(record["key"])
                if record_key not in chunk.keys:
                    raise AceGymError(f"a worker returned a record with key {record_key!r}, not of its chunk")
                if record_key not in self.done:
                    self.done.add(record_key)
                    yield record
        finally:
            for actor in self.workers.values():
                self.ray.kill(actor)

    def _start_worker(self) -> Any:
        self.started += 1
        options = {"name": f"{self.run_name}-{self.started}"}
        return self.actor_class.options(**options).remote(*self.arguments)

    def _hand_out(self) -> None:
        """Send queued chunks to workers with fewer than CHUNKS_IN_FLIGHT, least loaded first."""
        while self.queue:
            load = {slot: 0 for slot in self.workers}
            for slot, _ in self.in_flight.values():
                load[slot] += 1
            slot = min(load, key=load.__getitem__)
            if load[slot] >= CHUNKS_IN_FLIGHT:
                return
            chunk = self.queue.popleft()
            generator = self.workers[slot].play.remote([self.by_key[k] for k in chunk.keys])
            self.in_flight[generator] = (slot, chunk)

    def _replace(self, slot: int, error: Exception) -> None:
        """Queue again what the dead worker in ``slot`` held and had not returned; start another."""
        lost = [(generator, chunk) for generator, (held_by, chunk) in self.in_flight.items() if held_by == slot]
        requeued = 0
        for generator, chunk in reversed(lost):
            del self.in_flight[generator]
            remaining = [k for k in chunk.keys if k not in self.done]
            if not remaining:
                continue
            if chunk.attempt + 1 >= MAX_ATTEMPTS:
                raise WorkersLostError(
                    f"{MAX_ATTEMPTS} Ray workers died holding the same {len(remaining)} episodes "
                    f"(first: {remaining[0]}); last error: {error}"
                )
            self.queue.appendleft(_Chunk(remaining, chunk.attempt + 1))
            requeued += len(remaining)
        logger.warning(
            "Ray worker %d died (%s); re-running its %d unfinished episodes", slot, type(error).__name__, requeued
        )
        self.ray.kill(self.workers[slot])
        self.workers[slot] = self._start_worker()
        self._hand_out()

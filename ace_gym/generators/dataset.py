"""Generate a dataset file in the published layout, with any number of worker processes or Ray tasks.

Instances are ordered ``for h in hidden_slots: for b in decoy_budgets`` and each is a pure
function of its own (domain, size, h, b, K, seed), so the file is byte-identical whatever the
number of workers or the backend. Files are written atomically (:mod:`ace_gym.atomic`); a path
ending in ``.gz`` is gzip-compressed with a zero timestamp.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from ace_gym.atomic import write_atomic
from ace_gym.errors import ConfigError, choice, integer, integers
from ace_gym.generators.config import InstanceConfig
from ace_gym.generators.instances import generate_instance

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each instance."""
BACKENDS = ("local", "ray")
"""Where instances are generated: this machine's processes, or Ray tasks."""


def dataset_file_name(
    domain: str,
    rows: int,
    cols: int,
    hidden_slots: Sequence[int],
    decoy_budgets: Sequence[int],
    candidates_per_slot: int,
    seed: int,
) -> str:
    """The published file name (docs/compatibility.md §1.1), without a compression suffix."""
    hidden = "-".join(str(h) for h in hidden_slots)
    budgets = "-".join(str(b) for b in decoy_budgets)
    return f"{domain}_dataset_r{rows}_c{cols}_h{hidden}_cand{candidates_per_slot}_budget{budgets}_seed{seed}.json"


def _values(field: str, values: Sequence[int] | int) -> list[int]:
    listed = list(integers(field, values))
    if len(set(listed)) != len(listed):
        raise ConfigError(field, values, "holds duplicates (instance ids would collide)")
    return listed


def _instance_record(arguments: dict[str, Any]) -> dict[str, Any]:
    return generate_instance(**arguments).model_dump(mode="json")


def generate_dataset(
    domain: str,
    *,
    rows: int = 5,
    cols: int = 7,
    hidden_slots: Sequence[int] | int,
    decoy_budgets: Sequence[int] | int,
    candidates_per_slot: int = 25,
    seed: int,
    path: str | os.PathLike[str] | None = None,
    workers: int = 1,
    time_budget: float = 120.0,
    progress: Progress | None = None,
    backend: str = "local",
) -> dict[str, Any]:
    """Generate every (hidden_slots x decoy_budgets) instance and return the dataset dict.

    With ``path`` the dict is also written there as indented JSON (published layout, key order
    as published); ``.gz`` paths are compressed. ``workers`` > 1 uses worker processes;
    ``backend="ray"`` runs one Ray task per instance instead (see
    :mod:`ace_gym.generators.ray_backend`; ``workers`` is then unused). The output depends on
    neither. Raises ConfigError for an impossible configuration (before any work) and
    GenerationError if an instance cannot be generated within ``time_budget``.
    """
    hidden_values = _values("hidden_slots", hidden_slots)
    budget_values = _values("decoy_budgets", decoy_budgets)
    integer("workers", workers, minimum=1)
    choice("backend", backend, BACKENDS)
    jobs = []
    for h in hidden_values:
        for b in budget_values:
            InstanceConfig(domain, rows, cols, h, b, candidates_per_slot, seed)  # validates up front
            jobs.append(
                {
                    "domain": domain,
                    "rows": rows,
                    "cols": cols,
                    "hidden_slots": h,
                    "decoy_budget": b,
                    "candidates_per_slot": candidates_per_slot,
                    "seed": seed,
                    "time_budget": time_budget,
                }
            )
    records: list[dict[str, Any] | None] = [None] * len(jobs)
    if backend == "ray":
        from ace_gym.generators.ray_backend import map_on_ray

        records[:] = map_on_ray(_instance_record, jobs, progress)
    elif workers == 1:
        for n, job in enumerate(jobs):
            records[n] = _instance_record(job)
            if progress is not None:
                progress(n + 1, len(jobs))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_instance_record, job): n for n, job in enumerate(jobs)}
            for done, future in enumerate(as_completed(futures), start=1):
                records[futures[future]] = future.result()
                if progress is not None:
                    progress(done, len(jobs))
    dataset = {
        "domain": domain,
        "num_instances": len(jobs),
        "rows": rows,
        "cols": cols,
        "hidden_slots": hidden_values,
        "branch_budget": budget_values,
        "candidates_per_slot": candidates_per_slot,
        "instances": records,
    }
    if path is not None:
        write_dataset(dataset, path)
    return dataset


def write_dataset(dataset: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``dataset`` as published (``json.dumps(indent=2)``), atomically; gzip for ``.gz``."""
    target = Path(path)
    data = json.dumps(dataset, indent=2).encode()
    if target.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    write_atomic(target, lambda handle: handle.write(data))
    return target

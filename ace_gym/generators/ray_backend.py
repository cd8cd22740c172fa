"""Run the dataset generator's jobs as Ray tasks (``generate_dataset(..., backend="ray")``).

One task per instance, exactly the jobs the local backend runs in its processes: each instance is
a pure function of its job, so the results, and the file written from them, do not depend on
where they ran. Uses the Ray cluster this process is connected to (``ray.init(address=...)``
before the call, or the ``RAY_ADDRESS`` environment variable), else starts a local one
(:func:`ace_gym.ray_cluster.connect`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ace_gym.ray_cluster import connect

Job = TypeVar("Job")
Result = TypeVar("Result")


def map_on_ray(
    function: Callable[[Job], Result],
    jobs: Sequence[Job],
    progress: Callable[[int, int], None] | None = None,
) -> list[Result]:
    """``[function(job) for job in jobs]`` computed by Ray tasks, in job order; ``progress(done,
    total)`` is called as results arrive. An exception raised by a task is raised here (Ray
    re-raises it as an instance of the original class)."""
    ray = connect()
    task = ray.remote(function)
    pending: dict[Any, int] = {task.remote(job): n for n, job in enumerate(jobs)}
    results: list[Any] = [None] * len(jobs)
    done = 0
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for reference in ready:
                results[pending.pop(reference)] = ray.get(reference)
                done += 1
                if progress is not None:
                    progress(done, len(jobs))
    finally:
        for reference in pending:  # a failed task stops the run: the rest is not needed
            ray.cancel(reference)
    return results

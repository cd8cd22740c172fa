"""Run the dataset generator's jobs as Ray tasks (``generate_dataset(..., backend="ray")``).

One task per instance, exactly the jobs the local backend runs in its processes: each instance is
a pure function of its job, so the results, and the file written from them, do not depend on
where they ran. Uses the Ray cluster this process is connected to (``ray.init(address=...)``
before the call, or the ``RAY_ADDRESS`` environment variable), else starts a local one
(:func:`ace_gym.ray_cluster.connect`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
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
    re-raises it as an instance of the original class).

    At most twice the cluster's CPUs of tasks are in flight (submitted as results arrive), so a
    failed task stops the run without cancelling anything: the tasks in flight then finish on
    their own and are dropped. ``ray.cancel`` of a task whose result is on its way aborts the
    calling process in Ray 2.x (its core worker's check "Tried to complete task that was not
    pending": ray-project/ray#54846), which took down a whole test session here."""
    ray = connect()
    task = ray.remote(function)
    window = max(1, 2 * int(ray.cluster_resources().get("CPU", 1)))
    waiting = iter(enumerate(jobs))
    pending: dict[Any, int] = {}
    results: list[Any] = [None] * len(jobs)
    done = 0
    while True:
        for n, job in islice(waiting, window - len(pending)):
            pending[task.remote(job)] = n
        if not pending:
            return results
        [reference], _ = ray.wait(list(pending), num_returns=1)
        results[pending.pop(reference)] = ray.get(reference)
        done += 1
        if progress is not None:
            progress(done, len(jobs))

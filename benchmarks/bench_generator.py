"""Generator speed: seconds per instance per (rows, cols, H, B), the whole bundled 5x7 benchmark,
and the exact-search numba kernel against its interpreted body, all measured in this run on one core.

    python benchmarks/bench_generator.py [--seeds 3] [--quick]

Targets (issue 3): 5x7 H=21 B=25 <= 0.5 s; 5x10 H=35 B=49 K=51 <= 10 s; 10x10 H=60 B=100 <= 60 s
per instance; the 6 x 54 instances of the 5x7 benchmark <= 180 s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.generators import _kernels, certify, generate_dataset, generate_instance
from ace_gym.instance import resolve_dataset
from ace_gym.presets import PAPER_5X7

CONFIGS = [  # rows, cols, hidden slots, decoy budget, candidates per slot, target seconds
    (5, 5, 15, 19, 25, None),
    (5, 7, 11, 10, 25, None),
    (5, 7, 21, 25, 25, 0.5),
    (5, 10, 35, 49, 51, 10.0),
    (10, 10, 60, 100, 25, 60.0),
]


def _timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def bench_instances(seeds: int) -> None:
    print("seconds per instance (6 domains x seeds, single process)")
    print(f"{'rows x cols':>11} {'H':>4} {'B':>4} {'K':>4} {'median':>8} {'max':>8} {'target':>7} {'attempts':>9}")
    for rows, cols, hidden, budget, candidates, target in CONFIGS:
        times, attempts = [], []
        for domain in DOMAIN_NAMES:
            for seed in range(seeds):
                arguments = {
                    "rows": rows,
                    "cols": cols,
                    "hidden_slots": hidden,
                    "decoy_budget": budget,
                    "candidates_per_slot": candidates,
                    "seed": seed,
                }
                seconds, instance = _timed(lambda d=domain, a=arguments: generate_instance(d, **a))
                times.append(seconds)
                attempts.append(instance.meta.generator["attempt"] + 1)  # type: ignore[attr-defined]
        goal = f"{target:.1f}" if target else "-"
        print(
            f"{rows:>5} x {cols:<3} {hidden:>4} {budget:>4} {candidates:>4} {statistics.median(times):>8.3f} "
            f"{max(times):>8.3f} {goal:>7} {statistics.mean(attempts):>9.1f}"
        )


def bench_benchmark_5x7() -> None:
    arguments = dict(PAPER_5X7)
    total = 0.0
    for domain in DOMAIN_NAMES:
        seconds, _ = _timed(
            lambda d=domain: generate_dataset(
                d,
                rows=arguments["rows"],  # type: ignore[arg-type]
                cols=arguments["cols"],  # type: ignore[arg-type]
                hidden_slots=arguments["hidden_slots"],  # type: ignore[arg-type]
                decoy_budgets=arguments["decoy_budgets"],  # type: ignore[arg-type]
                candidates_per_slot=arguments["candidates_per_slot"],  # type: ignore[arg-type]
                seed=arguments["seed"],  # type: ignore[arg-type]
            )
        )
        total += seconds
    print(f"\nwhole 5x7 benchmark (6 x 54 instances, 1 worker): {total:.1f} s (target <= 180 s)")


class _PlainKernels:
    """Swap the numba kernel for its interpreted body (``py_func``) while in the block."""

    def __enter__(self) -> None:
        self.saved = _kernels.all_violate_kernel
        _kernels.all_violate_kernel = _kernels.all_violate_kernel.py_func  # type: ignore[assignment]

    def __exit__(self, *_: object) -> None:
        _kernels.all_violate_kernel = self.saved


def bench_kernels(quick: bool) -> None:
    print("\nnumba kernel vs the same code interpreted (py_func), same inputs")
    published = [resolve_dataset("5x5", d) for d in DOMAIN_NAMES]
    compiled = [ds.compiled(i) for ds in published for i in range(len(ds))]
    big = [
        generate_instance(d, rows=10, cols=10, hidden_slots=60, decoy_budget=100, seed=0)
        for d in DOMAIN_NAMES[: 2 if quick else 6]
    ]
    workloads = [
        ("certify 210 published 5x5 instances", lambda: [certify(c) for c in compiled]),
        (f"certify {len(big)} generated 10x10 H60 B100", lambda: [certify(i) for i in big]),
    ]

    def search_case(groups: int) -> tuple[np.ndarray, ...]:
        # every row moves one unit between two components whose sum stays above both thresholds:
        # every grid is invalid, but no single component proves it, so the search must branch
        deltas = np.tile(np.array([[-1, 1], [1, -1]], dtype=np.int64), (groups, 1))
        offsets = np.arange(0, 2 * groups + 1, 2, dtype=np.int64)
        return np.array([1, 0], dtype=np.int64), np.array([0, 0], dtype=np.int64), deltas, offsets

    deep = search_case(7 if quick else 12)
    workloads.append(
        (
            f"exact search, {len(deep[3]) - 1} slots x 2 alternatives",
            lambda: _kernels.all_violate_kernel(*deep, 10**9),
        )
    )
    for _, work in workloads:  # warm-up: load the cached compiled kernel
        work()
    print(f"{'workload':<52} {'numba s':>9} {'python s':>9} {'ratio':>7}")
    for name, work in workloads:
        fast, _ = _timed(work)
        with _PlainKernels():
            slow, _ = _timed(work)
        print(f"{name:<52} {fast:>9.4f} {slow:>9.4f} {slow / fast:>6.1f}x")
    small = search_case(8)
    naive, _ = _timed(lambda: _kernels.all_violate_twin(*small))
    pruned, _ = _timed(lambda: _kernels.all_violate_kernel(*small, 10**9))
    label = "exact search (8 slots) vs naive itertools enumeration"
    print(f"{label:<52} {pruned:>9.4f} {naive:>9.4f} {naive / pruned:>6.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3, help="seeds per domain and configuration")
    parser.add_argument("--quick", action="store_true", help="fewer seeds, skip the whole-benchmark timing")
    args = parser.parse_args()
    generate_instance("course", rows=3, cols=3, hidden_slots=2, decoy_budget=2, seed=0)  # first-use set-up, untimed
    bench_instances(1 if args.quick else args.seeds)
    if not args.quick:
        bench_benchmark_5x7()
    bench_kernels(args.quick)


if __name__ == "__main__":
    main()

"""Throughput of ``ace-gym eval --backend ray`` against the number of Ray workers, on one machine.

Plays the same episodes (the bundled 5x5 datasets, every domain) with two policies and prints
episodes/s and episode-turns/s for each worker count, and each as a ratio to the local backend
(one process, ``run_episodes``) measured in the same run:

* ``solver``: the scripted solver, by name, as ``ace-gym eval --policy solver`` builds it;
* ``replay``: a zero-cost chat engine that replays the solver's recorded assistant messages
  (looked up by the conversation's opening and turn): every turn takes the engine path an
  LLM policy takes (completion -> adapter -> tools), with no generation time at all. Its
  throughput is the env side's ceiling: with a real policy endpoint behind the workers, the
  endpoint's tokens/s decides the rate long before the workers do (docs/scale.md).

Each Ray run includes starting its workers (importing ace-gym, loading the datasets, one
compile of each instance they play); the ``first record`` column shows that fixed cost, and
"steady" rates count from the first record on. ``local cold`` is the first local run in the
process, which pays the same loading and compiling (the instances are counted beforehand from
the files themselves, through no cache of ace-gym); whether the on-disk dataset cache held the
six files (loading then reads its entries instead of validating) is printed with the table.
``x local`` compares steady rates with the warm local run.
The Ray cluster is a local one with ``max(--workers)`` logical CPUs: on a machine with fewer
cores the extra workers share them, which the table then shows.

    python benchmarks/bench_scale.py                        # 1, 2, 4 workers, 210 episodes
    python benchmarks/bench_scale.py --workers 1 2 --episodes 60
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import ray

from ace_gym.agents import Completion, Policy
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.ray_backend import run_on_ray
from ace_gym.instance import bundled_dataset_path
from ace_gym.instance import cache as dataset_cache
from ace_gym.policies import make_policy


class ReplayEngine:
    """A ChatEngine answering each conversation with the recorded assistant message of its turn.

    ``transcripts`` maps an episode's opening (system and user texts) to its assistant messages.
    """

    def __init__(self, transcripts: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
        self.transcripts = transcripts

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        completions = []
        for conversation in conversations:
            turn = sum(1 for message in conversation if message["role"] == "assistant")
            message = self.transcripts[(conversation[0]["content"], conversation[1]["content"])][turn]
            completions.append(Completion(message["content"] or "", tool_calls=message.get("tool_calls")))
        return completions


def transcripts_of(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    found = {}
    for record in records:
        system, user, *rest = record["messages"]
        found[(system["content"], user["content"])] = [m for m in rest if m["role"] == "assistant"]
    if len(found) != len(records):
        raise SystemExit("two episodes open with the same texts: the replay engine cannot tell them apart")
    return found


def measure(records: Callable[[], Iterator[dict[str, Any]]]) -> dict[str, float]:
    """Episodes/s over the whole run and, from the first record on ("steady": workers started),
    episodes/s and turns/s; the seconds to the first record; the mean score; this process's CPU
    milliseconds per episode (local: the whole work; Ray: the driver's share)."""
    began, began_cpu = time.perf_counter(), time.process_time()
    first_s = 0.0
    episodes = turns = steady_turns = 0
    solved = 0.0
    for record in records():
        first_s = first_s or time.perf_counter() - began
        steady_turns += record["usage"]["turns"] if episodes else 0
        episodes += 1
        turns += record["usage"]["turns"]
        solved += record["score"]
    wall_s = time.perf_counter() - began
    driver_s = time.process_time() - began_cpu
    steady_s = max(wall_s - first_s, 1e-9)
    return {
        "episodes": episodes,
        "first_s": first_s,
        "eps": episodes / wall_s,
        "steady_eps": (episodes - 1) / steady_s,
        "steady_tps": steady_turns / steady_s,
        "score": solved / max(1, episodes),
        "driver_ms": 1e3 * driver_s / max(1, episodes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--episodes", type=int, default=210, help="episodes per run (cycling over domains)")
    parser.add_argument("--batch-size", type=int, default=4, help="episodes run together in a worker")
    args = parser.parse_args()

    sizes, cached = _instance_counts()
    specs = [
        EpisodeSpec.of(domain, instance_index=k // len(DOMAIN_NAMES) % sizes[domain])
        for k in range(args.episodes)
        for domain in [DOMAIN_NAMES[k % len(DOMAIN_NAMES)]]
    ]
    solver_records: list[dict[str, Any]] = []
    cold = measure(
        lambda: _keeping(run_episodes(specs, make_policy("solver"), batch_size=args.batch_size), solver_records)
    )
    policies: dict[str, Callable[[], Policy]] = {
        "solver": partial(make_policy, "solver"),
        "replay": partial(ReplayEngine, transcripts_of(solver_records)),
    }
    ray.init(num_cpus=max(args.workers), include_dashboard=False, log_to_driver=False)
    print(
        f"{len(specs)} episodes of the 5x5 datasets, batch size {args.batch_size}, "
        f"{os.cpu_count()} cores, Ray {ray.__version__}"
    )
    print(
        "local cold = the first local run in this process: it loads the six datasets (on-disk dataset cache "
        + ("warm: entries read, no validation)" if cached else "empty: every file validated)")
        + " and compiles the instances it plays"
    )
    print(
        f"{'policy':8} {'backend':10} {'episodes/s':>11} {'steady ep/s':>12} {'turns/s':>9} {'x local':>8} "
        f"{'first record':>13} {'score':>6} {'driver ms/ep':>13}"
    )
    for label, build in policies.items():
        local = measure(
            lambda build=build, label=label: run_episodes(specs, build(), batch_size=args.batch_size, name=label)
        )
        if label == "solver":  # the first run in this process: datasets loaded, instances compiled, as in a new worker
            _row(label, "local cold", cold, local)
        _row(label, "local", local, local)
        for workers in args.workers:
            run = measure(
                lambda build=build, workers=workers, label=label: run_on_ray(
                    specs,
                    partial(EpisodeSpec.key, policy=label),
                    run_episodes,
                    build,
                    name=label,
                    batch_size=args.batch_size,
                    workers=workers,
                )
            )
            if run["episodes"] != len(specs):
                raise SystemExit(f"{label} on {workers} workers returned {run['episodes']} of {len(specs)} records")
            _row(label, f"ray x{workers}", run, local)
    ray.shutdown()


def _instance_counts() -> tuple[dict[str, int], bool]:
    """Each domain's number of 5x5 instances, read from its file through no cache of ace-gym (the
    per-process dataset cache stays empty for ``local cold``), and whether the on-disk dataset
    cache holds an entry for every file."""
    sizes, cached = {}, True
    for domain in DOMAIN_NAMES:
        raw = bundled_dataset_path("5x5", domain).read_bytes()
        cached = cached and dataset_cache.read_entry(hashlib.sha256(raw).hexdigest()) is not None
        sizes[domain] = len(json.loads(gzip.decompress(raw))["instances"])
    return sizes, cached


def _keeping(records: Iterator[dict[str, Any]], kept: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for record in records:
        kept.append(record)
        yield record


def _row(label: str, backend: str, run: dict[str, float], local: dict[str, float]) -> None:
    print(
        f"{label:8} {backend:10} {run['eps']:11.1f} {run['steady_eps']:12.1f} {run['steady_tps']:9.0f} "
        f"{run['steady_eps'] / local['steady_eps']:7.2f}x "
        f"{run['first_s']:12.2f}s {run['score']:6.3f} {run['driver_ms']:13.2f}"
    )


if __name__ == "__main__":
    main()

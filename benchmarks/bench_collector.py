"""The rollout collector's own cost per episode-turn, with a model that costs nothing.

    python benchmarks/bench_collector.py [--episodes 256] [--calls-per-turn 3] [--repeats 3]

The solver plays ``--episodes`` episodes once (untimed) to record its tool calls. A zero-cost
engine then replays them through the real rollout loop (``run_episodes`` -> ``EngineActor`` ->
``StepBudget(ChatAdapter(AceEnv))``), ``--calls-per-turn`` calls per turn as Hermes
``<tool_call>`` text, all episodes in one batch. Because the env is deterministic, every replayed
call gets the reply the solver saw.

Every compiled instance keeps the tool replies it has given for the process
(``ace_gym.tools.replies``), so a rollout on instances played before reads stored replies. The
target verdict is therefore on a first rollout: before each timed rollout the datasets are read
again (the per-process dataset cache dropped, then the six datasets loaded from the on-disk
dataset cache, as a trainer loads them before its first rollout), so the rollout's instances are
compiled and their stores filled inside it, as in a trainer's first rollout on them. The
rollout played right after it on the same instances (every reply stored) is timed too and printed
as its own row: what a later rollout of the trainer on the same instances gets.

The wall time of the first rollout is split, in this run:

* env: the same calls on bare ``AceEnv`` s (reset + steps) on datasets read again likewise
  (stores empty at its start), timed apart;
* adapter + parse: the wrapped env's steps (``usage.env_s``, ChatAdapter and StepBudget around the
  core env) minus the env; of which parse: ``parse_turn`` on the same texts, timed apart;
* collector: the rest (the loop, the Episode bookkeeping and records, the actor), the engine's
  own time (a list lookup) excluded.

The bare envs run episode after episode; the rollout interleaves all of them, turn by turn, so the
adapter row also carries what the interleaving costs the env (colder caches). A GC collection runs
in whichever layer allocated when a threshold was crossed: the time inside collections is printed
on its own row and is also part of the layer rows above it.

The heap during a timed rollout holds what a trainer's collector holds: the loaded datasets, the
scripts (a trainer's prompts) and the rollout's own episodes and records. The solver's records and
the previous rollout's records are dropped, and ``gc.collect()`` runs before each timed rollout.
Python's cyclic GC then runs as it would in that trainer, and its pauses are part of the totals.
Each repeat times the first rollout twice:

* GC as is: the target verdict is on this total; the time spent inside collections (timed with
  ``gc.callbacks``) is printed as the GC's share, and the collections of each generation that
  ran in the fastest of these rollouts (one of generation 2 walks the whole heap: whether the
  rollout's allocations reach that point decides much of the GC's share);
* ``gc.freeze()`` after set-up: what a trainer gets by calling ``gc.collect(); gc.freeze()`` once
  its datasets and prompts are loaded (collections then skip everything loaded before).

Untimed, one more rollout counts the GC-tracked objects its records keep alive (``gc.collect()``
before and after, records held), per episode-turn: the objects each later full collection walks,
and whose promotions decide how often one runs (CPython runs a full collection once the objects
promoted since the last one exceed a quarter of those it walked).

Target (issue 10): env + adapter + collector <= 50 µs per episode-turn of 3 calls.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import time
from collections.abc import Sequence
from typing import Any

from bench_rollout import core_env_time

from ace_gym.agents import Completion
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.instance import forget_loaded_datasets, resolve_dataset
from ace_gym.parsing import parse_turn
from ace_gym.policies import make_policy

MAX_TURNS = 10_000


class ReplayEngine:
    """A ChatEngine that answers each conversation with its episode's next recorded turn.

    Conversations are told apart by their message list, which an episode keeps and extends for
    its whole life; a list not seen before belongs to the next script (episodes open in order).
    """

    def __init__(self, scripts: list[list[str]]) -> None:
        self.scripts = scripts
        self.cursor: dict[int, list[Any]] = {}  # id(messages) -> [script, next turn]
        self.opened = 0
        self.generation_s = 0.0

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        began = time.perf_counter()
        completions = []
        for messages in conversations:
            cursor = self.cursor.get(id(messages))
            if cursor is None:
                cursor = self.cursor[id(messages)] = [self.scripts[self.opened], 0]
                self.opened += 1
            script, turn = cursor
            cursor[1] += 1
            completions.append(Completion(script[turn]))
        self.generation_s += time.perf_counter() - began
        return completions


def _hermes_turns(calls: list[dict[str, Any]], per_turn: int) -> list[str]:
    return [
        "\n".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls[k : k + per_turn])
        for k in range(0, len(calls), per_turn)
    ]


def _solver_calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
        for m in record["messages"]
        if m["role"] == "assistant"
        for c in m["tool_calls"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--calls-per-turn", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="timed rollouts (best kept)")
    args = parser.parse_args()

    sizes = {domain: len(resolve_dataset("5x5", domain)) for domain in DOMAIN_NAMES}
    specs = [
        EpisodeSpec.of(domain, instance_index=k // len(DOMAIN_NAMES) % sizes[domain], seed=k, max_turns=MAX_TURNS)
        for k in range(args.episodes)
        for domain in [DOMAIN_NAMES[k % len(DOMAIN_NAMES)]]
    ]
    solved = {r["key"]: r for r in run_episodes(specs, make_policy("solver"), batch_size=len(specs))}
    calls = [_solver_calls(solved[spec.key("solver")]) for spec in specs]
    del solved  # a collector in a trainer does not hold a previous run's records
    scripts = [_hermes_turns(episode_calls, args.calls_per_turn) for episode_calls in calls]
    texts = [text for script in scripts for text in script]

    best: dict[str, float] = {}
    collections: list[int] = []
    for _ in range(args.repeats):
        _read_datasets_again()
        clock = _GcClock()
        wall, generation_s, env_s = _timed_rollout(specs, scripts, calls, clock)
        collections = clock.collections if wall - generation_s < best.get("wall", float("inf")) else collections
        gc.collect()
        stored_wall, stored_generation_s, _ = _timed_rollout(specs, scripts, calls)  # every reply stored
        _read_datasets_again()
        gc.freeze()
        try:
            frozen_wall, frozen_generation_s, _ = _timed_rollout(specs, scripts, calls)
        finally:
            gc.unfreeze()
        _read_datasets_again()
        core = core_env_time(specs, calls)
        began = time.perf_counter()
        for text in texts:
            parse_turn(text)
        parse = time.perf_counter() - began
        measured = {
            "wall": wall - generation_s,
            "gc": clock.seconds,
            "frozen": frozen_wall - frozen_generation_s,
            "stored": stored_wall - stored_generation_s,
            "env": core,
            "wrapped": env_s,
            "parse": parse,
            "collector": wall - generation_s - env_s,
        }
        best = {k: min(best.get(k, float("inf")), v) for k, v in measured.items()}
    best["adapter"] = best["wrapped"] - best["env"]  # of the bests: the difference of one noisy pair can go negative

    turns = len(texts)
    kept = _tracked_objects_kept(specs, scripts)
    per_turn = {k: v / turns * 1e6 for k, v in best.items()}
    print(
        f"{len(specs)} episodes, {turns} episode-turns of {args.calls_per_turn} solver calls as Hermes text,"
        f" {sum(map(len, calls))} calls; one batch; best of {args.repeats} rollouts (each layer's best apart)"
    )
    print("first rollout on its instances: datasets read again before it (their instances' stores empty)")
    print(f"{'layer (first rollout, GC as is)':40s} {'µs/turn':>9s} {'share':>7s}")
    for label, key in (
        ("env (bare AceEnv reset + steps)", "env"),
        ("adapter + parse (ChatAdapter...)", "adapter"),
        ("  of which parse_turn", "parse"),
        ("collector (loop, Episode, records)", "collector"),
        ("in GC collections (in the rows above)", "gc"),
    ):
        print(f"{label:40s} {per_turn[key]:9.1f} {100 * best[key] / best['wall']:6.1f}%")
    total = per_turn["wall"]
    verdict = "met" if total <= 50 else "NOT met"
    print(f"{'env + adapter + collector, GC as is':40s} {total:9.1f} {100.0:6.1f}%   target <= 50 µs/turn: {verdict}")
    print(f"episode-turns/s (engine excluded, GC as is): {1e6 / total:,.0f}")
    print(
        f"GC collections in the fastest GC-as-is rollout, generation 0/1/2: {'/'.join(map(str, collections))}"
        " (a generation-2 one walks the whole heap)"
    )
    print(
        f"{'same, gc.freeze() after set-up':40s} {per_turn['frozen']:9.1f}"
        "            (what a trainer gets by calling gc.freeze() after loading)"
    )
    stored_verdict = "met" if per_turn["stored"] <= 50 else "NOT met"
    print(
        f"{'replayed with stored replies, GC as is':40s} {per_turn['stored']:9.1f}"
        f"            (a later rollout on the same instances; <= 50 µs/turn: {stored_verdict})"
    )
    print(f"GC-tracked objects the records keep alive: {kept:,} ({kept / turns:.1f} per episode-turn; untimed rollout)")


def _tracked_objects_kept(specs: list[EpisodeSpec], scripts: list[list[str]]) -> int:
    """How many more GC-tracked objects the heap holds after a replayed rollout, its records held."""
    gc.collect()
    before = len(gc.get_objects())
    records = list(run_episodes(specs, ReplayEngine(scripts), batch_size=len(specs), name="replay"))
    gc.collect()
    kept = len(gc.get_objects()) - before
    del records
    return kept


class _GcClock:
    """Wall time spent inside the cyclic GC's collections while the block runs, and how many ran
    per generation (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]  # per generation
        self._began = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began
            self.collections[info["generation"]] += 1

    def __enter__(self) -> _GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def _read_datasets_again() -> None:
    """Drop the per-process dataset cache and load the six 5x5 datasets again (from the on-disk
    dataset cache), then ``gc.collect()``: the instances played before are gone with their stored
    replies, and the next rollout compiles its instances and fills their stores as a trainer's
    first rollout does."""
    forget_loaded_datasets()
    gc.collect()
    for domain in DOMAIN_NAMES:
        resolve_dataset("5x5", domain)


def _timed_rollout(
    specs: list[EpisodeSpec],
    scripts: list[list[str]],
    calls: list[list[dict[str, Any]]],
    clock: _GcClock | None = None,
) -> tuple[float, float, float]:
    """``(wall, generation_s, env_s)`` of one replayed rollout, ``clock`` (if any) timing the GC
    during the rollout alone; SystemExit if it did not make ``calls``."""
    engine = ReplayEngine(scripts)
    with clock or contextlib.nullcontext():
        began = time.perf_counter()
        records = list(run_episodes(specs, engine, batch_size=len(specs), name="replay"))
        wall = time.perf_counter() - began
    env_s = sum(r["usage"]["env_s"] for r in records)
    replayed = {r["key"]: r for r in records}
    if [_solver_calls(replayed[spec.key("replay")]) for spec in specs] != calls:
        raise SystemExit("the replay did not make the solver's calls")
    return wall, engine.generation_s, env_s


if __name__ == "__main__":
    main()

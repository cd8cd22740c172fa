"""Cost of the planning layer next to the bare env, measured in this process and this run.

    python benchmarks/bench_planning.py [--episodes N] [--repeats R]

The exact solver's calls on N bundled 5x5 instances (H = 15) are replayed, best of R rounds:

* ``env``: µs per call on the bare ``AceEnv`` (the baseline);
* one row per planning wrapper and one for every setting stacked: µs per call through it (the
  reset, which builds distractors, a variant or the cost reference, is timed apart, per episode);
* ``detector``: µs per call to judge the call and observe its reply (the E1-E6 detector as
  ``Refine`` and the probes run it);
* ``variant <kind>``: ms to build one certified-unsolvable variant of an instance.

Printed: each row's time and its ratio to ``env``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ace_gym.agents import ExactSolver
from ace_gym.envs import AceEnv
from ace_gym.planning import ErrorTracker, facts_from_reset, make_variant
from ace_gym.planning.settings import SETTINGS, apply_settings
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.planning.trajectory import scripted_trajectory

H15_INDEX = 34


def _trajectory(domain: str) -> list[dict[str, Any]]:
    env = AceEnv(domain)
    observation, info = env.reset(seed=0, options={"instance_index": H15_INDEX})
    return [dict(action) for action, _ in scripted_trajectory(env, ExactSolver(), observation, info)[0]]


def _replay(make: Callable[[], gym.Env], trajectories: list[tuple[str, list[dict[str, Any]]]]) -> tuple[float, float]:
    """(µs per call, ms per reset) replaying every trajectory on a fresh env of ``make``."""
    calls = reset_s = step_s = 0.0
    for domain, actions in trajectories:
        env = make(domain)  # type: ignore[call-arg]
        began = time.perf_counter()
        env.reset(seed=0, options={"instance_index": H15_INDEX})
        reset_s += time.perf_counter() - began
        began = time.perf_counter()
        for action in actions:
            env.step(action)
        step_s += time.perf_counter() - began
        calls += len(actions)
    return step_s / calls * 1e6, reset_s / len(trajectories) * 1e3


def _detector(trajectories: list[tuple[str, list[dict[str, Any]]]]) -> float:
    total = calls = 0.0
    for domain, actions in trajectories:
        env = AceEnv(domain)
        _, info = env.reset(seed=0, options={"instance_index": H15_INDEX})
        tracker = ErrorTracker(facts_from_reset(env.compiled, info))
        replies = [env.step(action)[4]["reply"] for action in actions]
        began = time.perf_counter()
        for action, reply in zip(actions, replies, strict=True):
            tracker.judge(action)
            tracker.observe(action, reply)
        total += time.perf_counter() - began
        calls += len(actions)
    return total / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=6, help="instances replayed (one per domain, cycling)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the best is kept")
    args = parser.parse_args()
    domains = ["course", "meal", "pc_build", "shopping", "travel", "workforce"]
    trajectories = [(domains[i % 6], _trajectory(domains[i % 6])) for i in range(args.episodes)]
    makers: dict[str, Callable[[str], gym.Env]] = {"env": AceEnv}
    for name in SETTINGS:
        options = {"unsolvable": {"p_unsolvable": 0.0}}  # solvable: the solver's calls stay meaningful
        makers[name] = lambda domain, name=name, options=options: apply_settings(AceEnv(domain), [name], options)
    makers["every setting"] = lambda domain: apply_settings(
        AceEnv(domain), SETTINGS, {"unsolvable": {"p_unsolvable": 0.0}}
    )
    rows = {name: min(_replay(make, trajectories) for _ in range(args.repeats)) for name, make in makers.items()}
    base = rows["env"][0]
    calls = sum(len(actions) for _, actions in trajectories)
    print(f"{calls} calls on {len(trajectories)} instances (H = 15), best of {args.repeats}")
    print(f"{'layer':<16}{'µs/call':>10}{'x env':>8}{'ms/reset':>10}")
    for name, (per_call, per_reset) in rows.items():
        print(f"{name:<16}{per_call:>10.1f}{per_call / base:>8.2f}{per_reset:>10.2f}")
    detector = min(_detector(trajectories) for _ in range(args.repeats))
    print(f"{'detector':<16}{detector:>10.1f}{detector / base:>8.2f}")
    env = AceEnv("course")
    instance = env.dataset[H15_INDEX]
    for kind in UNSOLVABLE_KINDS:
        began = time.perf_counter()
        for seed in range(args.repeats):
            make_variant(instance, kind, np.random.default_rng(seed))
        print(f"variant {kind:<24} {(time.perf_counter() - began) / args.repeats * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()

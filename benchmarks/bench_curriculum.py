"""Where an adaptive curriculum takes the scripted baselines (docs/curriculum.md).

Plays the exact solver, greedy-local and the random policy under ``Curriculum`` on a small
procedural grid and prints, per policy, the level trajectory (the ladder index of each episode,
in the order the curriculum heard the outcomes) and the success rate per level; then checks that
a single env and sync and async vector envs with the same seeds play the same levels, and writes
the trajectory plots (``--plots DIR``, needs the ``plot`` extra). It prints what the tests
assert (tests/wrappers/test_curriculum.py), over longer runs.

    python benchmarks/bench_curriculum.py
    python benchmarks/bench_curriculum.py --episodes 400 --window 16 --plots /tmp/curriculum
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym

from ace_gym.eval import run_env_episodes, run_vector_episodes
from ace_gym.eval.curriculum_report import level_trajectory, success_per_level, write_trajectory_plot
from ace_gym.policies import make_policy
from ace_gym.wrappers import ChatAdapter, Curriculum, StepBudget

LADDER = [[2, 0], [3, 0], [3, 1], [4, 4], [4, 8]]
"""A short ladder on a 3x4 grid: greedy solves the B = 0 levels and less and less of the others."""
GRID: dict[str, Any] = {"rows": 3, "cols": 4, "hidden_slots": [2, 3, 4], "decoy_budget": [0, 1, 4, 8]}


def make_env(window: int, shared: bool = False) -> Curriculum:
    env = gym.make("ACE-course-procedural-v0", candidates_per_slot=6, **GRID)
    return Curriculum(StepBudget(ChatAdapter(env), 200), levels=LADDER, window=window, shared=shared)


def compressed(levels: Sequence[int]) -> str:
    """``0x8 1x8 2x30 ...``: each run of one level and its length."""
    runs: list[list[int]] = []
    for level in levels:
        if runs and runs[-1][0] == level:
            runs[-1][1] += 1
        else:
            runs.append([level, 1])
    return " ".join(f"{level}x{count}" for level, count in runs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=160)
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plots", type=Path, default=None, help="write <policy>.png trajectory plots here")
    args = parser.parse_args(argv)

    print(f"ladder {LADDER} (level: [hidden_slots, decoy_budget]), window {args.window}, target 0.6, floor 0.2")
    for policy in ("solver", "greedy", "random"):
        env = make_env(args.window)
        records = list(run_env_episodes(env, make_policy(policy), num_episodes=args.episodes, seed=args.seed))
        levels = level_trajectory(records)["course"]
        rates = {
            level: f"{row['success_rate']:.2f} (n={row['episodes']})"
            for level, row in success_per_level(records)["course"].items()
        }
        print(f"\n{policy}: final level {levels[-1]}; trajectory {compressed(levels)}")
        print(f"  success per level: {rates}")
        if args.plots is not None:
            path = write_trajectory_plot(records, args.plots / f"{policy}.png", title=f"{policy} on {LADDER}")
            print(f"  plot: {path}")

    runs = {"single": list(run_env_episodes(make_env(args.window), make_policy("greedy"), num_episodes=60, seed=3))}
    for mode in ("sync", "async"):
        vector = gym.vector.SyncVectorEnv if mode == "sync" else gym.vector.AsyncVectorEnv
        envs = vector([partial(make_env, args.window, shared=True)])
        try:
            runs[mode] = list(run_vector_episodes(envs, make_policy("greedy"), num_episodes=60, seed=3))
        finally:
            envs.close()
    played = {name: [(r["instance_id"], r["curriculum_level"]) for r in records] for name, records in runs.items()}
    same = played["single"] == played["sync"] == played["async"]
    print(f"\ngreedy, seed 3: single env, sync and async vector envs play the same levels: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

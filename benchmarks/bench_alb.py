"""Seconds and peak memory to build one AgentLongBench sample at 32k, 128k, 1M and 4M tokens.

Every measurement runs in a fresh child process (one core), so that its peak resident memory is
its own: the child imports ace-gym and builds the synthetic table (timed apart as "setup"), then
times ``build_sample`` for one (format, question type, budget) and reports the growth of its peak
RSS over the setup. Question types: Intersection (the costliest in concise: an investigator that
avoids the target and a filter over the whole last game) and Count Frequency (Tool) (a union over
every tool result). Targets, printed as ratios (< 1 meets the target): 32k < 0.2 s; 1M < 10 s
and < 2 GB; 4M completes.

    python benchmarks/bench_alb.py                          # all budgets, both formats
    python benchmarks/bench_alb.py --budgets 32k,1M --formats concise
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

TYPES = ("Intersection", "Count Frequency(Tool)")
TIME_TARGETS = {"32k": 0.2, "1M": 10.0}
MEMORY_TARGET_MB = {"1M": 2048.0}


def measure(fmt: str, question_type: str, budget: str, seed: int) -> dict[str, float]:
    """Run in the child: setup, then one timed sample build."""
    import resource

    began = time.perf_counter()
    from ace_gym.longbench.samples import SampleConfig, build_sample
    from ace_gym.runs.tokens import ApproxTokenizer

    config = SampleConfig(fmt=fmt, target_tokens=budget)
    table = config.resolve_table()[0]
    setup_s = time.perf_counter() - began
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    began = time.perf_counter()
    sample = build_sample(config, question_type, seed, ApproxTokenizer(), table=table)
    seconds = time.perf_counter() - began
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "setup_s": setup_s,
        "seconds": seconds,
        "peak_mb": (peak_kb - base_kb) / 1024,
        "tokens": sample.tokens,
        "rounds": len(sample.trajectory.rounds),
        "attempt": sample.attempt,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", default="32k,128k,1M,4M")
    parser.add_argument("--formats", default="concise,verbose")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", nargs=3, metavar=("FMT", "TYPE", "BUDGET"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child, args.seed)))
        return
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    header = f"{'format':<9}{'question type':<23}{'budget':>7}{'tokens':>10}{'rounds':>8}{'seconds':>9}{'peak MB':>9}  targets"
    print(header)
    print("-" * len(header))
    for budget in args.budgets.split(","):
        for fmt in args.formats.split(","):
            for question_type in TYPES:
                command = [sys.executable, __file__, "--seed", str(args.seed), "--child", fmt, question_type, budget]
                result = json.loads(
                    subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
                )
                notes = []
                if budget in TIME_TARGETS:
                    notes.append(f"time/target {result['seconds'] / TIME_TARGETS[budget]:.2f}")
                if budget in MEMORY_TARGET_MB:
                    notes.append(f"memory/target {result['peak_mb'] / MEMORY_TARGET_MB[budget]:.3f}")
                if budget == "4M":
                    notes.append("completes")
                print(
                    f"{fmt:<9}{question_type:<23}{budget:>7}{result['tokens']:>10}{result['rounds']:>8}"
                    f"{result['seconds']:>9.3f}{result['peak_mb']:>9.1f}  {', '.join(notes)}"
                )
    print(f"\nsetup (import + synthetic table) per child: about {result['setup_s']:.2f} s")


if __name__ == "__main__":
    main()

"""Every reward's floor: what the bank of no-planning policies of ``benchmarks/reward_tells.py``
earns on each env-id family, default and FIT, beside the solver, greedy-local and a random
slot-valid grid (issue 38). Writes the table of ``docs/rewards.md``.

A family's cell pools its domains (``ACE-<domain>-...``: every domain, the same seeds each);
learnt policies learn on the training seeds, disjoint from the evaluation seeds. Run:
``python benchmarks/bench_rewards.py --seeds 10 --train-seeds 100 --out docs/rewards.md``
(``--families`` picks some; ``--quick`` plays 3 seeds a cell).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reward_tells as rt

from ace_gym.atomic import write_atomic
from ace_gym.eval.fit import TRAINING_DATASET

FEEDBACK_ROUNDS_IDS = tuple(f"ACE-{domain}-v0" for domain in rt.ace_gym.DOMAIN_NAMES)
"""FeedbackRounds is a wrapper, not an id: it is played over ``ACE-<domain>-v0``; the rounds (it and
the scenario ids) are played on the published data and on the training set too."""
REWARDS: dict[str, tuple[str, str]] = {
    "ACE-<domain>-v0": ("1 if the final grid meets every slot and global rule, else 0 (on `done`)", "{0, 1}"),
    "ACE-<domain>-procedural-v0": ("as ACE-<domain>-v0, on a generated 5x7 instance per reset", "{0, 1}"),
    "ACE-<domain>-procedural-10x10-v0": ("as ACE-<domain>-v0, on a generated 10x10 instance per reset", "{0, 1}"),
    "ACE-<domain>-broken-v0": ("as ACE-<domain>-v0, one tool broken (APB's broken-tool setting)", "{0, 1}"),
    "ACE-<domain>-distractors-v0": ("as ACE-<domain>-v0, with extraneous tools offered", "{0, 1}"),
    "ACE-<domain>-unsolvable-v0": (
        "solvable: the grid's 0/1; unsolvable: 1 refusal with the right code, 0.25 a wrong code, "
        "0 finishing; refusing a solvable task 0 (markers of each kind in solvable tasks too)",
        "[0, 1]",
    ),
    "ACE-<domain>-scenario-v0": ("the verdict: 0.9^(j-1) when every stage passes (j: its attempt), else 0", "[0, 1]"),
    "ACE-Scenario-v0": ("as ACE-<domain>-scenario-v0 (course)", "[0, 1]"),
    "ACE-<domain>-v0 + feedback_rounds": (
        "the verdict: 0.9^(j-1) for a pass at attempt j (2 attempts), else 0",
        "[0, 1]",
    ),
    f"ACE-<domain>-scenario-v0 (dataset={TRAINING_DATASET})": (
        "as ACE-<domain>-scenario-v0, on the bundled 5x7 set (what the recipes train on)",
        "[0, 1]",
    ),
    f"ACE-<domain>-v0 + feedback_rounds (dataset={TRAINING_DATASET})": (
        "as ACE-<domain>-v0 + feedback_rounds, on the bundled 5x7 set (what the recipes train on)",
        "[0, 1]",
    ),
    "ACE-Holistic-v0": (
        "act after plan (renumbered names, no global check): the plan's score x (1 if the executed grid "
        "solves, else -q/(1-q); q: a random slot-valid grid's chance, at most 1/3)",
        "[-1/2, 1]",
    ),
    "ACE-StepWise-v0": (
        "cut at a decision (a set whose cell's own rules leave 3+ candidates; renumbered names): APB's grade "
        "when the prediction's tools and targets are the reference's, -q/(1-q) when only the set's id is wrong "
        "(q: a uniform guess's chance), else 0",
        "[-1/2, 1]",
    ),
    "ALB-QA-v0": (
        "strict: 1 for the gold answer in the asked form, else 0; balanced answers (target_tokens=4096)",
        "{0, 1}",
    ),
    "ALB-QA-v0 (fmt=verbose)": ("as ALB-QA-v0, verbose histories (target_tokens=32768)", "[0, 1]"),
    "ALB-Puzzle-v0": ("sparse: 1 for the right guess, minus the round cost per guess", "(-inf, 1]"),
}
"""What each family's reward is and its range (as of the commit the table was made on)."""
SEED_SCALE: dict[str, float] = {
    "ALB-QA-v0": 4.0,
    "ALB-QA-v0 (fmt=verbose)": 4.0,
    "ACE-<domain>-procedural-10x10-v0": 0.3,
    "ACE-StepWise-v0": 10.0,
    "ACE-Holistic-v0": 10.0,
}
"""Seeds a cell plays, relative to ``--seeds`` (ALB-QA is one env for all; 10x10 episodes are long;
the probes' rewards are signed, a guess swinging by up to 1.5, and the episodes short)."""
TRAIN_SCALE: dict[str, float] = {"ALB-QA-v0 (fmt=verbose)": 0.5}
"""Training seeds, relative to ``--train-seeds`` (a verbose history takes long to build)."""


def all_cells(families: set[str] | None, seeds_fit: bool = True) -> list[rt.Cell]:
    found = rt.cells(rt.ace_env_ids(), fit_too=seeds_fit)
    found += [rt.Cell(env_id, fit, ("feedback_rounds",)) for env_id in FEEDBACK_ROUNDS_IDS for fit in (False, True)]
    training = (("dataset", TRAINING_DATASET),)
    found += [
        rt.Cell(env_id, fit, wrappers, training)
        for env_id, wrappers in [
            *((f"ACE-{domain}-scenario-v0", ()) for domain in rt.ace_gym.DOMAIN_NAMES),
            *((env_id, ("feedback_rounds",)) for env_id in FEEDBACK_ROUNDS_IDS),
        ]
        for fit in (False, True)
    ]
    found.append(rt.Cell("ALB-QA-v0", env_kwargs=rt.QA_VERBOSE))
    return [cell for cell in found if families is None or cell.family in families]


def cell_line(family: str, fit: bool, means: dict[str, float], n: int, seeds: str) -> str:
    description, value_range = REWARDS.get(family, ("", ""))
    held = [p for p in means if p in rt.NO_PLANNING]
    strongest = max(held, key=lambda p: (means[p], p)) if held else ""
    references = "".join(
        f" {means[p]:.3f} |" if p in means else " n/a |" for p in ("solver", "greedy", "random-slot-valid")
    )
    best = f"{strongest} {means[strongest]:.3f}" if strongest else "n/a"
    return f"| {family} | {'FIT' if fit else 'default'} | {description} | {value_range} |{references} {best} | {n} ({seeds}) |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="evaluation seeds per cell (0..N-1)")
    parser.add_argument("--train-seeds", type=int, default=100, help="training seeds for learnt policies (1000..)")
    parser.add_argument("--families", nargs="*", help="only these families (as the table names them)")
    parser.add_argument("--quick", action="store_true", help="3 seeds a cell, 40 training seeds")
    parser.add_argument("--out", help="write the markdown table here (default: print it)")
    args = parser.parse_args()
    seeds_n, train_n = (3, 40) if args.quick else (args.seeds, args.train_seeds)
    pooled: dict[tuple[str, bool], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[tuple[str, bool], tuple[int, str]] = {}
    for cell in all_cells(set(args.families) if args.families else None):
        n = max(2, round(seeds_n * SEED_SCALE.get(cell.family, 1.0)))
        train = range(1000, 1000 + round(train_n * TRAIN_SCALE.get(cell.family, 1.0)))
        started = time.perf_counter()
        means = rt.measure(cell, range(n), train)
        found = " ".join(f"{policy}={value:.3f}" for policy, value in sorted(means.items()))
        print(
            f"{cell.env_id} {cell.wrappers} fit={cell.fit} ({time.perf_counter() - started:.1f}s): {found}",
            file=sys.stderr,
        )
        key = (cell.family, cell.fit)
        for policy, value in means.items():
            pooled[key][policy].append(value)
        learnt = cell.kind == "qa" or any(policy in means for policy in rt.TELL_FEATURES)
        seeds = f"seeds 0-{n - 1}" + (f", train {train.start}-{train.stop - 1}" if learnt else "")
        counts[key] = (counts.get(key, (0, ""))[0] + n, seeds)
    lines = [
        "| family | setting | reward | range | solver | greedy-local | random slot-valid | strongest no-planning policy | n (seeds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (family, fit), policies in pooled.items():
        means = {policy: rt.mean(values) for policy, values in policies.items()}
        lines.append(cell_line(family, fit, means, *counts[(family, fit)]))
    policies = sorted({policy for means in pooled.values() for policy in means})
    lines += [
        "",
        "Every policy's mean, pooled as above (blank: not played on that family):",
        "",
        "| family | setting | " + " | ".join(policies) + " |",
        "|---|---|" + "---|" * len(policies),
    ]
    for (family, fit), means in pooled.items():
        values = " | ".join(f"{rt.mean(means[p]):.3f}" if p in means else "" for p in policies)
        lines.append(f"| {family} | {'FIT' if fit else 'default'} | {values} |")
    table = "\n".join(lines) + "\n"
    if args.out:
        write_atomic(args.out, lambda handle: handle.write(table.encode()))
    else:
        print(table, end="")


if __name__ == "__main__":
    main()

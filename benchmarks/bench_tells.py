"""What policies that plan nothing earn: the name-order tell of the published 5x5 data and
check-guided random search, default vs the fit settings (:data:`ace_gym.eval.fit.FIT`).

Tables (markdown, for docs/compatibility.md and docs/training.md): the mean score of
``smallest-name`` (:class:`ace_gym.agents.blind.SmallestName`) per domain on the published 5x5
data as published and with ``item_names="renumbered"``, on the bundled 5x7 set and on generated
5x5 files (and random slot-valid play on the published data, for chance); then ``check-search`` (:class:`ace_gym.agents.blind.CheckGuidedSearch`), greedy-local,
random slot-valid (check-search without a global check) and the fit reference policy, on the
bundled 5x7 set and the generated 5x5 files, without budgets and under FIT. Every episode is
instance i played with seed i. The generated 5x5 files are the published configuration (H 1 5 7
11 15, B 0 2 4 8 10 15 19, 35 instances) at generator seeds ``--seeds`` (default 1 2), written to
a temporary folder. Run: ``python benchmarks/bench_tells.py`` (about two minutes on one core).
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ace_gym.agents.blind import CheckGuidedSearch, SmallestName
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import FIT
from ace_gym.generators import generate_dataset
from ace_gym.instance import resolve_dataset
from ace_gym.policies import make_policy

PUBLISHED_5X5 = {"hidden_slots": [1, 5, 7, 11, 15], "decoy_budgets": [0, 2, 4, 8, 10, 15, 19], "rows": 5, "cols": 5}
"""The published 5x5 release's configuration, for the generated 5x5 files."""


def specs(datasets: dict[str, list[str]], env_kwargs: dict[str, Any]) -> list[EpisodeSpec]:
    """Every instance of each domain's datasets, instance i with seed i."""
    return [
        EpisodeSpec.of(domain, dataset=dataset, instance_index=i, seed=i, env_kwargs=env_kwargs)
        for domain, files in datasets.items()
        for dataset in files
        for i in range(len(resolve_dataset(dataset, domain)))
    ]


def means(spec_list: Sequence[EpisodeSpec], policy: Any) -> dict[str, float]:
    """Mean score per domain and over all (``"all"``)."""
    scores: dict[str, list[float]] = defaultdict(list)
    for record in run_episodes(spec_list, policy):
        scores[record["domain"]].append(record["score"])
        scores["all"].append(record["score"])
    return {domain: sum(values) / len(values) for domain, values in scores.items()}


def row(label: str, found: dict[str, float], n: int) -> str:
    cells = " | ".join(f"{found[d]:.3f}" for d in (*DOMAIN_NAMES, "all"))
    return f"| {label} | {n} | {cells} |"


def header(first: str) -> str:
    return f"| {first} | n per domain | {' | '.join(DOMAIN_NAMES)} | all |\n|---|---|{'---|' * (len(DOMAIN_NAMES) + 1)}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="generator seeds of the 5x5 files")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        generated: dict[str, list[str]] = defaultdict(list)
        for domain in DOMAIN_NAMES:
            for seed in args.seeds:
                path = Path(folder) / f"{domain}_{seed}.json"
                generate_dataset(domain, seed=seed, path=path, **PUBLISHED_5X5)
                generated[domain].append(str(path))
        published = {domain: ["5x5"] for domain in DOMAIN_NAMES}
        paper = {domain: ["5x7"] for domain in DOMAIN_NAMES}
        sizes = {"5x5": 35, "5x7": 54, "generated 5x5": 35 * len(args.seeds)}

        print("### smallest-name (set each cell's slot-valid candidate with the smallest name number)\n")
        print(header("data"))
        for label, data, kwargs, size in (
            ("published 5x5", published, {}, sizes["5x5"]),
            ('published 5x5, item_names="renumbered"', published, {"item_names": "renumbered"}, sizes["5x5"]),
            ("bundled 5x7 (generated)", paper, {}, sizes["5x7"]),
            (f"generated 5x5 (seeds {' '.join(map(str, args.seeds))})", generated, {}, sizes["generated 5x5"]),
        ):
            print(row(label, means(specs(data, kwargs), SmallestName()), size), flush=True)
        print(row("random slot-valid, published 5x5", means(specs(published, {}), CheckGuidedSearch(max_calls=1)), 35))

        fit = dict(FIT["env_kwargs"])
        policies = {
            "check-search (250 calls)": CheckGuidedSearch(),
            "random slot-valid (check-search, no check)": CheckGuidedSearch(max_calls=1),
            "greedy-local": make_policy("greedy"),
            FIT["policy"]: make_policy(FIT["policy"]),
        }
        for title, data, size in (
            ("bundled 5x7", paper, sizes["5x7"]),
            ("generated 5x5", generated, sizes["generated 5x5"]),
        ):
            print(f"\n### {title}: default budgets (unlimited) vs FIT {fit}\n")
            print(header("policy, settings"))
            for name, policy in policies.items():
                for settings, kwargs in (("default", {}), ("FIT", fit)):
                    print(row(f"{name}, {settings}", means(specs(data, kwargs), policy), size), flush=True)


if __name__ == "__main__":
    main()

"""``ace-gym generate``: write dataset files in the published layout, with a progress bar."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ace_gym.cli_flags import add_common_flags, output_directory, progress_bar, resolve_domains
from ace_gym.generators.dataset import BACKENDS, dataset_file_name, generate_dataset
from ace_gym.presets import PAPER_5X7


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="generate certified dataset files (published layout)",
        description="Generate one dataset file per domain: every (hidden slots x decoy budget) instance, "
        "certified, byte-identical for any --workers. Defaults are the paper's 5x7 configuration.",
    )
    add_common_flags(
        parser,
        defaults={
            "hidden_slots": PAPER_5X7["hidden_slots"],
            "decoy_budgets": PAPER_5X7["decoy_budgets"],
            "seed": PAPER_5X7["seed"],
            "out": Path("."),
        },
        helps={
            "hidden_slots": "hidden-slot counts to generate, one instance per count and budget",
            "decoy_budgets": "decoy budgets to generate",
            "seed": "generator seed (same seed, same files)",
            "out": "folder to write the dataset files into (default: the current one)",
        },
    )
    parser.add_argument("--rows", type=int, default=PAPER_5X7["rows"], help="grid rows")
    parser.add_argument("--cols", type=int, default=PAPER_5X7["cols"], help="grid columns")
    parser.add_argument(
        "--candidates-per-slot",
        type=int,
        default=PAPER_5X7["candidates_per_slot"],
        help="candidates offered for each hidden slot (truth, filters and decoys)",
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes (output does not depend on it)")
    parser.add_argument(
        "--backend", choices=BACKENDS, default="local", help="ray: one Ray task per instance (RAY_ADDRESS or local)"
    )
    parser.add_argument("--time-budget", type=float, default=120.0, help="seconds allowed per instance")
    parser.add_argument("--gzip", action="store_true", help="write .json.gz (as bundled)")
    parser.set_defaults(handler=run, resume_hint="; dataset files already printed are whole")


def run(args: argparse.Namespace) -> int:
    out = output_directory(args.out)
    for domain in resolve_domains(args.domains):
        name = dataset_file_name(
            domain, args.rows, args.cols, args.hidden_slots, args.decoy_budgets, args.candidates_per_slot, args.seed
        )
        path = out / (name + (".gz" if args.gzip else ""))
        with progress_bar(None, domain, "instance", not args.no_progress) as bar:

            def progress(done: int, total: int, bar: Any = bar) -> None:
                bar.total = total
                bar.update(done - bar.n)

            generate_dataset(
                domain,
                rows=args.rows,
                cols=args.cols,
                hidden_slots=args.hidden_slots,
                decoy_budgets=args.decoy_budgets,
                candidates_per_slot=args.candidates_per_slot,
                seed=args.seed,
                path=path,
                workers=args.workers,
                time_budget=args.time_budget,
                progress=progress,
                backend=args.backend,
            )
        print(path)
    return 0
